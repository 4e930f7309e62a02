"""Composing pipeline configs: ``GROUP@KEY=OPTION`` replaces a component whole (hydra alone would merge the
option into the old component's arguments), the overrides of a replaced key apply after it, and a config that
selects the group in its own defaults list keeps hydra's semantics."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from oml_core.cli import main
from oml_core.config.compose import compose_config
from oml_core.registry import ConfigError, Registry

TRAIN = "extractor_training_pipeline"
ARCFACE = {
    "name": "arcface",
    "args": {
        "in_features": 384,
        "num_classes": 3985,
        "m": 0.4,
        "s": 64,
        "smoothing_epsilon": 0,
        "reduction": "mean",
    },
}


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry()


def _plain(cfg, key: str):
    return OmegaConf.to_container(OmegaConf.select(cfg, key), resolve=True)


def test_hydra_alone_merges_the_option_into_the_old_component(registry):
    """Why the replacement exists: ``+loss@criterion=arcface`` keeps the triplet loss's margin and miner."""
    criterion = _plain(compose_config(TRAIN, ["+loss@criterion=arcface"], registry=registry), "criterion")
    assert criterion["name"] == "arcface"
    assert {"margin", "miner"} <= set(criterion["args"])


def test_a_selection_replaces_the_component_with_the_option_file(registry):
    cfg = compose_config(TRAIN, ["loss@criterion=arcface"], registry=registry)
    assert _plain(cfg, "criterion") == ARCFACE
    assert _plain(cfg, "optimizer") == {"name": "adam", "args": {"lr": 0.0003}}  # the rest untouched


@pytest.mark.parametrize(
    "overrides",
    [
        ["loss@criterion=arcface", "criterion.args.num_classes=4", "max_epochs=2"],
        ["criterion.args.num_classes=4", "loss@criterion=arcface", "max_epochs=2"],  # order does not matter
    ],
)
def test_overrides_of_a_replaced_key_apply_after_the_replacement(registry, overrides):
    cfg = compose_config(TRAIN, overrides, registry=registry)
    assert _plain(cfg, "criterion") == {"name": "arcface", "args": {**ARCFACE["args"], "num_classes": 4}}
    assert cfg.max_epochs == 2


def test_the_overrides_of_a_replaced_key_keep_their_order(registry):
    overrides = [
        "loss@criterion=arcface",
        "criterion.args.m=0.1",
        "criterion.args.m=0.3",
        "~criterion.args.s",
    ]
    args = _plain(compose_config(TRAIN, overrides, registry=registry), "criterion.args")
    assert args["m"] == 0.3
    assert "s" not in args


def test_a_nested_component_is_replaced_and_the_result_builds(registry):
    overrides = ["miner@criterion.args.miner=n_hard_triplets", "criterion.args.margin=0.3"]
    cfg = compose_config(TRAIN, overrides, registry=registry)
    miner = _plain(cfg, "criterion.args.miner")
    assert miner == OmegaConf.to_container(
        OmegaConf.create(registry.default_config("miner", "n_hard_triplets"))
    )
    criterion = registry.build("loss", _plain(cfg, "criterion"))
    assert type(criterion.miner).__name__ == "NHardTripletsMiner"
    assert criterion.margin == 0.3


def test_a_replaced_extractor_builds_with_its_own_arguments(registry):
    overrides = ["extractor@extractor=vit", "extractor.args.weights=null", "extractor.args.arch=vits16"]
    spec = _plain(compose_config(TRAIN, overrides, registry=registry), "extractor")
    assert spec["name"] == "vit"
    assert "gem_p" not in spec["args"]  # the ResNet's arguments are gone
    assert registry.build("extractor", spec).feat_dim == 384


def test_a_selection_of_the_configs_own_defaults_list_is_hydras(tmp_path, registry):
    (tmp_path / "loss").mkdir()
    (tmp_path / "loss" / "mine.yaml").write_text("name: triplet\nargs:\n  margin: 0.5\n")
    (tmp_path / "run.yaml").write_text(
        "defaults:\n  - loss@criterion: mine\n  - _self_\nmax_epochs: 1\ncriterion:\n  args:\n    reduction: sum\n"
    )
    own = compose_config("run", [], config_path=str(tmp_path), registry=registry)
    assert _plain(own, "criterion") == {"name": "triplet", "args": {"margin": 0.5, "reduction": "sum"}}
    switched = compose_config("run", ["loss@criterion=arcface"], config_path=str(tmp_path), registry=registry)
    # hydra's semantics: the option switches and the primary config's own values still merge over it
    assert _plain(switched, "criterion") == {
        "name": "arcface",
        "args": {**ARCFACE["args"], "reduction": "sum"},
    }


def test_a_user_config_dir_option_replaces_too(tmp_path, registry):
    (tmp_path / "loss").mkdir()
    (tmp_path / "loss" / "my_triplet.yaml").write_text("name: triplet\nargs:\n  margin: 0.7\n")
    (tmp_path / "run.yaml").write_text("criterion:\n  name: arcface\n  args:\n    m: 0.4\n")
    cfg = compose_config("run", ["loss@criterion=my_triplet"], config_path=str(tmp_path), registry=registry)
    assert _plain(cfg, "criterion") == {"name": "triplet", "args": {"margin": 0.7}}


def test_a_schema_key_a_user_config_lacks_is_added_by_its_override(tmp_path, registry):
    """``logs_folder=run1`` (a key of the pipeline's schema) on a user's config without it adds it, as
    ``+logs_folder=run1``; a key of no schema (``max_epoch``), a spec and a nested key stay hydra's errors; a
    config with a defaults list is left to hydra."""
    (tmp_path / "run.yaml").write_text("max_epochs: 1\nseed: 3\n")
    schema = ("logs_folder", "max_epochs", "seed", "sampler", "extractor")
    cfg = compose_config(
        "run",
        ["logs_folder=run1", "seed=4"],
        config_path=str(tmp_path),
        registry=registry,
        schema_keys=schema,
    )
    assert OmegaConf.to_container(cfg) == {"max_epochs": 1, "seed": 4, "logs_folder": "run1"}
    for override, key in (
        ("max_epoch=2", "max_epoch"),
        ("extractor.args.arch=resnet34", "extractor"),
        ("sampler={name: balance}", "sampler"),
    ):
        with pytest.raises(ConfigError, match=f"'{key}'"):
            compose_config(
                "run", [override], config_path=str(tmp_path), registry=registry, schema_keys=schema
            )
    (tmp_path / "listed.yaml").write_text("defaults:\n  - _self_\nmax_epochs: 1\n")
    with pytest.raises(ConfigError, match="unknown config key 'logs_folder'"):
        compose_config(
            "listed", ["logs_folder=run1"], config_path=str(tmp_path), registry=registry, schema_keys=schema
        )


def test_replacing_a_key_the_config_does_not_have_names_it(registry):
    with pytest.raises(
        ConfigError, match=r"loss@loss_fn=arcface: the config has no key 'loss_fn'.*\+loss@loss_fn"
    ):
        compose_config(TRAIN, ["loss@loss_fn=arcface"], registry=registry)


def test_an_unknown_option_is_hydras_error(registry):
    with pytest.raises(ConfigError, match="arcfase"):
        compose_config(TRAIN, ["loss@criterion=arcfase"], registry=registry)


def test_the_cli_reports_a_bad_selection_in_one_line(capsys, tmp_path):
    assert main(["train", "loss@loss_fn=arcface", f"logs_root={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("oml train: error: loss@loss_fn=arcface: the config has no key 'loss_fn'")
    assert "\n" not in err
    assert not any(tmp_path.iterdir())  # nothing was written


@pytest.mark.parametrize(
    ("override", "line"),
    [
        (
            "extractor=5",
            "extractor=5: config key 'extractor' takes a component, by its name (extractor.name=NAME) or as a spec "
            "('extractor={name: NAME, args: {...}}'), not 5",
        ),
        (
            "criterion=[1]",
            "criterion=[1]: config key 'criterion' takes a component, by its name (criterion.name=NAME) or as a "
            "spec ('criterion={name: NAME, args: {...}}'), not [1]",
        ),
        (
            "extractor=vit",
            "extractor=vit: config key 'extractor' takes a component: give its name as extractor.name=vit (or its "
            "spec, 'extractor={name: vit, args: {...}}')",
        ),
        ("extractor.name=5", "extractor.name: expected a string, got 5"),
    ],
)
def test_a_component_key_given_no_component_says_what_it_takes_in_one_line(capsys, tmp_path, override, line):
    """``extractor`` and OML's ``criterion`` are config groups too: hydra alone takes ``KEY=VALUE`` for a choice
    of an option of the group, and fails with an error naming neither (a ``ValueError`` for a number)."""
    assert main(["train", override, f"logs_root={tmp_path}"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"oml train: error: {line}"]
    assert not any(tmp_path.iterdir())  # nothing was written


def test_key_null_sets_a_component_to_null_where_hydra_sees_a_config_group(registry):
    """``sampler`` is also a config group (the samplers' default configs), so hydra alone refuses
    ``sampler=null``; OML's configs use it for plain batches of ``bs_train``."""
    cfg = compose_config(TRAIN, ["sampler=null", "bs_train=16", "logs_folder=null"], registry=registry)
    assert cfg.sampler is None and cfg.bs_train == 16 and cfg.logs_folder is None
    assert compose_config(TRAIN, ["loss@criterion=null"], registry=registry).criterion is None
    with pytest.raises(ConfigError, match=r"^nokey=null: the config has no key 'nokey' to replace"):
        compose_config(TRAIN, ["nokey=null"], registry=registry)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            ["max_epoch=1"],
            r"^unknown config key 'max_epoch'; did you mean 'max_epochs'\? \(known keys: accelerator, .*, "
            r"validate_before_training; to add a new key: \+max_epoch=1\)$",
        ),
        (
            ["extractor.args.archh=resnet18"],
            r"^unknown config key 'extractor.args.archh'; did you mean 'extractor.args.arch'\? \(known keys under "
            r"'extractor.args': arch, gem_p, normalise_features, remove_fc, weights; "
            r"to add a new key: \+extractor.args.archh=resnet18\)$",
        ),
        (  # the keys of the composed config at that level: those of the replacing component
            ["extractor@extractor=vit", "extractor.args.gem_p=3"],
            r"^unknown config key 'extractor.args.gem_p' \(known keys under 'extractor.args': arch, "
            r".*weights; to add a new key: \+extractor.args.gem_p=3\)$",
        ),
        (
            ["max_epochs.x=1"],
            r"^unknown config key 'max_epochs.x' \(there are no keys under 'max_epochs'; "
            r"to add a new key: \+max_epochs.x=1\)$",
        ),
    ],
)
def test_an_unknown_key_gets_the_close_match_the_known_keys_and_last_the_plus_hint(
    registry, overrides, message
):
    with pytest.raises(ConfigError, match=message):
        compose_config(TRAIN, overrides, registry=registry)


def test_a_bad_override_is_named_before_any_config_is_read(registry):
    with pytest.raises(ConfigError, match=r"^bad override 'max_epochs=\[1,': .* \(see https://hydra.cc/"):
        compose_config("no_such_config", ["bs_val=8", "max_epochs=[1,"], registry=registry)


def test_a_yaml_error_names_the_file_line_and_column(tmp_path, registry):
    (tmp_path / "loss").mkdir()
    (tmp_path / "loss" / "mine.yaml").write_text("name: triplet\nargs:\n  margin: 0.5\n\tmiss: 1\n")
    (tmp_path / "run.yaml").write_text("criterion: null\n")
    with pytest.raises(
        ConfigError,
        match=rf"^cannot parse the config file '{tmp_path}/loss/mine.yaml': line 4, column 1: found character "
        r"'\\t' that cannot start any token$",
    ):
        compose_config("run", ["loss@criterion=mine"], config_path=str(tmp_path), registry=registry)


def test_a_missing_config_names_the_close_match_and_the_configs_there_are(tmp_path, registry):
    for name in ("run", "other"):
        (tmp_path / f"{name}.yaml").write_text("a: 1\n")
    with pytest.raises(
        ConfigError,
        match=rf"^no config 'runn' in '{tmp_path}'; did you mean 'run'\? \(there are: other, run\)$",
    ):
        compose_config("runn", [], config_path=str(tmp_path), registry=registry)
