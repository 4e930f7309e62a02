"""Tests of the vit rows of the zoo and their converters, without any network: checkpoints are written in
the upstream formats (DINO's, DINOv2's, OML's) from random weights into a temporary weights cache, and the
reference outputs come from timm's models loaded with timm's own checkpoint filter."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import timm
import torch
from oml_models.converters.vit import dinov2_to_extractor, oml_vit_to_extractor
from oml_models.vit import ViTExtractor
from oml_models.zoo.vit import RESIZE, RESIZE_CROP, RESIZE_PAD, ZOO
from timm.models.vision_transformer import checkpoint_filter_fn
from torch import Tensor

from oml_core import hookimpl
from oml_core.registry import Registry, default_registry
from oml_core.utils.checkpoints import CheckpointError
from oml_core.zoo import PretrainedDownloadError, PretrainedModel

KEYS = [
    "vits16_dino",
    "vits8_dino",
    "vitb16_dino",
    "vitb8_dino",
    "vits14_dinov2",
    "vits14_reg_dinov2",
    "vitb14_dinov2",
    "vitb14_reg_dinov2",
    "vitl14_dinov2",
    "vitl14_reg_dinov2",
    "vits16_inshop",
    "vits16_sop",
    "vits16_cars",
    "vits16_cub",
]


class _ViTPlugin:
    """The extractor ``vit`` and its zoo, in a registry of their own (independent of the installed plugins)."""

    @hookimpl
    def oml_register_extractors(self, register: Callable[..., None]) -> None:
        register("vit", "oml_models.vit:ViTExtractor")

    @hookimpl
    def oml_register_pretrained(self, register: Callable[..., None]) -> None:
        for key, factory in ZOO.items():
            register(key, factory)


@pytest.fixture()
def registry() -> Registry:
    return Registry([_ViTPlugin()], load_entrypoints=False)


@pytest.fixture(autouse=True)
def weights_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: None) -> Path:
    """An empty weights cache; no network (``no_network`` of conftest.py)."""
    folder = tmp_path / "weights"
    folder.mkdir()
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(folder))
    monkeypatch.setenv("OML_SKIP_WEIGHTS_CHECK", "1")  # fake weights under real zoo names
    return folder


def _timm_state(timm_name: str, seed: int) -> dict[str, Tensor]:
    """The state dict of timm's ``timm_name`` (no head) with every tensor perturbed at random."""
    torch.manual_seed(seed)
    state = timm.create_model(timm_name, pretrained=False, num_classes=0).state_dict()
    return {key: value + 0.02 * torch.randn_like(value) for key, value in state.items()}


def _dinov2_release(timm_name: str, seed: int) -> dict[str, Tensor]:
    """A state dict in the DINOv2 release's format: the CLS token's position embedding inside ``pos_embed``,
    ``register_tokens`` (with registers) and ``mask_token``."""
    state = _timm_state(timm_name, seed)
    dim = state["cls_token"].shape[-1]
    if "reg_token" in state:
        state["register_tokens"] = state.pop("reg_token")
        state["pos_embed"] = torch.cat([torch.randn(1, 1, dim), state["pos_embed"]], dim=1)
    state["mask_token"] = torch.zeros(1, dim)
    return state


def _upstream(key: str, seed: int = 0) -> dict[str, Tensor]:
    """A random checkpoint of the zoo key ``key`` in its upstream format."""
    timm_name = _timm_name(key)
    if key.endswith("_dinov2"):
        return _dinov2_release(timm_name, seed)
    state = _timm_state(timm_name, seed)  # DINO's release has timm's names
    if key.endswith("_dino"):
        return state
    # OML's own: its ViTExtractor in a Lightning checkpoint, with the loss's weights
    return {
        "state_dict": {**{f"model.model.{k}": v for k, v in state.items()}, "criterion.weight": torch.ones(2)}
    }


def _write(folder: Path, key: str, state: dict) -> None:
    torch.save(state, folder / ZOO[key]().filename)


def _reference(key: str, state: dict[str, Tensor], **kwargs: object) -> torch.nn.Module:
    """timm's model of ``key``'s arch loaded from the upstream-format ``state`` by timm's own filter (built on
    the meta device: no random initialisation to overwrite)."""
    with torch.device("meta"):
        model = timm.create_model(_timm_name(key), num_classes=0, **kwargs)
    model.load_state_dict(checkpoint_filter_fn(dict(state), model), strict=True, assign=True)
    return model.eval()


def _timm_name(key: str) -> str:
    return ViTExtractor.constructors[ZOO[key]().init_args["arch"]].timm_name


def _images(batch: int, height: int, width: int) -> Tensor:
    return torch.randn(batch, 3, height, width, generator=torch.Generator().manual_seed(7))


def test_the_zoo_has_oml_keys_and_each_row_is_complete() -> None:
    assert sorted(ZOO) == sorted(KEYS)
    transforms = default_registry().names("transforms")
    for key, factory in ZOO.items():
        row = factory()
        assert isinstance(row, PretrainedModel)
        assert row.extractor == "vit"
        assert len(row.md5) == 6  # OML records the first 6 hex digits of the md5s
        assert row.url.startswith("https://") and row.url.endswith("/" + row.filename)
        assert row.init_args["arch"] in ViTExtractor.constructors
        assert row.init_args["normalise_features"] is (key == "vits16_sop")
        assert row.transforms in (RESIZE, RESIZE_CROP, RESIZE_PAD)
        assert row.transforms["name"] in transforms, (
            f"{key}: transforms {row.transforms['name']!r} not registered"
        )
        assert callable(row.load_converter())
    assert ZOO["vits14_reg_dinov2"]().url == (
        "https://dl.fbaipublicfiles.com/dinov2/dinov2_vits14/dinov2_vits14_reg4_pretrain.pth"
    )
    assert ZOO["vits16_inshop"]().url == (
        "https://oml.daloroserver.com/download/checkpoints/inshop/vits16_inshop_a76b85.ckpt"
    )


@pytest.mark.parametrize("key", KEYS)
def test_every_row_builds_and_its_converted_upstream_file_fits(key: str) -> None:
    """Built on the meta device (no memory, no time): the row's init_args build the extractor, and the
    converter turns an upstream-format state dict of the arch into the extractor's keys and shapes."""
    row = ZOO[key]()
    with torch.device("meta"):
        extractor = ViTExtractor(None, **row.init_args)
        upstream = _upstream(key)
    upstream = upstream.get("state_dict", upstream)
    converted = row.load_converter()(upstream)
    expected = {name: tuple(value.shape) for name, value in extractor.state_dict().items()}
    assert {name: tuple(value.shape) for name, value in converted.items()} == expected


def test_dino_key_loads_from_the_cache_and_gives_timms_embeddings(
    weights_dir: Path, registry: Registry
) -> None:
    state = _upstream("vits16_dino")
    _write(weights_dir, "vits16_dino", state)
    x = _images(1, 224, 224)
    with torch.no_grad():
        expected = _reference("vits16_dino", state).forward_features(x)[:, 0]
        from_zoo = ViTExtractor.from_pretrained("vits16_dino", registry=registry).eval()
        built = ViTExtractor(weights="vits16_dino", arch="vits16", normalise_features=False).eval()
        torch.testing.assert_close(from_zoo(x), expected)
        torch.testing.assert_close(built(x), expected)


def test_dinov2_with_registers_key_loads_and_gives_timms_embeddings(
    weights_dir: Path, registry: Registry
) -> None:
    state = _upstream("vits14_reg_dinov2")
    _write(weights_dir, "vits14_reg_dinov2", state)
    x = _images(2, 28, 42)
    with torch.no_grad():
        expected = _reference("vits14_reg_dinov2", state, dynamic_img_size=True).forward_features(x)[:, 0]
        from_zoo = ViTExtractor.from_pretrained("vits14_reg_dinov2", registry=registry).eval()
        built = ViTExtractor(weights="vits14_reg_dinov2", arch="vits14_reg", normalise_features=False).eval()
        torch.testing.assert_close(from_zoo(x), expected)
        torch.testing.assert_close(built(x), expected)


def test_dinov2_key_loads_and_gives_timms_embeddings_at_518(weights_dir: Path, registry: Registry) -> None:
    state = _upstream("vits14_dinov2")
    _write(weights_dir, "vits14_dinov2", state)
    x = _images(1, 518, 518)  # the native grid: timm's and DINOv2's position embeddings agree there
    with torch.no_grad():
        from_zoo = ViTExtractor.from_pretrained("vits14_dinov2", registry=registry).eval()
        torch.testing.assert_close(from_zoo(x), _reference("vits14_dinov2", state).forward_features(x)[:, 0])
        built = ViTExtractor(weights="vits14_dinov2", arch="vits14", normalise_features=False).eval()
        small = _images(2, 28, 28)
        torch.testing.assert_close(built(small), from_zoo(small), rtol=0, atol=0)


@pytest.mark.parametrize("prefix", ["model.model.", "model."])
def test_oml_key_loads_with_its_init_args(weights_dir: Path, registry: Registry, prefix: str) -> None:
    """OML's files: a Lightning checkpoint (``model.model.`` + criterion) or its extractor's state dict."""
    dino = _timm_state("vit_small_patch16_224", seed=3)
    state = {f"{prefix}{k}": v for k, v in dino.items()}
    if prefix == "model.model.":
        state = {"state_dict": {**state, "criterion.weight": torch.ones(2)}, "epoch": 10}
    _write(weights_dir, "vits16_sop", state)
    x = _images(2, 224, 224)
    with torch.no_grad():
        expected = _reference("vits16_sop", dino).forward_features(x)[:, 0]
        expected = expected / expected.norm(dim=1, keepdim=True)  # vits16_sop: normalise_features=True
        from_zoo = ViTExtractor.from_pretrained("vits16_sop", registry=registry).eval()
        built = ViTExtractor(weights="vits16_sop", arch="vits16", normalise_features=True).eval()
        torch.testing.assert_close(from_zoo(x), expected)
        torch.testing.assert_close(built(x), expected)
    assert from_zoo.normalise_features


def test_a_zoo_file_that_does_not_fit_names_the_key_and_the_keys(
    weights_dir: Path, registry: Registry
) -> None:
    state = _upstream("vits16_dino")
    del state["norm.bias"]
    _write(weights_dir, "vits16_dino", state)
    with pytest.raises(
        CheckpointError,
        match=r"'vits16_dino' does not match ViTExtractor: missing keys \(1\): model\.norm\.bias",
    ):
        ViTExtractor.from_pretrained("vits16_dino", registry=registry)
    _write(weights_dir, "vits16_dino", _upstream("vits8_dino"))  # patches of 8 pixels: a 28 x 28 grid
    shapes = r"model\.pos_embed: checkpoint \(1, 785, 384\) vs model \(1, 197, 384\)"
    with pytest.raises(CheckpointError, match=rf"'vits16_dino'.*shape mismatch in 2 tensor\(s\): {shapes}"):
        ViTExtractor(weights="vits16_dino", arch="vits16", normalise_features=False)


def test_a_missing_zoo_file_is_not_downloaded_offline(weights_dir: Path, registry: Registry) -> None:
    url = "https://dl.fbaipublicfiles.com/dino/dino_deitsmall16_pretrain/dino_deitsmall16_pretrain.pth"
    expected_path = weights_dir / "dino_deitsmall16_pretrain.pth"
    with pytest.raises(PretrainedDownloadError, match="HF_HUB_OFFLINE") as error:
        ViTExtractor.from_pretrained("vits16_dino", registry=registry)
    assert url in str(error.value) and str(expected_path) in str(error.value)
    assert not list(weights_dir.iterdir())


def test_dinov2_converter_by_hand() -> None:
    release = {
        "cls_token": torch.tensor([[[1.0, 2.0]]]),
        "pos_embed": torch.tensor([[[10.0, 20.0], [3.0, 4.0], [5.0, 6.0]]]),
        "register_tokens": torch.tensor([[[7.0, 8.0]]]),
        "mask_token": torch.zeros(1, 2),
        "norm.bias": torch.tensor([0.5, 0.5]),
    }
    converted = dinov2_to_extractor(release)
    assert sorted(converted) == ["model.cls_token", "model.norm.bias", "model.pos_embed", "model.reg_token"]
    torch.testing.assert_close(converted["model.cls_token"], torch.tensor([[[11.0, 22.0]]]))
    torch.testing.assert_close(converted["model.pos_embed"], torch.tensor([[[3.0, 4.0], [5.0, 6.0]]]))
    torch.testing.assert_close(converted["model.reg_token"], torch.tensor([[[7.0, 8.0]]]))
    without_registers = dinov2_to_extractor({k: v for k, v in release.items() if k != "register_tokens"})
    assert sorted(without_registers) == ["model.cls_token", "model.norm.bias", "model.pos_embed"]
    torch.testing.assert_close(without_registers["model.pos_embed"], release["pos_embed"])
    assert "mask_token" in release  # the input is left as it is


def test_oml_converter_finds_the_prefix_and_refuses_other_files() -> None:
    one = torch.ones(1)
    state = {"m.model.cls_token": one, "m.model.blocks.0.norm1.bias": one, "m.model.norm.bias": one}
    converted = oml_vit_to_extractor({**state, "criterion.weight": one, "m.criterion.w": one})
    assert sorted(converted) == ["model.blocks.0.norm1.bias", "model.cls_token", "model.norm.bias"]
    assert sorted(oml_vit_to_extractor({"cls_token": one, "norm.bias": one})) == [
        "model.cls_token",
        "model.norm.bias",
    ]
    with pytest.raises(ValueError, match=r"found 0; keys: fc\.weight, fc\.bias"):
        oml_vit_to_extractor({"fc.weight": one, "fc.bias": one})
    with pytest.raises(ValueError, match=r"keys outside its prefix 'm\.model\.': head\.weight"):
        oml_vit_to_extractor({**state, "head.weight": one})
