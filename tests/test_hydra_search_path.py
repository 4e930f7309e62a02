"""OML's config groups in a user's own ``@hydra.main`` script: oml-core's hydra plugins
(``hydra_plugins/oml_configs``) put the core's and every plugin's groups on hydra's search path, ``criterion``
read as oml's ``loss``; and ``oml train --config-path`` composes the same config into the same values."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import oml_losses
import oml_models
import oml_samplers
import pytest
import yaml
from hydra import compose, initialize_config_dir, initialize_config_module
from hydra.core.object_type import ObjectType
from hydra.core.plugins import Plugins
from hydra.errors import MissingConfigException
from hydra.plugins.config_source import ConfigLoadError

from hydra_plugins.oml_configs import config_source
from hydra_plugins.oml_configs.config_source import OmlConfigSource
from hydra_plugins.oml_configs.search_path import OML_CONFIGS_ENTRY
from oml_core.config.compose import OML_CONFIGS_DIR, compose_config, resolved_config
from oml_core.registry import ConfigError
from oml_core.utils.overlay_path import OverlayPath

#: A config shaped as OML's pipeline tests write theirs: groups of the core (optimizer) and of three plugins
#: (sampler, extractor, OML's criterion) in the defaults list, a key of one merged over its option.
USER_CONFIG = """
defaults:
  - optimizer: sgd
  - sampler: balance
  - extractor: resnet
  - criterion: triplet_with_miner
  - _self_

seed: 42
max_epochs: 2
extractor:
  args:
    arch: resnet18

hydra:
  searchpath:
    - pkg://oml_core.configs
"""

#: The user's own script, as OML's tests/test_runs/test_pipelines/train.py, writing the composed config.
USER_SCRIPT = """
import json
import sys

import hydra
from omegaconf import OmegaConf


@hydra.main(config_path="configs", config_name="train", version_base=None)
def main(cfg):
    sys.stdout.write(json.dumps(OmegaConf.to_container(cfg, resolve=True)))


if __name__ == "__main__":
    main()
"""


def default_config(package: Any, group: str, option: str) -> Any:
    """The yaml of ``<group>/<option>.yaml`` in the config dir of the plugin ``package``, read as a file."""
    return yaml.safe_load((Path(package.__file__).parent / "configs" / group / f"{option}.yaml").read_text())


@pytest.fixture(scope="module")
def user_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the user's script and its ``configs/train.yaml``."""
    project = tmp_path_factory.mktemp("user_project")
    (project / "configs").mkdir()
    (project / "configs" / "train.yaml").write_text(USER_CONFIG)
    (project / "train.py").write_text(USER_SCRIPT)
    return project


@pytest.fixture(scope="module")
def composed_by_the_script(user_project: Path) -> Any:
    """The config the user's ``@hydra.main`` script gets, run in a process of its own."""
    run = subprocess.run(
        [
            sys.executable,
            "train.py",
            f"hydra.run.dir={user_project / 'run'}",
            "hydra.output_subdir=null",
            "hydra/job_logging=disabled",
            "hydra/hydra_logging=disabled",
        ],
        cwd=user_project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_a_user_script_composes_the_plugins_groups(composed_by_the_script: Any) -> None:
    expected_extractor = default_config(oml_models, "extractor", "resnet")
    expected_extractor["args"]["arch"] = "resnet18"  # the user's key, merged over the option
    assert composed_by_the_script == {
        "optimizer": yaml.safe_load((OML_CONFIGS_DIR / "optimizer" / "sgd.yaml").read_text()),
        "sampler": default_config(oml_samplers, "sampler", "balance"),
        "extractor": expected_extractor,
        "criterion": default_config(oml_losses, "loss", "triplet_with_miner"),
        "seed": 42,
        "max_epochs": 2,
    }
    assert composed_by_the_script["sampler"] == {"name": "balance", "args": {"n_labels": 4, "n_instances": 4}}
    assert composed_by_the_script["criterion"]["name"] == "triplet_with_miner"
    assert composed_by_the_script["criterion"]["args"]["miner"]["name"] == "all_triplets"
    assert composed_by_the_script["extractor"]["args"]["arch"] == "resnet18"


def test_oml_train_with_config_path_composes_the_same_values(
    user_project: Path, composed_by_the_script: Any
) -> None:
    composed = resolved_config(compose_config("train", [], config_path=str(user_project / "configs")))
    assert composed.pop("hydra") == {"searchpath": ["pkg://oml_core.configs"]}  # kept for the pipelines
    assert composed == composed_by_the_script


def test_the_groups_compose_from_the_package_oml_core_configs() -> None:
    with initialize_config_module(config_module="oml_core.configs", version_base=None):
        cfg = compose(overrides=["+criterion=arcface", "+sampler=category_balance", "+extractor=vit"])
    assert cfg.criterion == default_config(oml_losses, "loss", "arcface")
    assert cfg.sampler == default_config(oml_samplers, "sampler", "category_balance")
    assert cfg.extractor == default_config(oml_models, "extractor", "vit")


def test_an_unknown_criterion_lists_the_losses() -> None:
    with initialize_config_module(config_module="oml_core.configs", version_base=None):
        with pytest.raises(MissingConfigException) as error:
            compose(overrides=["+criterion=triplet_with_minr"])
    assert {"arcface", "triplet", "triplet_with_miner"} <= set(error.value.options or [])


def test_the_users_own_configs_win(tmp_path: Path) -> None:
    (tmp_path / "sampler").mkdir()
    (tmp_path / "sampler" / "balance.yaml").write_text("name: balance\nargs: {n_labels: 2, n_instances: 8}\n")
    (tmp_path / "train.yaml").write_text(  # no hydra.searchpath: the core's groups are there too
        "defaults:\n  - sampler: balance\n  - miner: hard_triplets\n  - optimizer: adam\n"
    )
    with initialize_config_dir(config_dir=str(tmp_path), version_base=None):
        cfg = compose(config_name="train")
    assert cfg.sampler == {"name": "balance", "args": {"n_labels": 2, "n_instances": 8}}
    assert cfg.miner == default_config(oml_losses, "miner", "hard_triplets")
    assert cfg.optimizer == yaml.safe_load((OML_CONFIGS_DIR / "optimizer" / "adam.yaml").read_text())


def test_the_source_lists_oml_group_names_as_oml_core_s() -> None:
    source = OmlConfigSource(provider="oml-core", path=OML_CONFIGS_ENTRY)
    groups = source.list("", ObjectType.GROUP)
    assert {"criterion", "loss", "sampler", "extractor", "optimizer", "miner"} <= set(groups)
    assert source.list("criterion", ObjectType.CONFIG) == source.list("loss", ObjectType.CONFIG)
    assert "triplet_with_miner" in source.list("criterion", ObjectType.CONFIG)
    assert source.is_group("criterion") and not source.is_config("criterion")
    assert source.is_config("criterion/arcface") and not source.is_config("criterion/nope")
    assert "extractor_training_pipeline" not in source.list("", None)  # the groups only, not the pipelines


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"name: odd\nargs: [1\n", "line 3, column 1: expected ',' or ']'"),
        (b'name: odd\nargs: {x: "\xe9"}\n', "is not UTF-8 text: the byte 0xe9 at line 2, column 12"),
    ],
    ids=["yaml", "not-utf8"],
)
def test_a_broken_config_of_a_plugin_is_one_line_naming_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, reason: str
) -> None:
    plugin_configs = tmp_path / "plugin_configs"
    (plugin_configs / "sampler").mkdir(parents=True)
    (plugin_configs / "sampler" / "odd.yaml").write_bytes(content)
    (tmp_path / "train.yaml").write_text("defaults:\n  - sampler: odd\n")
    Plugins.instance()  # hydra's scan of its plugins executes their modules again: patch after it
    monkeypatch.setattr(config_source, "oml_configs_folder", lambda: OverlayPath(plugin_configs))
    with pytest.raises(ConfigError) as error:
        compose_config("train", [], config_path=str(tmp_path))
    message = str(error.value)
    assert "\n" not in message
    assert str(plugin_configs / "sampler" / "odd.yaml") in message and reason in message


def test_another_hydra_apps_lookups_load_no_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_folder() -> None:
        raise AssertionError("a lookup outside oml's config groups read oml's folders")

    Plugins.instance()  # hydra's scan of its plugins executes their modules again: patch after it
    monkeypatch.setattr(config_source, "oml_configs_folder", no_folder)
    source = config_source.OmlConfigSource(provider="oml-core", path=OML_CONFIGS_ENTRY)
    assert not source.is_group("hydra/run") and not source.is_group("db")
    assert not source.is_config("db/mysql") and not source.is_config("extractor_training_pipeline")
    assert source.list("db", None) == []
    with pytest.raises(ConfigLoadError):
        source.load_config("db/mysql")
