"""Tests of ViTCLIPExtractor, its converter and its zoo rows, all offline.

The reference is open_clip's own CLIP (``create_model(..., pretrained=None)``, random weights,
``encode_image``); zoo checkpoints are written in the upstream layout (a full CLIP state dict, text tower
included, float16) into a temporary weights cache.
"""

from __future__ import annotations

import re
from pathlib import Path

import open_clip
import pytest
import torch
import torch.nn.functional as F
from oml_models.clip import CLIP_ARCHS, ViTCLIPExtractor
from oml_models.converters.clip import clip_to_extractor
from oml_models.normalisation import CLIP_MEAN, CLIP_STD
from oml_models.zoo.clip import ZOO
from PIL import Image
from torch import Tensor

from oml_core import hookimpl
from oml_core.registry import Registry, UnknownNameError
from oml_core.utils.checkpoints import CheckpointError
from oml_core.zoo import PretrainedDownloadError, get_transforms_for_pretrained

#: Hand-written hyper-parameters of OpenAI's image towers: width, layers, patch, image size, output size.
TOWERS = {
    "vitb16_224": (768, 12, 16, 224, 512),
    "vitb32_224": (768, 12, 32, 224, 512),
    "vitl14_224": (1024, 24, 14, 224, 768),
    "vitl14_336": (1024, 24, 14, 336, 768),
}
KEY = "openai_vitb32_224"


pytestmark = pytest.mark.usefixtures("no_network")  # every test: no network (conftest.py)


class ClipZoo:
    """Registers the extractor and this module's zoo rows, as the plugin does."""

    @hookimpl
    def oml_register_extractors(self, register):
        register("vit_clip", "oml_models.clip:ViTCLIPExtractor")

    @hookimpl
    def oml_register_pretrained(self, register):
        for key, factory in ZOO.items():
            register(key, factory)


def _images(size: int = 224, batch: int = 2, seed: int = 0) -> Tensor:
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def reference() -> torch.nn.Module:
    """open_clip's full ViT-B/32 CLIP of OpenAI's architecture, random, its weights rounded to float16."""
    torch.manual_seed(0)
    model = open_clip.create_model("ViT-B-32-quickgelu", pretrained=None).eval()
    model.load_state_dict({k: v.half().float() for k, v in model.state_dict().items()})
    return model


@pytest.fixture(scope="module")
def weights_dir(reference: torch.nn.Module, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A weights cache holding the checkpoint of ``openai_vitb32_224`` in the upstream (open_clip) layout."""
    folder = tmp_path_factory.mktemp("weights")
    torch.save({k: v.half() for k, v in reference.state_dict().items()}, folder / ZOO[KEY]().filename)
    return folder


@pytest.fixture()
def cache(weights_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(weights_dir))
    return weights_dir


@pytest.fixture(scope="module")
def expected(reference: torch.nn.Module) -> Tensor:
    with torch.no_grad():
        return reference.encode_image(_images())


def _param_count(width: int, layers: int, patch: int, size: int, out: int) -> int:
    """Parameters of CLIP's ViT image tower, counted by hand from OpenAI's definition."""
    tokens = (size // patch) ** 2 + 1
    block = 2 * 2 * width + (3 * width * width + 3 * width) + (width * width + width)
    block += (4 * width * width + 4 * width) + (4 * width * width + width)
    embed = 3 * patch * patch * width + width + tokens * width + 2 * width  # conv1, class, positions, ln_pre
    return embed + layers * block + 2 * width + width * out  # ln_post, proj


@pytest.mark.parametrize("arch", list(TOWERS))
def test_every_arch_builds_with_its_size(arch: str) -> None:
    width, layers, patch, size, out = TOWERS[arch]
    with torch.device("meta"):  # the architecture without allocating (ViT-L has 300M parameters)
        model = ViTCLIPExtractor(None, arch=arch)
        assert model(torch.empty(3, 3, size, size)).shape == (3, out)
    assert model.feat_dim == out and model.image_size == size
    assert sum(p.numel() for p in model.parameters()) == _param_count(*TOWERS[arch])
    assert all(key.startswith("visual.") for key in model.state_dict())
    block = model.visual.transformer.resblocks[0]
    assert block.attn.num_heads == width // 64
    assert isinstance(block.mlp.gelu, open_clip.transformer.QuickGELU)
    assert len(model.visual.transformer.resblocks) == layers


def test_random_weights_forward_and_normalisation() -> None:
    torch.manual_seed(0)
    model = ViTCLIPExtractor(None, arch="vitb32_224").eval()
    assert model.normalise_features  # OML's default
    x = _images(batch=3)
    with torch.no_grad():
        out = model(x)
        assert out.shape == (3, 512) and torch.isfinite(out).all()
        torch.testing.assert_close(out.norm(dim=1), torch.ones(3))
        torch.testing.assert_close(model.extract(x), out, rtol=0, atol=0)
        model.normalise_features = False
        raw = model(x)
    assert not torch.allclose(raw.norm(dim=1), torch.ones(3))
    torch.testing.assert_close(F.normalize(raw, dim=1), out)


def test_zoo_key_in_the_constructor_equals_open_clip(cache: Path, expected: Tensor) -> None:
    model = ViTCLIPExtractor(KEY, arch="vitb32_224").eval()
    with torch.no_grad():
        torch.testing.assert_close(model(_images()), F.normalize(expected, dim=1))
        model.normalise_features = False
        torch.testing.assert_close(model(_images()), expected)


def test_from_pretrained_uses_the_cache_and_the_rows_arguments(cache: Path, expected: Tensor) -> None:
    registry = Registry([ClipZoo()], load_entrypoints=False)
    model = ViTCLIPExtractor.from_pretrained(KEY, registry=registry).eval()
    assert type(model) is ViTCLIPExtractor and model.arch == "vitb32_224" and not model.normalise_features
    with torch.no_grad():
        torch.testing.assert_close(model(_images()), expected)
    assert ViTCLIPExtractor.from_pretrained(
        KEY, registry=registry, normalise_features=True
    ).normalise_features


def test_a_missing_zoo_file_is_not_downloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(tmp_path))
    expected = f"download {ZOO[KEY]().url} yourself and put the file at {tmp_path / ZOO[KEY]().filename}"
    with pytest.raises(PretrainedDownloadError, match=re.escape(expected)):
        ViTCLIPExtractor(KEY, arch="vitb32_224")
    assert list(tmp_path.iterdir()) == []


def test_user_checkpoints_load(tmp_path: Path) -> None:
    torch.manual_seed(1)
    source = ViTCLIPExtractor(None, arch="vitb32_224").eval()
    plain = tmp_path / "extractor.pth"
    torch.save(source.state_dict(), plain)
    lightning = tmp_path / "last.ckpt"
    state_dict = {f"model.{k}": v for k, v in source.state_dict().items()}
    state_dict["criterion.weight"] = torch.zeros(10, 512)
    torch.save({"state_dict": state_dict, "epoch": 1}, lightning)
    with torch.no_grad():
        expected = source(_images())
        for weights in (plain, str(lightning)):
            model = ViTCLIPExtractor(weights, arch="vitb32_224").eval()
            torch.testing.assert_close(model(_images()), expected, rtol=0, atol=0)


def test_mismatching_checkpoints_name_the_file_and_keys(tmp_path: Path) -> None:
    with torch.device("meta"):  # the keys and shapes of the extractor's state dict; the values do not matter
        shapes = {
            key: value.shape for key, value in ViTCLIPExtractor(None, arch="vitb32_224").state_dict().items()
        }
    state_dict = {key: torch.zeros(shape) for key, shape in shapes.items()}
    path = tmp_path / "b32.pth"
    torch.save(state_dict, path)
    with pytest.raises(CheckpointError, match=r"b32\.pth.*shape mismatch.*visual\.conv1\.weight"):
        ViTCLIPExtractor(str(path), arch="vitb16_224")
    state_dict["visual.extra"] = state_dict.pop("visual.proj")
    torch.save(state_dict, path)
    with pytest.raises(
        CheckpointError,
        match=r"b32\.pth.*missing keys \(1\): visual\.proj.*unexpected keys \(1\): visual\.extra",
    ):
        ViTCLIPExtractor(str(path), arch="vitb32_224")


def test_bad_arguments_and_inputs() -> None:
    with pytest.raises(
        ValueError, match=r"Unknown arch 'vitb16' of ViTCLIPExtractor; known archs: vitb16_224, vitb32_224"
    ):
        ViTCLIPExtractor(None, arch="vitb16")
    with pytest.raises(FileNotFoundError, match="nowhere.pth"):
        ViTCLIPExtractor(Path("nowhere.pth"), arch="vitb32_224")
    with pytest.raises(UnknownNameError, match="openai_vitb32_224"):
        ViTCLIPExtractor("openai_vitb32", arch="vitb32_224")
    with torch.device("meta"):
        model = ViTCLIPExtractor(None, arch="vitl14_336")
        with pytest.raises(ValueError, match=r"images x of shape \[B, 3, 336, 336\].*got \[2, 3, 224, 224\]"):
            model(torch.empty(2, 3, 224, 224))


def test_converter_keeps_the_image_tower_as_float32() -> None:
    half = torch.tensor([1.5, -2.0], dtype=torch.float16)
    upstream = {
        "visual.proj": half,
        "visual.transformer.resblocks.0.ln_1.weight": half,
        "transformer.resblocks.0.ln_1.weight": half,
        "token_embedding.weight": half,
        "logit_scale": torch.tensor(4.6),
    }
    converted = clip_to_extractor(upstream)
    assert list(converted) == ["visual.proj", "visual.transformer.resblocks.0.ln_1.weight"]
    assert converted["visual.proj"].dtype == torch.float32
    torch.testing.assert_close(converted["visual.proj"], torch.tensor([1.5, -2.0]))
    with pytest.raises(ValueError, match=r"no image tower \('visual\.\*' keys\) among its 2 keys: a, b"):
        clip_to_extractor({"a": half, "b": half})


def test_zoo_rows() -> None:
    assert sorted(ZOO) == sorted(
        [f"openai_{arch}" for arch in CLIP_ARCHS] + ["sber_vitb16_224", "sber_vitb32_224", "sber_vitl14_224"]
    )
    rows = {key: factory() for key, factory in ZOO.items()}
    assert len({row.filename for row in rows.values()}) == len(rows)
    assert rows["sber_vitb16_224"].md5 == "7882e07674d78c674e33cb892a68bbfc"
    assert rows["sber_vitl14_224"].url == (
        "https://huggingface.co/sberbank-ai/ruclip-vit-large-patch14-224/resolve/main/pytorch_model.bin"
    )
    assert rows[KEY].url == (
        "https://huggingface.co/timm/vit_base_patch32_clip_224.openai/resolve/main/open_clip_pytorch_model.bin"
    )
    for key, row in rows.items():
        arch = key.split("_", 1)[1]
        assert row.extractor == "vit_clip" and dict(row.init_args) == {
            "arch": arch,
            "normalise_features": False,
        }
        assert row.load_converter() is clip_to_extractor
        with torch.device("meta"):
            assert ViTCLIPExtractor(None, **row.init_args).feat_dim == TOWERS[arch][4]
        assert row.transforms == {"name": "norm_resize_pad_clip", "args": {"im_size": TOWERS[arch][3]}}


@pytest.mark.parametrize("key", ["openai_vitb32_224", "openai_vitl14_336"])
def test_zoo_transforms_are_registered_and_fit_the_model(key: str) -> None:
    transform, _ = get_transforms_for_pretrained(key)  # the rows as the plugin registers them
    size = TOWERS[key.split("_", 1)[1]][3]
    image = transform(Image.new("RGB", (300, 200), color=(255, 0, 0)))  # wide: padded above and below
    assert image.shape == (3, size, size)
    white = [(1.0 - m) / s for m, s in zip(CLIP_MEAN, CLIP_STD)]
    torch.testing.assert_close(image[:, 0, size // 2], torch.tensor(white))
    expected_red = [
        (1.0 - CLIP_MEAN[0]) / CLIP_STD[0],
        -CLIP_MEAN[1] / CLIP_STD[1],
        -CLIP_MEAN[2] / CLIP_STD[2],
    ]
    torch.testing.assert_close(image[:, size // 2, size // 2], torch.tensor(expected_red))
