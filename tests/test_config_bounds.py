"""Bounded configs (:mod:`oml_core.config.bounds`): a "billion laughs" yaml, a config with an 800,000-item list and a
20,000-deep nesting are each refused in one line before hydra or omegaconf reads them (they used to take minutes,
or end in a ``RecursionError``); so are overrides of the like and configs given as dicts; counts past their
plausibility bounds (``max_epochs=10**12``) are refused naming the key and the limit; an override of a key
replaced later on the command line follows hydra's order (the last wins); ``--show-config`` says what a run would
refuse."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from oml_core.cli import main
from oml_core.config.bounds import (
    MAX_BATCH_SIZE,
    MAX_CONFIG_DEPTH,
    MAX_CONFIG_FILE_BYTES,
    MAX_CONFIG_VALUES,
    MAX_EPOCHS,
    MAX_LIST_ITEMS,
    MAX_OVERRIDE_CHARS,
    MAX_OVERRIDE_ITEMS,
    check_config_file,
)
from oml_core.config.compose import OML_CONFIGS_DIR, compose_config
from oml_core.config.typed import validate_config
from oml_core.registry import ConfigError

TRAIN = "extractor_training_pipeline"
REPO = Path(__file__).parents[1]


def billion_laughs(path: Path) -> Path:
    """The "billion laughs" yaml: 9 levels of 10 aliases of the level below, 10**9 values once expanded, in
    about 600 bytes."""
    lines = ["lol0: &lol0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"lol{i}: &lol{i} [{', '.join([f'*lol{i - 1}'] * 10)}]" for i in range(1, 10)]
    path.write_text("\n".join(lines) + "\nmax_epochs: 1\n")
    return path


def large_list(path: Path, items: int = 800_000) -> Path:
    path.write_text(f"max_epochs: 1\ntags: [{', '.join(['0'] * items)}]\n")
    return path


def deep_nesting(path: Path, depth: int = 20_000) -> Path:
    path.write_text(f"max_epochs: 1\ntags: {'[' * depth}{']' * depth}\n")
    return path


def one_line(error: pytest.ExceptionInfo[ConfigError]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


# ------------------------------------------------------------------------------------------------ files
def test_a_billion_laughs_yaml_is_refused_before_expansion(tmp_path):
    bomb = billion_laughs(tmp_path / "bomb.yaml")
    assert bomb.stat().st_size < 1_000
    with pytest.raises(ConfigError) as error:
        check_config_file(bomb)
    message = one_line(error)
    assert message.startswith(f"{str(bomb)!r}, line 5: lol4[")
    assert message.endswith(f"YAML aliases expand past the limit of {MAX_CONFIG_VALUES:,} values of a config")


def test_an_800000_item_list_is_refused_by_the_files_size(tmp_path):
    big = large_list(tmp_path / "big.yaml")
    with pytest.raises(ConfigError) as error:
        check_config_file(big)
    size = big.stat().st_size
    assert one_line(error) == (
        f"{str(big)!r}: {size:,} bytes is past the limit of {MAX_CONFIG_FILE_BYTES:,} bytes of a config file"
    )


def test_a_list_of_more_items_than_the_limit_is_refused_naming_its_key(tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text(f"metric_args:\n  cmc_top_k: [{', '.join(['1'] * (MAX_LIST_ITEMS + 1))}]\n")
    with pytest.raises(ConfigError) as error:
        check_config_file(path)
    assert one_line(error) == (
        f"{str(path)!r}, line 2: metric_args.cmc_top_k[{MAX_LIST_ITEMS}]: a list of more than "
        f"{MAX_LIST_ITEMS:,} items is past the limit of {MAX_LIST_ITEMS:,} items"
    )


def test_more_values_than_the_limit_are_refused(tmp_path):
    path = tmp_path / "wide.yaml"
    path.write_text("".join(f"k{i}: {i}\n" for i in range(MAX_CONFIG_VALUES // 2 + 1)))
    with pytest.raises(ConfigError, match=f"past the limit of {MAX_CONFIG_VALUES:,} values of a config$"):
        check_config_file(path)


@pytest.mark.parametrize("flow", [True, False], ids=["flow", "block"])
def test_a_deep_nesting_is_refused_without_recursion(tmp_path, flow):
    path = deep_nesting(tmp_path / "deep.yaml")  # 20,000 levels of lists
    if not flow:  # 1,000 levels of mappings, indented by one space each
        path.write_text("tags:\n" + "".join(f"{' ' * (i + 1)}k:\n" for i in range(1_000)))
    with pytest.raises(ConfigError) as error:
        check_config_file(path)
    message = one_line(error)
    assert message.startswith(f"{str(path)!r}, line ")
    assert message.endswith(f"nested deeper than the limit of {MAX_CONFIG_DEPTH} levels of a config")


def test_an_alias_counts_the_depth_of_its_anchor(tmp_path):
    half = MAX_CONFIG_DEPTH // 2 + 1
    path = tmp_path / "aliases.yaml"
    path.write_text(f"a: &x {'[' * half}1{']' * half}\nb: {'[' * half}*x {']' * half}\n")
    with pytest.raises(ConfigError, match=r"line 2: b\[0\].*: nested deeper than the limit of 32 levels"):
        check_config_file(path)


def test_oml_and_its_plugins_configs_are_within_the_bounds():
    files = [*OML_CONFIGS_DIR.rglob("*.yaml"), *REPO.glob("plugins/*/oml_*/configs/**/*.yaml")]
    assert len(files) > 50
    for path in files:
        check_config_file(path)


def test_a_file_that_is_not_yaml_is_left_to_the_composition(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("a: [1,\n")
    check_config_file(path)  # the composition names the line and column
    with pytest.raises(ConfigError, match=r"cannot parse the config file .*broken.yaml'?: line 2"):
        compose_config("broken", [], str(tmp_path))


# ------------------------------------------------------------------------------------------ composition
@pytest.mark.parametrize(
    "write, fragment",
    [
        (billion_laughs, "YAML aliases expand past the limit"),
        (large_list, "bytes is past the limit"),
        (deep_nesting, "nested deeper than the limit"),
    ],
    ids=["billion_laughs", "large_list", "deep_nesting"],
)
def test_compose_refuses_the_users_bad_files_before_hydra_reads_them(tmp_path, write, fragment):
    (tmp_path / "loss").mkdir()
    (tmp_path / "mine.yaml").write_text("max_epochs: 1\n")
    bad = write(tmp_path / "loss" / "bad.yaml")  # a config group's option, which hydra may read
    with pytest.raises(ConfigError) as error:
        compose_config("mine", [], str(tmp_path))
    assert one_line(error).startswith(repr(str(bad)))
    assert fragment in str(error.value)


def test_compose_checks_the_folders_of_the_configs_own_search_path(tmp_path):
    (tmp_path / "main").mkdir()
    (tmp_path / "more").mkdir()
    billion_laughs(tmp_path / "more" / "bomb.yaml")
    (tmp_path / "main" / "mine.yaml").write_text(
        f"hydra:\n  searchpath: ['file://{tmp_path / 'more'}']\nmax_epochs: 1\n"
    )
    with pytest.raises(ConfigError, match=r"bomb.yaml', line 5: .*YAML aliases expand past the limit"):
        compose_config("mine", [], str(tmp_path / "main"))


@pytest.mark.parametrize(
    "override, message",
    [
        (
            f"tags=[{','.join(['1'] * 30_000)}]",
            f"an override of 60,006 characters is past the limit of {MAX_OVERRIDE_CHARS:,}",
        ),
        (
            f"tags=[{','.join(['1'] * (MAX_OVERRIDE_ITEMS + 1))}]",
            f"an override of {MAX_OVERRIDE_ITEMS + 1:,} items is past the limit of {MAX_OVERRIDE_ITEMS:,}",
        ),
        (
            f"tags={'[' * 3000}{']' * 3000}",
            f"nested 3,000 levels deep, past the limit of {MAX_CONFIG_DEPTH} levels",
        ),
    ],
    ids=["long", "many_items", "deep"],
)
def test_overrides_past_the_bounds_are_refused_before_hydra_parses_them(override, message):
    with pytest.raises(ConfigError) as error:
        compose_config(TRAIN, [override])
    assert one_line(error).startswith("tags=[")
    assert message in str(error.value)


# ------------------------------------------------------------------------------------ configs as dicts
def default_train_config() -> dict:
    return OmegaConf.to_container(compose_config(TRAIN, []), resolve=True)


def test_a_dict_config_with_an_800000_item_list_is_refused_naming_the_key():
    cfg = {**default_train_config(), "tags": list(range(800_000))}
    with pytest.raises(ConfigError) as error:
        validate_config(cfg, TRAIN)
    assert one_line(error) == (
        f"{TRAIN}: tags: a list of 800,000 items is past the limit of {MAX_LIST_ITEMS:,} items"
    )


def test_a_20000_deep_dict_config_is_refused_without_recursion():
    deep: dict = {}
    inner = deep
    for _ in range(20_000):
        inner["a"] = {}
        inner = inner["a"]
    cfg = {**default_train_config(), "lightning_trainer_extra_args": deep}
    with pytest.raises(ConfigError) as error:
        validate_config(cfg, TRAIN)
    message = one_line(error)
    assert message.startswith(f"{TRAIN}: lightning_trainer_extra_args.a.a.a.")
    assert message.endswith(f"nested deeper than the limit of {MAX_CONFIG_DEPTH} levels of a config")


# ------------------------------------------------------------------------------------------------ counts
@pytest.mark.parametrize(
    "key, value, limit",
    [
        ("max_epochs", 10**12, MAX_EPOCHS),
        ("valid_period", MAX_EPOCHS + 1, MAX_EPOCHS),
        ("freeze_n_epochs", MAX_EPOCHS + 1, MAX_EPOCHS),
        ("bs_val", 10**9, MAX_BATCH_SIZE),
        ("bs_train", MAX_BATCH_SIZE + 1, MAX_BATCH_SIZE),
    ],
)
def test_counts_past_their_bounds_are_refused_naming_the_key_and_the_limit(key, value, limit):
    with pytest.raises(ConfigError) as error:
        validate_config(compose_config(TRAIN, [f"{key}={value}"]), TRAIN)
    assert one_line(error) == f"{key}: {value} is past the limit of {limit:,}"


def test_counts_at_their_bounds_are_accepted():
    overrides = [f"max_epochs={MAX_EPOCHS}", f"bs_val={MAX_BATCH_SIZE}", f"freeze_n_epochs={MAX_EPOCHS}"]
    config = validate_config(compose_config(TRAIN, overrides), TRAIN)
    assert (config.max_epochs, config.bs_val, config.freeze_n_epochs) == (
        MAX_EPOCHS,
        MAX_BATCH_SIZE,
        MAX_EPOCHS,
    )


@pytest.mark.parametrize(
    "pipeline, key",
    [("extractor_prediction_pipeline", "bs"), ("postprocessor_training_pipeline", "batch_size_inference")],
)
def test_the_batch_sizes_of_the_other_pipelines_are_bounded(pipeline, key):
    with pytest.raises(ConfigError, match=f"^{key}: 100000 is past the limit of {MAX_BATCH_SIZE:,}$"):
        validate_config(compose_config(pipeline, [f"{key}=100000"]), pipeline)


def test_the_index_builds_batch_size_is_bounded():
    with pytest.raises(ConfigError, match=f"^bs: 100000 is past the limit of {MAX_BATCH_SIZE:,}$"):
        validate_config(compose_config("index_build", ["bs=100000"]), "index_build")


def test_a_bound_is_said_in_the_keys_doc():
    from oml_core.config.rules import key_doc
    from oml_core.config.schemas import ExtractorTrainingConfig

    assert key_doc(ExtractorTrainingConfig, "max_epochs").endswith(f"at most {MAX_EPOCHS:,}).")
    assert key_doc(ExtractorTrainingConfig, "bs_val").endswith(f"(at most {MAX_BATCH_SIZE:,}).")


# ------------------------------------------------------------------------------------------ override order
def test_a_mapping_after_a_value_of_the_same_key_wins():
    cfg = compose_config(TRAIN, ["max_epochs=3", "max_epochs={a: 1}"])
    assert OmegaConf.to_container(cfg.max_epochs) == {"a": 1}
    with pytest.raises(ConfigError, match=r"^max_epochs: expected a positive int, got \{'a': 1\}$"):
        validate_config(cfg, TRAIN)


def test_a_value_after_a_mapping_of_the_same_key_wins():
    assert compose_config(TRAIN, ["max_epochs={a: 1}", "max_epochs=3"]).max_epochs == 3


def test_a_spec_after_a_name_of_the_same_key_wins():
    cfg = compose_config(TRAIN, ["optimizer=sgd", "optimizer={name: adam, args: {lr: 0.5}}"])
    assert OmegaConf.to_container(cfg.optimizer) == {"name": "adam", "args": {"lr": 0.5}}


def test_the_overrides_below_a_replaced_key_still_apply_after_it():
    cfg = compose_config(TRAIN, ["optimizer.args.lr=0.25", "optimizer={name: sgd, args: {lr: 0.1}}"])
    assert OmegaConf.to_container(cfg.optimizer) == {"name": "sgd", "args": {"lr": 0.25}}


# ------------------------------------------------------------------------------------------- show config
def test_show_config_says_what_a_run_would_refuse(capsys):
    assert main(["train", "--show-config", "max_epochs=1000000000000"]) == 2
    captured = capsys.readouterr()
    assert yaml.safe_load(captured.out)["max_epochs"] == 10**12
    assert captured.err == (
        "oml train: error: a run would refuse this config: max_epochs: 1000000000000 is past the limit of "
        f"{MAX_EPOCHS:,}\n"
    )


def test_show_config_of_the_index_build_says_what_a_build_would_refuse(capsys):
    assert main(["index", "build", "--show-config", "bs=0"]) == 2
    captured = capsys.readouterr()
    assert yaml.safe_load(captured.out)["bs"] == 0
    assert captured.err == (
        "oml index build: error: a run would refuse this config: bs must be an integer >= 1, got 0\n"
    )


def test_oml_refuses_a_billion_laughs_config_in_one_line(run_oml, tmp_path):
    bomb = billion_laughs(tmp_path / "bomb.yaml")
    result = run_oml(
        "train", "--config-path", str(tmp_path), "--config-name", "bomb", "--show-config", timeout=120
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"oml train: error: {str(bomb)!r}, line 5: lol4[")
    assert result.stderr.count("\n") == 1
