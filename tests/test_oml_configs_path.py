"""OML's ``CONFIGS_PATH / <group> / "<name>.yaml"`` finds every component's default config: the core's folder read
through the plugins' config dirs (:class:`~oml_core.utils.overlay_path.OverlayPath`), OML's ``criterion`` naming
oml's ``loss``; a file that no folder has is the core's path, whose opening raises ``FileNotFoundError``."""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from oml_core.registry.losses import LOSSES_REGISTRY, get_criterion
from oml_core.registry.miners import MINERS_REGISTRY
from oml_core.registry.models import EXTRACTORS_REGISTRY, PAIRWISE_MODELS_REGISTRY
from oml_core.registry.optimizers import OPTIMIZERS_REGISTRY
from oml_core.registry.postprocessors import POSTPROCESSORS_REGISTRY
from oml_core.registry.samplers import SAMPLERS_REGISTRY
from oml_core.registry.schedulers import SCHEDULERS_REGISTRY
from oml_core.registry.transforms import TRANSFORMS_REGISTRY

from oml_core.const import CONFIGS_PATH, OML_PATH
from oml_core.utils.overlay_path import OverlayPath

CORE_CONFIGS = OML_PATH / "configs"


def _write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def three_folders(tmp_path: Path) -> tuple[OverlayPath, Path, Path, Path]:
    """A base folder and two more: ``a.yaml`` in all three, ``loss/x.yaml`` in the second only, ``loss/y.yaml``
    in the second and the third, ``extra/`` in the third only."""
    base, second, third = tmp_path / "base", tmp_path / "second", tmp_path / "third"
    for folder in (base, second, third):
        _write(folder / "group" / "a.yaml", f"from: {folder.name}")
    _write(second / "loss" / "x.yaml", "from: second")
    _write(second / "loss" / "y.yaml", "from: second")
    _write(third / "loss" / "y.yaml", "from: third")
    _write(third / "extra" / "z.yaml", "from: third")
    overlay = OverlayPath(base)
    overlay.search_also(lambda: [second], aliases={"criterion": "loss"})
    overlay.search_also(lambda: [third])
    return overlay, base, second, third


def test_the_first_folder_that_has_the_file_gives_it(three_folders) -> None:
    overlay, base, second, third = three_folders
    assert overlay / "group" / "a.yaml" == base / "group" / "a.yaml"  # the base folder first
    assert overlay / "loss" / "y.yaml" == second / "loss" / "y.yaml"  # then the sources in their order
    assert overlay / "extra" / "z.yaml" == third / "extra" / "z.yaml"
    assert overlay / "loss/x.yaml" == second / "loss" / "x.yaml"  # several parts at once
    assert isinstance(overlay / "group" / "a.yaml", Path)
    assert OmegaConf.load(overlay / "loss" / "y.yaml") == {"from": "second"}


def test_the_alias_reads_the_first_part_as_its_folder(three_folders) -> None:
    overlay, _, second, _ = three_folders
    assert overlay / "criterion" / "x.yaml" == second / "loss" / "x.yaml"
    assert (overlay / "criterion").name == "criterion"
    assert os.fspath(overlay / "criterion") == str(second / "loss")


def test_a_folder_is_an_overlay_its_path_the_first_folder_that_has_it(three_folders) -> None:
    overlay, base, second, third = three_folders
    assert os.fspath(overlay) == str(overlay) == str(base)
    assert Path(overlay) == base
    group, loss, extra = overlay / "group", overlay / "loss", overlay / "extra"
    assert all(isinstance(folder, OverlayPath) for folder in (group, loss, extra))
    assert (os.fspath(group), os.fspath(loss), os.fspath(extra)) == tuple(
        str(p) for p in (base / "group", second / "loss", third / "extra")
    )
    assert loss.is_dir() and loss.exists() and not loss.is_file()
    assert loss == overlay / "loss" and hash(loss) == hash(overlay / "loss") and loss != group
    assert repr(extra) == f"OverlayPath({str(third / 'extra')!r})"
    assert list(loss.iterdir()) == [
        second / "loss" / "x.yaml",
        second / "loss" / "y.yaml",
    ]  # y once, second's
    assert [os.fspath(entry) for entry in overlay.iterdir()] == [
        str(base / "group"),
        str(second / "loss"),
        str(third / "extra"),
    ]
    assert overlay.folders() == [base, second, third]


def test_a_file_that_no_folder_has_is_the_base_folders_path_and_cannot_be_opened(three_folders) -> None:
    overlay, base, _, _ = three_folders
    missing = overlay / "criterion" / "nope.yaml"
    assert missing == base / "criterion" / "nope.yaml"  # as written, where OML would have had it
    with pytest.raises(FileNotFoundError, match=r"base/criterion/nope\.yaml"):
        OmegaConf.load(missing)
    assert overlay / "no_group" == base / "no_group" and not (overlay / "no_group").exists()
    assert overlay / "/etc" == Path("/etc")  # an absolute path, as Path joins it


def test_adding_a_source_twice_searches_it_once(tmp_path: Path) -> None:
    calls: list[int] = []

    def source() -> list[Path]:
        calls.append(1)
        return [tmp_path / "more"]

    overlay = OverlayPath(tmp_path / "base")
    overlay.search_also(source)
    overlay.search_also(source)
    assert overlay.folders() == [tmp_path / "base", tmp_path / "more"] and len(calls) == 1


def test_configs_path_is_the_core_folder_for_the_cores_files() -> None:
    assert os.fspath(CONFIGS_PATH) == str(CONFIGS_PATH) == str(CORE_CONFIGS)
    assert CONFIGS_PATH.is_dir()
    assert CONFIGS_PATH / "optimizer" / "adam.yaml" == CORE_CONFIGS / "optimizer" / "adam.yaml"
    assert (
        CONFIGS_PATH / "extractor_training_pipeline.yaml" == CORE_CONFIGS / "extractor_training_pipeline.yaml"
    )
    assert os.fspath(CONFIGS_PATH / "optimizer") == str(CORE_CONFIGS / "optimizer")


def test_configs_path_finds_a_plugins_config_and_omls_criterion() -> None:
    models = Path(str(importlib.resources.files("oml_models.configs")))
    losses = Path(str(importlib.resources.files("oml_losses.configs")))
    assert CONFIGS_PATH / "extractor" / "vit.yaml" == models / "extractor" / "vit.yaml"
    assert CONFIGS_PATH / "criterion" / "arcface.yaml" == losses / "loss" / "arcface.yaml"
    cfg = OmegaConf.to_container(OmegaConf.load(CONFIGS_PATH / "criterion" / "triplet_with_miner.yaml"))
    loss = get_criterion(cfg["name"], **cfg["args"])
    assert type(loss).__name__ == "TripletLossWithMiner" and loss.margin == cfg["args"]["margin"]


def test_configs_path_names_the_core_path_of_a_missing_file() -> None:
    with pytest.raises(FileNotFoundError, match=r"oml_core/configs/criterion/no_such_loss\.yaml"):
        OmegaConf.load(CONFIGS_PATH / "criterion" / "no_such_loss.yaml")


@pytest.mark.parametrize(
    ("folder", "registry"),
    [
        ("extractor", EXTRACTORS_REGISTRY),
        ("criterion", LOSSES_REGISTRY),
        ("miner", MINERS_REGISTRY),
        ("optimizer", OPTIMIZERS_REGISTRY),
        ("sampler", SAMPLERS_REGISTRY),
        ("scheduler", SCHEDULERS_REGISTRY),
        ("transforms", TRANSFORMS_REGISTRY),
        ("pairwise_model", PAIRWISE_MODELS_REGISTRY),
        ("postprocessor", POSTPROCESSORS_REGISTRY),
    ],
)
def test_every_name_of_omls_registries_has_its_config_at_omls_path(folder: str, registry) -> None:
    names = {name: OmegaConf.load(CONFIGS_PATH / folder / f"{name}.yaml")["name"] for name in registry}
    assert names == {name: name for name in registry}
