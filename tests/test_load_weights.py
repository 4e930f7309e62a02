"""Tests of ``oml_core.zoo.weights.load_weights``: the ``weights`` argument of every extractor."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import Tensor, nn

from oml_core.interfaces.models import IExtractor
from oml_core.registry import UnknownNameError
from oml_core.utils.checkpoints import CheckpointError
from oml_core.zoo.extractor import ZooExtractor
from oml_core.zoo.weights import build_for_weights, load_weights, looks_like_path


class Recorder(ZooExtractor):
    """``head(backbone(x))``; records what :meth:`load_pretrained` is given instead of loading it."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Linear(3, 2)
        self.head = nn.Linear(2, 2)
        self.pretrained: list[tuple[dict[str, Tensor], str]] = []

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.backbone(x))

    @property
    def feat_dim(self) -> int:
        return 2

    def load_pretrained(self, state_dict: dict[str, Tensor], source: str) -> None:
        self.pretrained.append((state_dict, source))


def _fresh(seed: int) -> Recorder:
    torch.manual_seed(seed)
    return Recorder()


def _same(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_none_loads_nothing() -> None:
    model = _fresh(0)
    load_weights(model, None)
    assert _same(model, _fresh(0)) and model.pretrained == []


@pytest.mark.parametrize("as_str", [True, False])
def test_a_file_as_str_or_path(tmp_path: Path, as_str: bool) -> None:
    source = _fresh(1)
    path = tmp_path / "model.pth"
    torch.save(source.state_dict(), path)
    model = _fresh(2)
    assert not _same(model, source)
    load_weights(model, str(path) if as_str else path)
    assert _same(model, source) and model.pretrained == []


def test_a_lightning_file_into_a_target(tmp_path: Path) -> None:
    source = _fresh(1)
    # the LightningModule wraps the backbone as "model.", DDP as "module.": "model.module.*"
    sd = {f"model.module.{k}": v for k, v in source.backbone.state_dict().items()}
    sd["criterion.proxies"] = torch.zeros(4)
    path = tmp_path / "last.ckpt"
    torch.save({"state_dict": sd, "epoch": 0}, path)
    model = _fresh(2)
    load_weights(model, path, target=model.backbone)
    assert _same(model.backbone, source.backbone) and not _same(model.head, source.head)


class Holder(IExtractor):
    """An extractor whose own keys start with a wrapper prefix: ``model.weight``, ``model.bias``."""

    def __init__(self) -> None:
        super().__init__()
        self.model = nn.Linear(3, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.model(x)

    @property
    def feat_dim(self) -> int:
        return 2


def test_prefixes_that_the_target_keeps(tmp_path: Path) -> None:
    torch.manual_seed(1)
    source = Holder()
    path = tmp_path / "ddp.pth"
    torch.save({f"module.{k}": v for k, v in source.state_dict().items()}, path)  # DDP's wrapper
    with pytest.raises(CheckpointError, match=r"missing keys \(2\): model.weight, model.bias"):
        load_weights(Holder(), path)  # the default prefixes strip the model's own "model." too
    model = Holder()
    load_weights(model, path, prefixes=("module.",))
    assert _same(model, source)


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing.pth"):
        load_weights(_fresh(0), tmp_path / "nothing.pth")
    # a string that is clearly a path is not taken for a zoo key
    with pytest.raises(FileNotFoundError, match="checkpoints/best.ckpt"):
        load_weights(_fresh(0), "checkpoints/best.ckpt")
    with pytest.raises(FileNotFoundError, match="best.ckpt"):
        load_weights(_fresh(0), "best.ckpt")


def test_looks_like_path() -> None:
    assert looks_like_path("a/b") and looks_like_path("C:\\w") and looks_like_path("x.PTH")
    assert looks_like_path("moco_v2_800ep_pretrain.pth.tar") and looks_like_path("m.safetensors")
    assert not looks_like_path("resnet50_moco_v2") and not looks_like_path("vitl14_336px_unicom")


def test_a_zoo_key_is_read_from_the_cache_and_given_to_load_pretrained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the zoo's resnet18_imagenet1k_v1 (no converter): its file, put in the cache by hand, is read as it is
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(tmp_path))
    monkeypatch.setenv("OML_SKIP_WEIGHTS_CHECK", "1")  # fake weights under real zoo names
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tensors = {"w": torch.arange(3.0)}
    torch.save(tensors, tmp_path / "resnet18-f37072fd.pth")
    model = _fresh(0)
    load_weights(model, "resnet18_imagenet1k_v1")
    [(state_dict, source)] = model.pretrained
    assert source == "resnet18_imagenet1k_v1"
    assert state_dict.keys() == {"w"} and torch.equal(state_dict["w"], tensors["w"])


def test_a_zoo_key_goes_strictly_into_an_extractor_that_is_not_a_zoo_extractor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a plain IExtractor has no load_pretrained: the zoo's state dict is loaded into the whole of it, strictly
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(tmp_path))
    monkeypatch.setenv("OML_SKIP_WEIGHTS_CHECK", "1")  # fake weights under a real zoo name
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    torch.manual_seed(3)
    source = Holder()
    torch.save(source.state_dict(), tmp_path / "resnet18-f37072fd.pth")
    torch.manual_seed(4)
    model = Holder()
    assert not _same(model, source)
    load_weights(model, "resnet18_imagenet1k_v1")
    assert _same(model, source)
    torch.save({"w": torch.arange(3.0)}, tmp_path / "resnet18-f37072fd.pth")
    with pytest.raises(
        CheckpointError, match=r"'resnet18_imagenet1k_v1' does not match Holder: missing keys \(2\)"
    ):
        load_weights(Holder(), "resnet18_imagenet1k_v1")


def test_an_unknown_key_lists_close_ones() -> None:
    with pytest.raises(
        UnknownNameError, match="Unknown pretrained 'resnet18_imagenet1k_v2'.*Did you mean: .*"
    ):
        load_weights(_fresh(0), "resnet18_imagenet1k_v2")
    with pytest.raises(UnknownNameError, match="resnet18_imagenet1k_v1"):
        load_weights(_fresh(0), "resnet18_imagenet1k_v2")


def test_a_bad_type_names_the_argument() -> None:
    with pytest.raises(TypeError, match="weights must be None, a checkpoint path or a zoo key.*got int"):
        load_weights(_fresh(0), 3)  # type: ignore[arg-type]


class WithComputedBuffer(nn.Module):
    """A layer and a non-persistent buffer computed when built (not in the state dict, so never loaded)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(3, 2)
        self.register_buffer("steps", torch.arange(4.0), persistent=False)


def test_build_for_weights_initialises_only_without_weights() -> None:
    torch.manual_seed(0)
    expected = nn.Linear(3, 2)
    torch.manual_seed(0)
    random = build_for_weights(lambda: nn.Linear(3, 2), None)
    torch.testing.assert_close(random.weight, expected.weight, rtol=0, atol=0)
    state = torch.get_rng_state()
    to_load = build_for_weights(lambda: nn.Linear(3, 2), "a.pth")
    assert torch.equal(torch.get_rng_state(), state)  # no random initialisation drawn
    assert to_load.weight.device == torch.device("cpu") and to_load.weight.requires_grad
    to_load.load_state_dict(expected.state_dict())
    torch.testing.assert_close(to_load.weight, expected.weight, rtol=0, atol=0)
    with torch.device("meta"):  # materialised on the default device of the caller
        assert build_for_weights(lambda: nn.Linear(3, 2), "a.pth").weight.is_meta


def test_build_for_weights_keeps_a_module_with_a_non_persistent_buffer_as_built() -> None:
    module = build_for_weights(WithComputedBuffer, Path("a.pth"))
    torch.testing.assert_close(module.steps, torch.tensor([0.0, 1.0, 2.0, 3.0]), rtol=0, atol=0)
