"""Each config key is documented once, on its schema field (``doc=``), and the reference is written from there:
the "config keys" section that ends ``oml COMMAND --help``, the ``#`` comments above the keys of ``--show-config``,
and ``docs/config.md``."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from oml_core.cli import main
from oml_core.cli.index import INDEX_BUILD_CONFIG
from oml_core.cli.pipelines import PIPELINE_CONFIGS
from oml_core.config.compose import compose_config
from oml_core.config.reference import KeyReference, commented_yaml, help_section, key_references
from oml_core.config.rules import POSITIVE_INT, ComponentSpec, key_doc, setting
from oml_core.config.schemas import (
    SCHEMAS,
    ExtractorTrainingConfig,
    ExtractorValidationConfig,
    IndexBuildConfig,
    PipelineConfig,
    PostprocessorValidationConfig,
    SchedulingConfig,
    TrainingConfig,
)
from tests.scripts.config_reference import PAGE, UPDATE_HINT, config_page

ROOT = Path(__file__).resolve().parents[1]
#: ``(argv of the command, its schema's pipeline name)`` of every command that takes a config.
COMMANDS = [*(([command], pipeline) for command, pipeline in PIPELINE_CONFIGS.items())] + [
    (["index", "build"], INDEX_BUILD_CONFIG)
]
MAX_EPOCHS_DOC = (
    "The number of epochs to train (a resumed run goes on up to that many epochs in all; at most 100,000)."
)


def _as_one_line(lines: list[str]) -> str:
    return " ".join(line.strip() for line in lines)


# ------------------------------------------------------------------------------------------------- docs
@pytest.mark.parametrize(
    "schema", [*SCHEMAS.values(), SchedulingConfig, ComponentSpec], ids=lambda s: s.__name__
)
def test_every_field_of_every_schema_has_a_doc(schema):
    for f in fields(schema):
        doc = key_doc(schema, f.name)
        assert doc.strip() == doc and len(doc) >= 20, (schema.__name__, f.name, doc)
        assert doc[0].isupper() or doc[0] == "`", (schema.__name__, f.name, doc)
        assert doc.endswith("."), (schema.__name__, f.name, doc)


def test_a_field_redeclared_for_its_default_keeps_its_bases_doc():
    # postfix: PipelineConfig's doc, a default of each pipeline's own
    base = key_doc(PipelineConfig, "postfix")
    assert base.startswith("The end of the name of the run's folder, `<date>_<time>_<postfix>`")
    for schema in (ExtractorValidationConfig, PostprocessorValidationConfig, ExtractorTrainingConfig):
        assert key_doc(schema, "postfix") == base
    assert {f.name: f.default for f in fields(PostprocessorValidationConfig)}[
        "postfix"
    ] == "postprocessor_validation"
    # seed: required in the training schemas, the same key
    assert key_doc(TrainingConfig, "seed") == key_doc(PipelineConfig, "seed")
    # a field redeclared with a doc of its own has that one
    assert key_doc(PostprocessorValidationConfig, "postprocessor").startswith("The pairwise post-processor")
    assert key_doc(ExtractorValidationConfig, "postprocessor").startswith("A registered post-processor")


def test_a_field_without_a_doc_anywhere_is_named():
    @dataclass
    class Undocumented:
        bs: int = setting(POSITIVE_INT, 1)

    with pytest.raises(KeyError, match="Undocumented.bs has no documentation"):
        key_doc(Undocumented, "bs")
    with pytest.raises(KeyError, match="ExtractorTrainingConfig.max_epoch has no documentation"):
        key_doc(ExtractorTrainingConfig, "max_epoch")


def test_the_references_of_a_schema_with_a_nested_block():
    rows = {row.key: row for row in key_references(ExtractorTrainingConfig)}
    assert rows["max_epochs"] == KeyReference("max_epochs", "a positive int", "required", MAX_EPOCHS_DOC)
    assert rows["checkpoint_every_seconds"][1:3] == ("a number in [0, inf]", "60.0")
    assert rows["postfix"].default == '""' and rows["logs_root"].default == "logs"
    assert (
        rows["devices"].default == "null"
        and rows["tags"].default == "[]"
        and rows["metric_args"].default == "{}"
    )
    assert rows["show_dataset_warnings"].default == "true" and rows["resume"].default == "null"
    assert rows["criterion"].expected == "a {name, args} spec of a loss"
    assert rows["callbacks"].expected == "a list of {name, args} specs of callbacks"
    # scheduling's own keys follow it, with SchedulingConfig's docs
    keys = list(rows)
    at = keys.index("scheduling")
    assert keys[at : at + 5] == [
        "scheduling",
        "scheduling.scheduler",
        "scheduling.scheduler_interval",
        "scheduling.scheduler_frequency",
        "scheduling.monitor_metric",
    ]
    assert rows["scheduling.scheduler_interval"] == KeyReference(
        "scheduling.scheduler_interval",
        "'step' or 'epoch'",
        "step",
        key_doc(SchedulingConfig, "scheduler_interval"),
    )
    assert rows["scheduling.scheduler"].default == "required"
    # the index's keys: its own rules' wording
    index = {row.key: row for row in key_references(IndexBuildConfig)}
    assert index["bs"][1:3] == ("an integer >= 1", "required")
    assert index["check_images"][1:3] == ("true or false", "true")


# ------------------------------------------------------------------------------------------------- help
def _help(argv: list[str], capsys) -> str:
    assert main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def _section(out: str) -> list[str]:
    at = out.index("\nconfig keys (")
    return out[at + 1 :].splitlines()


def _entry(lines: list[str], key: str) -> tuple[str, str]:
    """The head of ``key`` in the help's section (its line ``<key>: ...``, and the lines indented by 4 that go on
    with it) and its doc (the lines indented by 6 after it), each as one line."""
    at = next(i for i, line in enumerate(lines) if line.startswith(f"  {key}: "))
    head, doc = [lines[at]], []
    for line in lines[at + 1 :]:
        if line.startswith("      "):
            doc.append(line)
        elif line.startswith("    ") and not doc:
            head.append(line)
        else:
            break
    return _as_one_line(head), _as_one_line(doc)


def test_train_help_ends_with_the_config_keys(capsys):
    out = _help(["train"], capsys)
    assert out.index("  --show-config          print the config as composed") < out.index("\nconfig keys (")
    lines = _section(out)
    assert lines[0].startswith(
        "config keys (ExtractorTrainingConfig; a default is the key's value when the config"
    )
    assert _entry(lines, "max_epochs") == ("max_epochs: a positive int; required", MAX_EPOCHS_DOC)
    assert _entry(lines, "valid_period")[0] == "valid_period: a positive int; default 1"
    assert _entry(lines, "mode_for_checkpointing")[0] == "mode_for_checkpointing: 'min' or 'max'; default max"
    assert _entry(lines, "scheduling.scheduler_interval")[0] == (
        "scheduling.scheduler_interval: 'step' or 'epoch'; default step"
    )
    head, doc = _entry(lines, "nan_policy")
    assert head == "nan_policy: 'stop' or 'skip_batch'; default stop"
    assert doc == key_doc(ExtractorTrainingConfig, "nan_policy") and "5 such batches in a row" in doc
    assert all(len(line) <= 110 for line in lines)
    assert _entry(lines, "precision")[0] == (
        "precision: one of 16, 32, 64, '16', '16-mixed', '16-true', '32', '32-true', '64', '64-true', 'bf16', "
        "'bf16-mixed', 'bf16-true', 'transformer-engine', 'transformer-engine-float16'; default 32"
    )
    assert out.endswith(help_section("extractor_training_pipeline"))


@pytest.mark.parametrize("argv, pipeline", COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_every_commands_help_has_every_key_of_its_schema(argv, pipeline, capsys):
    lines = _section(_help(argv, capsys))
    schema = SCHEMAS[pipeline]
    for f in fields(schema):
        head, doc = _entry(lines, f.name)
        assert doc == key_doc(schema, f.name), f.name
    if pipeline == INDEX_BUILD_CONFIG:
        assert _entry(lines, "bs")[0] == "bs: an integer >= 1; required"
        assert _entry(lines, "gallery_rows")[0] == "gallery_rows: one of ['all', 'gallery']; required"
    if pipeline == "extractor_prediction_pipeline":
        assert _entry(lines, "postfix")[0] == "postfix: a string; default prediction"


def test_building_the_parser_imports_no_schema():
    """The section is written when the help is shown: ``oml --version`` and every command that is no help do not
    pay for the schemas' imports (pandas among them)."""
    code = (
        "import json, sys; from oml_core.cli.commands import build_parser; build_parser(); "
        "print(json.dumps(['oml_core.config.schemas' in sys.modules, 'pandas' in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(done.stdout) == [False, False]


# ------------------------------------------------------------------------------------------ show config
def _comment_above(text: str, key: str) -> str:
    lines = text.splitlines()
    at = lines.index(next(line for line in lines if line.startswith(f"{key}:")))
    comment = []
    for line in reversed(lines[:at]):
        if not line.startswith("# "):
            break
        comment.insert(0, line[2:])
    return " ".join(comment)


@pytest.mark.parametrize("argv, pipeline", COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_show_config_comments_each_key_with_its_doc(argv, pipeline, capsys):
    overrides = ["num_workers=3"]
    assert main([*argv, "--show-config", *overrides]) == 0
    out = capsys.readouterr().out
    composed = OmegaConf.to_container(compose_config(pipeline, overrides), resolve=True)
    assert yaml.safe_load(out) == composed  # the comments change nothing of the config
    schema = SCHEMAS[pipeline]
    for key in composed:
        assert _comment_above(out, key) == key_doc(schema, key), key
    assert "num_workers: 3\n" in out


def test_show_config_comment_of_max_epochs(capsys):
    assert main(["train", "--show-config", "max_epochs=7"]) == 0
    out = capsys.readouterr().out
    assert (
        "\n# The number of epochs to train (a resumed run goes on up to that many epochs in all; at most 100,000).\n"
        "max_epochs: 7\n" in out
    )
    assert _comment_above(out, "max_epochs") == MAX_EPOCHS_DOC


def test_a_key_of_the_users_own_has_no_comment():
    config = {
        "max_epochs": 2,
        "my_weights": "a.ckpt",
        "scheduling": {"scheduler": {"name": "step", "args": {}}},
    }
    text = commented_yaml(config, "extractor_training_pipeline", width=60)
    assert text == (
        "# The number of epochs to train (a resumed run goes on up to\n"
        "# that many epochs in all; at most 100,000).\n"
        "max_epochs: 2\n"
        "\n"
        "my_weights: a.ckpt\n"
        "\n"
        "# The learning-rate scheduler and when Lightning steps it,\n"
        "# e.g. `{scheduler: {name: step, args: {step_size: 10}},\n"
        "# scheduler_interval: epoch, scheduler_frequency: 1,\n"
        "# monitor_metric: null}`; null (or `{}`): none.\n"
        "scheduling:\n"
        "  scheduler:\n"
        "    name: step\n"
        "    args: {}\n"
    )
    assert yaml.safe_load(text) == config


# ----------------------------------------------------------------------------------------- docs/config.md
def test_the_config_page_is_the_generators_output():
    assert PAGE.read_text(encoding="utf-8") == config_page(), UPDATE_HINT


def test_the_config_page_has_a_section_and_a_row_per_key():
    page = config_page()
    for command in [*PIPELINE_CONFIGS, "index build"]:
        assert f"\n## oml {command}\n" in page
    assert f"| `max_epochs` | a positive int | required | {MAX_EPOCHS_DOC} |" in page
    assert "| `bs` | an integer >= 1 | required | The batch size of the embedding (at most 65,536). |" in page
    assert "| `scheduling.scheduler_frequency` | a positive int | `1` | " in page
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert len(rows) == sum(
        len(key_references(SCHEMAS[p])) for p in (*PIPELINE_CONFIGS.values(), INDEX_BUILD_CONFIG)
    )


def test_the_readme_and_the_architecture_link_the_config_page():
    assert "(docs/config.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    architecture = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "(config.md)" in architecture
    row = next(
        line for line in architecture.splitlines() if line.startswith("| add a config key to a pipeline |")
    )
    assert "`doc`" in row and "the default yaml" in row and "the pipeline that reads it" in row
