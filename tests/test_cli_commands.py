"""The command line's own commands and flags: ``oml --version``, a pipeline's ``--help`` (its overrides and
default config) and ``--show-config`` (``--cfg job``), "did you mean" for a misspelt command, ``oml registry
KIND NAME``, the verdict of ``oml plugins --check`` and a closed pipe. In process through ``main`` wherever a
real process is not needed (the closed pipe needs one)."""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import subprocess
import sys
import warnings
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from oml_core.cli import main
from oml_core.cli.pipelines import PIPELINE_CONFIGS, PIPELINE_EXAMPLES
from oml_core.config.compose import OML_CONFIGS_DIR, compose_config
from oml_core.registry import Registry
from oml_core.registry.manager import BUILTINS_NAME

COMMANDS = [
    *PIPELINE_CONFIGS,
    "plugins",
    "plugin",
    "registry",
    "mock-dataset",
    "check-dataframe",
    "index",
    "search",
    "export",
]


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch):
    """Every installed plugin, loaded leniently; errors as one line."""
    for name in ("OML_LOAD_PLUGINS", "OML_STRICT_PLUGINS", "OML_TRACEBACK"):
        monkeypatch.delenv(name, raising=False)


def _distribution(root: Path, name: str, version: str, entry_points: dict[str, str]) -> None:
    """A real (metadata-only) distribution under ``root`` with ``oml`` entry points ``{name: module}``."""
    dist_info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    points = "".join(f"{point} = {module}\n" for point, module in entry_points.items())
    (dist_info / "entry_points.txt").write_text(f"[oml]\n{points}")


@pytest.fixture()
def broken_plugins(tmp_path: Path, monkeypatch) -> Path:
    """Two installed plugin distributions: one that does not import (``broken``), one whose loss ``ghost``
    names a module that does not exist (``ghostly``); only they are loaded."""
    (tmp_path / "broken_cli_plugin.py").write_text("raise ImportError('needs the package frobnicate')\n")
    _distribution(tmp_path, "broken-cli-plugin", "0.3", {"broken": "broken_cli_plugin"})
    (tmp_path / "ghostly_cli_plugin.py").write_text(
        "from oml_core import hookimpl\n\n\n"
        "@hookimpl\n"
        "def oml_register_losses(register):\n"
        "    register('ghost', 'no_such_module_of_oml_tests:Loss', description='a loss that is not there')\n"
    )
    _distribution(tmp_path, "ghostly-cli-plugin", "1.2.3", {"ghostly": "ghostly_cli_plugin"})
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


# ---------------------------------------------------------------------------------------------- version
def test_version_prints_the_core_and_every_plugin_distribution(capsys):
    assert main(["--version"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == f"oml-core {metadata.version('oml-core')}"
    printed = dict(line.split(" ") for line in lines[1:])
    expected = {
        record.info.distribution
        for record in Registry().plugins()
        if record.info.name != BUILTINS_NAME and record.info.distribution
    }
    assert set(printed) == expected and "oml-losses" in printed and "oml-models" in printed
    for distribution, version in printed.items():
        assert version == metadata.version(distribution), distribution


def test_version_reads_the_metadata_and_imports_no_plugin(broken_plugins, capsys, monkeypatch):
    """``oml --version`` lists the allowed distributions from their metadata: the plugin that does not import is
    listed like any other, and neither plugin module is imported (``oml plugins --check`` tells what loads)."""
    monkeypatch.setenv("OML_LOAD_PLUGINS", "broken,ghostly")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["--version"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"oml-core {metadata.version('oml-core')}",
        "broken-cli-plugin 0.3",
        "ghostly-cli-plugin 1.2.3",
    ]
    assert "broken_cli_plugin" not in sys.modules and "ghostly_cli_plugin" not in sys.modules


# ------------------------------------------------------------------------------------------------- help
@pytest.mark.parametrize("command", list(PIPELINE_CONFIGS))
def test_pipeline_help_explains_the_overrides_and_names_the_default_config(command, capsys):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    default = OML_CONFIGS_DIR / f"{PIPELINE_CONFIGS[command]}.yaml"
    assert default.is_absolute() and default.is_file()
    assert f"  the default config     {default.resolve()}\n" in out
    lines = out.splitlines()
    # the epilog's layout survives (RawDescriptionHelpFormatter): one row per syntax
    for row in (
        "KEY=VALUE",
        "A.B.C=VALUE",
        "KEY=[1,2]",
        "+KEY=VALUE",
        "~KEY",
        "KEY=null",
        "GROUP@KEY=OPTION",
    ):
        assert any(line.startswith(f"  {row} ") for line in lines), row
    for text in (
        "'KEY={name: NAME, args: {ARG: VALUE}}'",
        f"oml {command} '{PIPELINE_EXAMPLES[command]['inline']}'",
        "KEY.name=OTHER         switch to OTHER with OTHER's default config (the args are reset",
        "  oml registry KIND      the names of a kind",
        "  oml registry KIND NAME one component",
        "--show-config",
        "--cfg {job}, -c {job}",
    ):
        assert text in out, text
    examples = PIPELINE_EXAMPLES[command]
    for example in (*examples["replace"], examples["switch"]):
        assert f"oml {command} {example}" in out


def test_train_help_shows_the_components_of_the_issue(capsys):
    assert main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    for line in (
        "oml train loss@criterion=arcface criterion.args.in_features=512 criterion.args.num_classes=16",
        "oml train miner@criterion.args.miner=hard_triplets",
        "max_epochs=3",
        "optimizer.args.lr=0.5",
    ):
        assert line in out


@pytest.mark.parametrize("command", list(PIPELINE_CONFIGS))
def test_every_example_of_the_help_composes(command, capsys):
    """Every command line that a pipeline's --help shows composes with its config, and does what it says."""
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    epilog = out[out.index("\noverrides: hydra's") :]
    shown = [m.group(1) for m in re.finditer(rf"oml {command} (.+)$", epilog, flags=re.MULTILINE)]
    assert len(shown) >= 4
    ex = PIPELINE_EXAMPLES[command]
    assert all(f" {ex[key]}" in out for key in ("value", "nested", "list", "null"))
    registry = Registry()
    config_name = PIPELINE_CONFIGS[command]
    for line in [*shown, ex["nested"], ex["list"], ex["null"]]:
        overrides = [arg for arg in shlex.split(line) if arg != "--show-config"]
        cfg = compose_config(config_name, overrides, None, registry)
        first = overrides[0]
        if "@" in first:  # GROUP@KEY=OPTION: KEY is now OPTION's default config, then the overrides apply
            group, _, rest = first.partition("@")
            key, _, option = rest.partition("=")
            default = registry.default_config(group, option)
            assert OmegaConf.select(cfg, key).name == option
            assert set(OmegaConf.select(cfg, f"{key}.args")) == set(default["args"]), line
        elif first == ex["inline"]:  # the spec whole, nothing of the config's component kept
            key, _, value = first.partition("=")
            assert _select(cfg, key) == yaml.safe_load(value), line
        elif first == ex["switch"]:  # KEY.name=OTHER: OTHER's default config, the args reset
            key, _, other = first.partition(".name=")
            assert OmegaConf.to_container(OmegaConf.select(cfg, key)) == registry.default_config(key, other)
        else:
            key, _, value = first.partition("=")
            assert _select(cfg, key) == yaml.safe_load(value), line


def _select(cfg, key):
    value = OmegaConf.select(cfg, key)
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


# ------------------------------------------------------------------------------------------ show config
def test_show_config_prints_the_composed_config_resolved(capsys, monkeypatch):
    for module in ("oml_core.lightning", "lightning", "pytorch_lightning"):  # importing one would fail
        monkeypatch.setitem(sys.modules, module, None)
    overrides = ["max_epochs=3", "optimizer.args.lr=0.5", "loss@criterion=arcface"]
    assert main(["train", "--show-config", *overrides]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    shown = yaml.safe_load(captured.out)
    composed = compose_config(PIPELINE_CONFIGS["train"], overrides)
    assert shown == OmegaConf.to_container(composed, resolve=True)
    assert shown["max_epochs"] == 3 and shown["optimizer"]["args"]["lr"] == 0.5
    assert shown["criterion"]["name"] == "arcface" and "miner" not in shown["criterion"]["args"]


@pytest.mark.parametrize("flag", [["--cfg", "job"], ["-c", "job"], ["--cfg=job"]])
def test_hydras_cfg_job_is_show_config(flag, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "oml_core.lightning", None)
    assert main(["train", "--show-config", "max_epochs=5"]) == 0
    expected = capsys.readouterr().out
    assert main(["train", *flag, "max_epochs=5"]) == 0
    assert capsys.readouterr().out == expected
    assert yaml.safe_load(expected)["max_epochs"] == 5


def test_show_config_resolves_interpolations(capsys):
    assert main(["validate-postprocessor", "--show-config", "logs_root=/data/runs"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["embeddings_cache_dir"] == "/data/runs/embeddings_cache"
    assert shown["postprocessor"]["args"]["num_workers"] == shown["num_workers"]


def test_show_config_of_a_users_config(tmp_path, capsys):
    (tmp_path / "mine.yaml").write_text("a: 1\nb: ${a}\nc: {d: [1, 2]}\n")
    argv = ["train", "--config-path", str(tmp_path), "--config-name", "mine", "--show-config", "c.d=[3]"]
    assert main(argv) == 2  # shown, and what a run would refuse of it said after it
    captured = capsys.readouterr()
    assert yaml.safe_load(captured.out) == {"a": 1, "b": 1, "c": {"d": [3]}}
    assert captured.err.startswith(
        "oml train: error: a run would refuse this config: extractor_training_pipeline: the config lacks the key(s) "
    )
    assert captured.err.count("\n") == 1


def test_show_config_with_an_interpolation_that_does_not_resolve(tmp_path, capsys):
    (tmp_path / "mine.yaml").write_text("a: 1\nb: ${nowhere.x}\n")
    argv = ["predict", "-cp", str(tmp_path), "-cn", "mine", "--show-config"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("oml predict: error: cannot resolve the config: config key 'b': ")
    assert "nowhere.x" in captured.err and captured.err.count("\n") == 1


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("max_epoch=3", "unknown config key 'max_epoch'; did you mean 'max_epochs'?"),
        ("max_epochs=[1,", "bad override 'max_epochs=[1,': "),
    ],
)
def test_show_config_with_a_bad_override_is_one_line(override, fragment, capsys):
    assert main(["train", "--show-config", override]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"oml train: error: {fragment}")


# ---------------------------------------------------------------------------------- the command line
def known_commands() -> str:
    """The list that closes the ``unknown command`` error: oml's commands, then the installed plugins' (oml-serve's
    ``serve`` among them)."""
    plugin_commands = Registry().names("command")
    listed = f"; plugin commands: {', '.join(plugin_commands)}" if plugin_commands else ""
    return f"commands: {', '.join(COMMANDS)}{listed}"


def test_a_misspelt_command_gets_a_suggestion(capsys):
    assert main(["trian", "max_epochs=1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert (
        captured.err == f"oml: error: unknown command 'trian'; did you mean 'train'? ({known_commands()})\n"
    )
    assert main(["--traceback", "registy"]) == 2
    assert "unknown command 'registy'; did you mean 'registry'?" in capsys.readouterr().err


def test_an_unknown_command_without_a_close_match(capsys):
    assert main(["frobnicate"]) == 2
    assert capsys.readouterr().err == f"oml: error: unknown command 'frobnicate' ({known_commands()})\n"


@pytest.mark.parametrize(
    "argv, line",
    [
        (
            ["registry", "lsos"],
            "oml registry: error: argument KIND: unknown kind 'lsos'; did you mean 'loss'? (kinds: ",
        ),
        (["train", "--cfg", "hydra"], "oml train: error: argument --cfg/-c: invalid choice: 'hydra'"),
        (["plugins", "--format", "yaml"], "oml plugins: error: argument --format: invalid choice: 'yaml'"),
        (["plugins", "extra"], "oml plugins: error: unrecognized arguments: extra"),
    ],
)
def test_a_bad_command_line_is_one_line_without_usage(argv, line, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(line) and captured.err.count("\n") == 1 and "usage:" not in captured.err


# ------------------------------------------------------------------------------------------- registry
def test_registry_shows_one_component(capsys):
    from oml_losses import TripletLossWithMiner

    assert main(["registry", "loss", "triplet_with_miner"]) == 0
    out = capsys.readouterr().out
    version = metadata.version("oml-losses")
    assert "kind:        loss\n" in out
    assert "name:        triplet_with_miner (qualified: oml_losses:triplet_with_miner)\n" in out
    assert f"provider:    plugin oml_losses, distribution oml-losses {version}\n" in out
    assert "factory:     oml_losses.triplet:TripletLossWithMiner\n" in out
    parameters = inspect.signature(TripletLossWithMiner, eval_str=True).parameters
    assert list(parameters)[:4] == ["margin", "miner", "reduction", "need_logs"]
    for parameter in parameters.values():
        required = "  (required)" if parameter.default is inspect.Parameter.empty else ""
        assert f"\n    {parameter}{required}\n" in out, parameter
    assert "\n    reduction: str = 'mean'\n" in out
    margin = parameters["margin"]
    shown = "margin: float | None  (required)" if margin.default is margin.empty else f"= {margin.default!r}"
    assert shown in out
    header, _, config = out.partition(
        "default config (loss/triplet_with_miner.yaml; on the command line loss@KEY=triplet_with_miner):\n"
    )
    assert config, out
    assert yaml.safe_load(config) == Registry().default_config("loss", "triplet_with_miner")
    assert yaml.safe_load(config)["args"]["miner"] == {"name": "all_triplets", "args": {}}


def test_registry_shows_one_component_as_json(capsys):
    from oml_losses import TripletLossWithMiner

    assert main(["registry", "loss", "triplet_with_miner", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    registry = Registry()
    assert {k: shown[k] for k in registry.describe("loss", "triplet_with_miner")} == registry.describe(
        "loss", "triplet_with_miner"
    )
    assert shown["distribution"] == "oml-losses" and shown["version"] == metadata.version("oml-losses")
    assert shown["default_config"] == registry.default_config("loss", "triplet_with_miner")
    parameters = inspect.signature(TripletLossWithMiner).parameters
    assert [a["name"] for a in shown["arguments"]] == list(parameters)
    for argument in shown["arguments"]:
        parameter = parameters[argument["name"]]
        assert argument["required"] == (parameter.default is parameter.empty)
        if parameter.default is not parameter.empty:
            assert argument["default"] == parameter.default
        else:
            assert "default" not in argument
    reduction = next(a for a in shown["arguments"] if a["name"] == "reduction")
    assert reduction == {
        "name": "reduction",
        "kind": "positional_or_keyword",
        "annotation": "str",
        "required": False,
        "default": "mean",
    }


def test_registry_shows_a_component_without_a_default_config(capsys):
    registry = Registry()
    assert registry.default_config("retrieval_metric", "cmc") is None
    assert main(["registry", "retrieval_metric", "cmc"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\ndefault config: (no default config)\n")
    assert f"provider:    plugin oml_core, distribution oml-core {metadata.version('oml-core')}\n" in out
    parameters = inspect.signature(registry.get("retrieval_metric", "cmc").load(), eval_str=True).parameters
    assert parameters and all(f"\n    {parameter}" in out for parameter in parameters.values())
    assert main(["registry", "retrieval_metric", "cmc", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["default_config"] is None and [a["name"] for a in shown["arguments"]] == list(parameters)


def test_registry_shows_a_component_by_its_alias(capsys):
    assert main(["registry", "miner", "BatchHardMiner", "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["name"] == "pml_batch_hard" and shown["aliases"] == ["BatchHardMiner"]
    assert shown["default_config"]["name"] == "pml_batch_hard"


def test_registry_shows_a_component_that_does_not_import(broken_plugins, capsys, monkeypatch):
    monkeypatch.setenv("OML_LOAD_PLUGINS", "ghostly")
    assert main(["registry", "loss", "ghost"]) == 0
    out = capsys.readouterr().out
    assert "provider:    plugin ghostly, distribution ghostly-cli-plugin 1.2.3\n" in out
    assert "description: a loss that is not there\n" in out
    assert "arguments:\n    <unavailable: PluginLoadError: loss 'ghost' of plugin ghostly" in out
    assert out.endswith("default config: (no default config)\n")


def test_registry_unknown_name_is_one_line_with_close_matches(capsys):
    assert main(["registry", "loss", "tripplet_with_miner"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(
        "oml registry: error: Unknown loss 'tripplet_with_miner'. Did you mean: triplet_with_miner"
    )


def test_registry_of_a_kind_and_of_all_kinds_still_work(capsys):
    assert main(["registry", "sampler"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sampler (") and "    balance " in out and "oml_samplers" in out
    assert main(["registry", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {"kind": "loss", "name": "triplet_with_miner", "plugin": "oml_losses"}.items() <= next(
        r for r in rows if r["name"] == "triplet_with_miner"
    ).items()


# -------------------------------------------------------------------------------------------- plugins
# `oml plugins --check` of every installed plugin: tests/test_readme.py::test_every_shell_command_runs_as_written
def test_plugins_check_ends_with_failed(broken_plugins, capsys, monkeypatch):
    monkeypatch.setenv("OML_LOAD_PLUGINS", "broken,ghostly,oml_samplers")
    with pytest.warns(Warning, match="broken"):
        assert main(["plugins", "--check"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "    FAILED: " in "\n".join(lines) and any(
        line.startswith("    BROKEN: loss 'ghost'") for line in lines
    )
    assert lines[-1] == "FAILED: 2 problems in 2 plugins (see above)"


def test_plugins_check_json_stays_json_and_the_verdict_goes_to_stderr(broken_plugins, capsys, monkeypatch):
    monkeypatch.setenv("OML_LOAD_PLUGINS", "ghostly,oml_samplers")
    assert main(["plugins", "--check", "--format", "json"]) == 1
    captured = capsys.readouterr()
    report = {row["name"]: row for row in json.loads(captured.out)}
    assert set(report) == {"ghostly", "oml_samplers"} and len(report["ghostly"]["broken"]) == 1
    assert captured.err.splitlines()[-1] == "FAILED: 1 problem in 1 plugin (see above)"
    monkeypatch.setenv("OML_LOAD_PLUGINS", "oml_samplers")
    assert main(["plugins", "--check", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0]["name"] == "oml_samplers"
    assert captured.err == "OK: 1 plugin, 3 components load\n"


# --------------------------------------------------------------------------------------- a closed pipe
@pytest.fixture()
def many_components(tmp_path: Path) -> dict[str, str]:
    """The environment of a process that has, beside the installed plugins, one that registers 4000 losses:
    ``oml registry`` writes far more than a pipe holds (64 KiB), so that ``| head -1`` really closes it on
    oml's writes."""
    (tmp_path / "many_cli_plugin.py").write_text(
        "from oml_core import hookimpl\n\n\n"
        "@hookimpl\n"
        "def oml_register_losses(register):\n"
        "    for i in range(4000):\n"
        "        register(f'many_loss_{i:04d}', 'many_cli_plugin:Loss', description=f'the loss number {i}')\n"
    )
    _distribution(tmp_path, "many-cli-plugin", "0.1", {"many": "many_cli_plugin"})
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(tmp_path), os.environ.get("PYTHONPATH")))),
    }
    for name in ("OML_LOAD_PLUGINS", "OML_TRACEBACK"):
        env.pop(name, None)
    return env


@pytest.mark.parametrize("args", [["registry", "--format", "json"], ["registry"]])
def test_a_pipe_closed_by_head_ends_quietly(args, many_components):
    oml = shlex.join([sys.executable, "-m", "oml_core.cli", *args])
    script = f'{oml} | head -1; echo "oml exited with ${{PIPESTATUS[0]}}"'
    result = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=many_components, timeout=120, check=False
    )
    assert result.stderr == ""
    first = "[" if "json" in args else "extractor (models that map inputs to embeddings):"
    # status 1: oml's write failed with EPIPE (the pipe was really closed), and it stopped without a word
    assert result.stdout == f"{first}\noml exited with 1\n"
