"""``weights`` is part of every extractor's contract: the core loads them into an extractor whose constructor does
not name them (a third-party extractor), and passes them to one that does."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor, nn

from oml_core import hookimpl
from oml_core.cli import main
from oml_core.interfaces.models import IExtractor
from oml_core.registry import Registry, UnknownNameError
from oml_core.utils.checkpoints import CheckpointError

#: A row of the metrics table that `oml train` and `oml validate` print: the metric and its last value.
METRIC_ROW = re.compile(r"^(OVERALL/\S+)\s+(?:\d+\.\d{4}\s+)*(\d+\.\d{4})$", re.MULTILINE)
FAST = [
    "max_epochs=1",
    "lightning_trainer_extra_args.enable_progress_bar=false",
    "transforms_train.args.im_size=32",
    "transforms_val.args.im_size=32",
]


class Bare(IExtractor):
    """A third-party extractor whose constructor knows nothing of weights: ``head(body(x))``."""

    def __init__(self, width: int = 3) -> None:
        super().__init__()
        self.body = nn.Linear(4, width)
        self.head = nn.Linear(width, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.body(x))

    @property
    def feat_dim(self) -> int:
        return 2


class OwnLoader(Bare):
    """An extractor that takes ``weights`` itself: it records them and loads nothing."""

    def __init__(self, weights: str | None = None, width: int = 3) -> None:
        super().__init__(width)
        self.given = weights


def bare_from_function(**kwargs: Any) -> Bare:
    """A function factory with ``**kwargs``: that does not name ``weights`` either."""
    return Bare(**kwargs)


class Plugin:
    @hookimpl
    def oml_register_extractors(self, register):
        register("bare", Bare)
        register("own_loader", OwnLoader)
        register("bare_function", bare_from_function)


@pytest.fixture()
def registry() -> Registry:
    return Registry([Plugin()], load_entrypoints=False)


def _seeded(seed: int, width: int = 3) -> Bare:
    torch.manual_seed(seed)
    return Bare(width)


def _equal(a: nn.Module, b: nn.Module) -> bool:
    return a.state_dict().keys() == b.state_dict().keys() and all(
        torch.equal(x, b.state_dict()[k]) for k, x in a.state_dict().items()
    )


@pytest.mark.parametrize("name", ["bare", "bare_function"])
def test_the_core_loads_a_state_dict_into_an_extractor_that_does_not_take_weights(
    registry: Registry, tmp_path: Path, name: str
) -> None:
    saved = _seeded(1, width=5)
    torch.save(saved.state_dict(), tmp_path / "model.pth")
    torch.manual_seed(2)
    model = registry.build(
        "extractor", {"name": name, "args": {"width": 5, "weights": str(tmp_path / "model.pth")}}
    )
    assert type(model) is Bare and _equal(model, saved)
    torch.manual_seed(2)
    random = registry.build("extractor", {"name": name, "args": {"width": 5, "weights": None}})
    assert _equal(random, _seeded(2, width=5)) and not _equal(random, saved)


def test_a_training_checkpoint_loses_its_wrapper_prefix_and_criterion(
    registry: Registry, tmp_path: Path
) -> None:
    saved = _seeded(1)
    state = {f"extractor.{k}": v for k, v in saved.state_dict().items()}
    state["criterion.proxies"] = torch.zeros(7, 2)
    torch.save({"state_dict": state, "epoch": 3}, tmp_path / "best.ckpt")
    model = registry.build("extractor", {"name": "bare", "args": {"weights": str(tmp_path / "best.ckpt")}})
    assert _equal(model, saved)


def test_an_extractor_that_names_weights_gets_them_and_the_core_loads_nothing(
    registry: Registry, tmp_path: Path
) -> None:
    torch.save(_seeded(1).state_dict(), tmp_path / "model.pth")
    torch.manual_seed(2)
    model = registry.build(
        "extractor", {"name": "own_loader", "args": {"weights": str(tmp_path / "model.pth")}}
    )
    assert model.given == str(tmp_path / "model.pth")
    assert _equal(model, _seeded(2))  # its own random weights, untouched


def test_weights_that_do_not_fit_or_do_not_exist_fail_naming_the_file(
    registry: Registry, tmp_path: Path
) -> None:
    torch.save(_seeded(1, width=5).state_dict(), tmp_path / "wide.pth")
    with pytest.raises(CheckpointError, match="wide.pth"):
        registry.build("extractor", {"name": "bare", "args": {"weights": str(tmp_path / "wide.pth")}})
    with pytest.raises(FileNotFoundError, match="missing.ckpt"):
        registry.build("extractor", {"name": "bare", "args": {"weights": str(tmp_path / "missing.ckpt")}})
    with pytest.raises(UnknownNameError, match="no_such_zoo_key"):
        registry.build("extractor", {"name": "bare", "args": {"weights": "no_such_zoo_key"}})


@pytest.mark.slow
def test_a_third_party_extractor_is_validated_from_its_training_checkpoint(
    run_oml,
    tmp_path: Path,
    oml_cache_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    """The example plugin's ``tiny_conv`` does not take ``weights``: ``oml validate`` with its ``best.ckpt``
    prints the metrics that training printed for that checkpoint (the same data, transforms and weights)."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    switch = ["extractor.name=tiny_conv", "extractor.args.feat_dim=16"]
    assert main(["train", f"logs_root={tmp_path / 'train'}", *FAST, *switch]) == 0
    trained = dict(METRIC_ROW.findall(capsys.readouterr().out))
    (run_dir,) = (tmp_path / "train").iterdir()
    best = run_dir / "checkpoints" / "best.ckpt"

    validate = run_oml(
        "validate",
        f"logs_root={tmp_path / 'validate'}",
        *[o for o in FAST if not o.startswith(("max_epochs", "transforms_train"))],
        *switch,
        f"extractor.args.weights={best}",
    )
    assert validate.returncode == 0, validate.stderr[-3000:]
    assert len(trained) == 5
    assert dict(METRIC_ROW.findall(validate.stdout)) == trained
