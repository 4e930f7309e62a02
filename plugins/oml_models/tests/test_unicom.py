"""Tests of ViTUnicomExtractor, its converter and its zoo rows, all offline.

The reference is written here from the original release's definition (deepglint/unicom
``vision_transformer.py``) with plain torch functions, reading a state dict in the original layout: patch
convolution, position embedding (no class token), pre-norm blocks (attention without qkv bias, ReLU6 MLP),
final LayerNorm, every token flattened into the ``feature`` head (Linear, BatchNorm1d, Linear, BatchNorm1d).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from oml_models.converters.unicom import unicom_to_extractor
from oml_models.normalisation import CLIP_MEAN, CLIP_STD
from oml_models.unicom import ViTUnicomExtractor
from oml_models.zoo.unicom import SHA256, ZOO
from PIL import Image
from torch import Tensor

from oml_core import hookimpl
from oml_core.registry import Registry, UnknownNameError
from oml_core.utils.checkpoints import CheckpointError
from oml_core.zoo import PretrainedDownloadError, get_transforms_for_pretrained

#: Hand-written hyper-parameters of the release's archs: patch, dim, depth, heads, embedding size, image size.
ARCHS = {
    "vitb32_unicom": (32, 768, 12, 12, 512, 224),
    "vitb16_unicom": (16, 768, 12, 12, 768, 224),
    "vitl14_unicom": (14, 1024, 24, 16, 768, 224),
    "vitl14_336px_unicom": (14, 1024, 24, 16, 768, 336),
}
ARCH = "vitb32_unicom"
PATCH, DIM, DEPTH, HEADS, EMBEDDING, SIZE = ARCHS[ARCH]
TOKENS = (SIZE // PATCH) ** 2


pytestmark = pytest.mark.usefixtures("no_network")  # every test: no network (conftest.py)


class UnicomZoo:
    """Registers the extractor and this module's zoo rows, as the plugin does."""

    @hookimpl
    def oml_register_extractors(self, register):
        register("vit_unicom", "oml_models.unicom:ViTUnicomExtractor")

    @hookimpl
    def oml_register_pretrained(self, register):
        for key, factory in ZOO.items():
            register(key, factory)


def _images(batch: int = 2, size: int = SIZE, seed: int = 0) -> Tensor:
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))


def _upstream_shapes(
    patch: int, dim: int, depth: int, embedding: int, size: int
) -> dict[str, tuple[int, ...]]:
    """The keys and shapes of the release's state dicts, from its definition."""
    tokens = (size // patch) ** 2
    shapes: dict[str, tuple[int, ...]] = {
        "patch_embed.proj.weight": (dim, 3, patch, patch),
        "patch_embed.proj.bias": (dim,),
        "pos_embed": (1, tokens, dim),
    }
    for i in range(depth):
        shapes |= {
            f"blocks.{i}.norm1.weight": (dim,),
            f"blocks.{i}.norm1.bias": (dim,),
            f"blocks.{i}.norm2.weight": (dim,),
            f"blocks.{i}.norm2.bias": (dim,),
            f"blocks.{i}.attn.qkv.weight": (3 * dim, dim),
            f"blocks.{i}.attn.proj.weight": (dim, dim),
            f"blocks.{i}.attn.proj.bias": (dim,),
            f"blocks.{i}.mlp.fc1.weight": (4 * dim, dim),
            f"blocks.{i}.mlp.fc1.bias": (4 * dim,),
            f"blocks.{i}.mlp.fc2.weight": (dim, 4 * dim),
            f"blocks.{i}.mlp.fc2.bias": (dim,),
        }
    shapes |= {"norm.weight": (dim,), "norm.bias": (dim,), "feature.0.weight": (dim, tokens * dim)}
    for index, width in ((1, dim), (3, embedding)):
        for name in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"feature.{index}.{name}"] = (width,)
        shapes[f"feature.{index}.num_batches_tracked"] = ()
    shapes["feature.2.weight"] = (embedding, dim)
    return shapes


def _random_upstream(seed: int = 0) -> dict[str, Tensor]:
    """A random state dict of the release's ViT-B/32 in its layout and dtype (float16)."""
    generator = torch.Generator().manual_seed(seed)
    state_dict = {}
    for key, shape in _upstream_shapes(PATCH, DIM, DEPTH, EMBEDDING, SIZE).items():
        if key.endswith("num_batches_tracked"):
            value = torch.tensor(1000)
        elif key.endswith("running_var"):
            value = torch.rand(shape, generator=generator) + 0.5
        elif key.endswith(("norm1.weight", "norm2.weight", "norm.weight")) or re.search(
            r"feature\.[13]\.w", key
        ):
            value = 1 + 0.1 * torch.randn(shape, generator=generator)
        else:
            value = 0.02 * torch.randn(shape, generator=generator)
        state_dict[key] = value.half() if value.is_floating_point() else value
    return state_dict


def _reference(state_dict: dict[str, Tensor], x: Tensor) -> Tensor:
    """The release's forward in eval mode, in float32, from its state dict."""
    sd = {k: v.float() if v.is_floating_point() else v for k, v in state_dict.items()}
    batch = x.shape[0]
    x = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=PATCH)
    x = x.flatten(2).transpose(1, 2) + sd["pos_embed"]
    for i in range(DEPTH):
        p = f"blocks.{i}."
        h = F.layer_norm(x, (DIM,), sd[p + "norm1.weight"], sd[p + "norm1.bias"], eps=1e-5)
        q, k, v = (
            F.linear(h, sd[p + "attn.qkv.weight"]).reshape(batch, TOKENS, 3, HEADS, -1).permute(2, 0, 3, 1, 4)
        )
        attention = ((q @ k.transpose(-2, -1)) * (DIM // HEADS) ** -0.5).softmax(dim=-1)
        h = (attention @ v).transpose(1, 2).reshape(batch, TOKENS, DIM)
        x = x + F.linear(h, sd[p + "attn.proj.weight"], sd[p + "attn.proj.bias"])
        h = F.layer_norm(x, (DIM,), sd[p + "norm2.weight"], sd[p + "norm2.bias"], eps=1e-5)
        h = F.relu6(F.linear(h, sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"]))
        x = x + F.linear(h, sd[p + "mlp.fc2.weight"], sd[p + "mlp.fc2.bias"])
    x = F.layer_norm(x, (DIM,), sd["norm.weight"], sd["norm.bias"], eps=1e-5).reshape(batch, TOKENS * DIM)
    for linear, bn in (("feature.0", "feature.1"), ("feature.2", "feature.3")):
        x = F.linear(x, sd[linear + ".weight"])
        x = F.batch_norm(
            x,
            sd[bn + ".running_mean"],
            sd[bn + ".running_var"],
            sd[bn + ".weight"],
            sd[bn + ".bias"],
            eps=2e-5,
        )
    return x


@pytest.fixture(scope="module")
def upstream() -> dict[str, Tensor]:
    return _random_upstream()


@pytest.fixture(scope="module")
def expected(upstream: dict[str, Tensor]) -> Tensor:
    with torch.no_grad():
        return _reference(upstream, _images())


@pytest.fixture(scope="module")
def weights_dir(upstream: dict[str, Tensor], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A weights cache holding the release's file of ``vitb32_unicom`` (random, in the release's layout)."""
    folder = tmp_path_factory.mktemp("weights")
    torch.save(upstream, folder / ZOO[ARCH]().filename)
    return folder


@pytest.fixture()
def cache(weights_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(weights_dir))
    monkeypatch.setenv("OML_SKIP_WEIGHTS_CHECK", "1")  # fake weights under real zoo names
    return weights_dir


def _param_count(patch: int, dim: int, depth: int, heads: int, embedding: int, size: int) -> int:
    shapes = _upstream_shapes(patch, dim, depth, embedding, size)
    return sum(
        torch.Size(shape).numel() for key, shape in shapes.items() if not re.search(r"running|batches", key)
    )


@pytest.mark.parametrize("arch", list(ARCHS))
def test_every_arch_builds_with_the_release_layout(arch: str) -> None:
    patch, dim, depth, heads, embedding, size = ARCHS[arch]
    with torch.device("meta"):  # the architecture without allocating (ViT-L/14@336px has 908M parameters)
        model = ViTUnicomExtractor(None, arch=arch, normalise_features=True)
        assert model(torch.empty(3, 3, size, size)).shape == (3, embedding)
    assert model.feat_dim == embedding
    shapes = {key: tuple(value.shape) for key, value in model.model.state_dict().items()}
    assert shapes == _upstream_shapes(patch, dim, depth, embedding, size)
    assert sum(p.numel() for p in model.parameters()) == _param_count(*ARCHS[arch])
    assert model.model.blocks[0].attn.num_heads == heads


def test_release_checkpoint_through_the_constructor_equals_the_reference(
    cache: Path, expected: Tensor
) -> None:
    model = ViTUnicomExtractor(ARCH, arch=ARCH, normalise_features=False).eval()
    with torch.no_grad():
        out = model(_images())
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(model.extract(_images()), out, rtol=0, atol=0)
        model.normalise_features = True
        normalised = model(_images())
    torch.testing.assert_close(normalised, F.normalize(expected, dim=1), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(normalised.norm(dim=1), torch.ones(2))


def test_from_pretrained_uses_the_cache_and_the_rows_arguments(cache: Path, expected: Tensor) -> None:
    model = ViTUnicomExtractor.from_pretrained(ARCH, registry=Registry([UnicomZoo()], load_entrypoints=False))
    assert type(model) is ViTUnicomExtractor and model.arch == ARCH and model.normalise_features
    with torch.no_grad():
        torch.testing.assert_close(
            model.eval()(_images()), F.normalize(expected, dim=1), rtol=1e-4, atol=1e-5
        )


def test_a_missing_zoo_file_is_not_downloaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(tmp_path))
    monkeypatch.setenv("OML_SKIP_WEIGHTS_CHECK", "1")  # fake weights under real zoo names
    row = ZOO["vitl14_336px_unicom"]()
    assert row.url == "https://github.com/deepglint/unicom/releases/download/l14_336px/FP16-ViT-L-14-336px.pt"
    expected = f"download {row.url} yourself and put the file at {tmp_path / 'FP16-ViT-L-14-336px.pt'}"
    with pytest.raises(PretrainedDownloadError, match=re.escape(expected)):
        with torch.device("meta"):
            ViTUnicomExtractor("vitl14_336px_unicom", arch="vitl14_336px_unicom", normalise_features=True)


def test_user_checkpoints_load(
    tmp_path: Path, cache: Path, upstream: dict[str, Tensor], expected: Tensor
) -> None:
    release = cache / ZOO[ARCH]().filename  # the network's own state dict, given as a path
    model = ViTUnicomExtractor(release, arch=ARCH, normalise_features=False).eval()
    assert model.model.grad_checkpointing  # OML's default
    with torch.no_grad():
        torch.testing.assert_close(model(_images()), expected, rtol=1e-4, atol=1e-4)
    lightning = tmp_path / "last.ckpt"  # a LightningModule's "model." before the extractor's own "model."
    state_dict = {f"model.model.{k}": v for k, v in upstream.items()}
    state_dict["criterion.weight"] = torch.zeros(10, EMBEDDING)
    torch.save({"state_dict": state_dict, "epoch": 1}, lightning)
    model = ViTUnicomExtractor(str(lightning), arch=ARCH, normalise_features=False, use_gradient_ckpt=False)
    assert not model.model.grad_checkpointing
    with torch.no_grad():
        torch.testing.assert_close(model.eval()(_images()), expected, rtol=1e-4, atol=1e-4)


def test_mismatching_checkpoints_name_the_file_and_keys(tmp_path: Path, upstream: dict[str, Tensor]) -> None:
    path = tmp_path / "b32.pt"
    torch.save(upstream, path)
    with pytest.raises(CheckpointError, match=r"b32\.pt.*shape mismatch.*patch_embed\.proj\.weight"):
        ViTUnicomExtractor(str(path), arch="vitb16_unicom", normalise_features=True)
    broken = dict(upstream)
    broken["feature.4.weight"] = broken.pop("feature.2.weight")
    torch.save(broken, path)
    with pytest.raises(
        CheckpointError,
        match=r"b32\.pt.*missing keys \(1\): feature\.2\.weight.*unexpected keys \(1\): feature\.4",
    ):
        ViTUnicomExtractor(str(path), arch=ARCH, normalise_features=True)


def test_bad_arguments_and_inputs() -> None:
    with pytest.raises(
        ValueError,
        match=r"Unknown arch 'vitb32' of ViTUnicomExtractor; known archs: vitb32_unicom, vitb16_unicom",
    ):
        ViTUnicomExtractor(None, arch="vitb32", normalise_features=True)
    with torch.device("meta"):
        with pytest.raises(UnknownNameError, match="vitb32_unicom"):
            ViTUnicomExtractor("vitb32_unicon", arch=ARCH, normalise_features=True)
        model = ViTUnicomExtractor(None, arch=ARCH, normalise_features=True)
        with pytest.raises(ValueError, match=r"images x of shape \[B, 3, 224, 224\].*got \[2, 3, 160, 224\]"):
            model(torch.empty(2, 3, 160, 224))


def test_converter_prefixes_and_casts() -> None:
    upstream = {
        "norm.bias": torch.tensor([0.5], dtype=torch.float16),
        "feature.1.num_batches_tracked": torch.tensor(7),
    }
    converted = unicom_to_extractor(upstream)
    assert list(converted) == ["model.norm.bias", "model.feature.1.num_batches_tracked"]
    assert converted["model.norm.bias"].dtype == torch.float32
    assert converted["model.feature.1.num_batches_tracked"].dtype == torch.int64


def test_zoo_rows() -> None:
    rows = {key: factory() for key, factory in ZOO.items()}
    assert list(rows) == list(ARCHS)
    assert [row.filename for row in rows.values()] == list(SHA256)
    for key, row in rows.items():
        assert row.extractor == "vit_unicom" and dict(row.init_args) == {
            "arch": key,
            "normalise_features": True,
        }
        assert row.md5 is None and row.url.endswith("/" + row.filename)
        assert row.load_converter() is unicom_to_extractor
        with torch.device("meta"):
            assert ViTUnicomExtractor(None, **row.init_args).feat_dim == ARCHS[key][4]
        size = ARCHS[key][5]
        assert row.transforms == {
            "name": "norm_resize_hypvit_torch",
            "args": {"im_size": size, "crop_size": size, "mean": list(CLIP_MEAN), "std": list(CLIP_STD)},
        }


@pytest.mark.parametrize("key", ["vitb32_unicom", "vitl14_336px_unicom"])
def test_zoo_transforms_are_registered_and_fit_the_model(key: str) -> None:
    transform, _ = get_transforms_for_pretrained(key)  # the rows as the plugin registers them
    size = ARCHS[key][5]
    image = transform(Image.new("RGB", (300, 200), color=(0, 0, 255)))
    assert image.shape == (3, size, size)
    blue = [-CLIP_MEAN[0] / CLIP_STD[0], -CLIP_MEAN[1] / CLIP_STD[1], (1.0 - CLIP_MEAN[2]) / CLIP_STD[2]]
    torch.testing.assert_close(image[:, size // 2, size // 2], torch.tensor(blue))
