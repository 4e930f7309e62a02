"""Tests of ViTExtractor: archs against timm's, the CLS embedding, the position-embedding interpolation,
multi-scale, attention and its drawing, local checkpoints."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import timm
import torch
import torch.nn.functional as F
from oml_models.gradcam import overlay_heatmap
from oml_models.vit import ViTExtractor
from oml_models.vit_attention import cls_attention_map, last_block_attention
from oml_models.vit_backbone import VIT_ARCHS, interpolate_pos_embed_with_offset
from PIL import Image

from oml_core.interfaces.models import IExtractor
from oml_core.utils.checkpoints import CheckpointError

FEAT_DIMS = {
    "vits8": 384,
    "vits16": 384,
    "vitb8": 768,
    "vitb16": 768,
    "vits14": 384,
    "vitb14": 768,
    "vitl14": 1024,
    "vits14_reg": 384,
    "vitb14_reg": 768,
    "vitl14_reg": 1024,
}


def _images(batch: int, height: int, width: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, 3, height, width, generator=torch.Generator().manual_seed(seed))


def _extractor(arch: str, normalise_features: bool = False, use_multi_scale: bool = False) -> ViTExtractor:
    torch.manual_seed(0)
    return ViTExtractor(None, arch, normalise_features, use_multi_scale=use_multi_scale).eval()


def _with_arbitrary_values(arch: str) -> ViTExtractor:
    """The extractor of ``arch`` without its random initialisation (a ViT-L's takes seconds): built on the meta
    device, then every tensor assigned a view of one seeded draw, uniform in [-0.05, 0.05] (finite values,
    shared between the tensors: read them only)."""
    with torch.device("meta"):
        model = ViTExtractor(None, arch, normalise_features=False)
    shapes = {key: value.shape for key, value in model.state_dict().items()}
    generator = torch.Generator().manual_seed(0)
    draw = torch.empty(max(shape.numel() for shape in shapes.values())).uniform_(
        -0.05, 0.05, generator=generator
    )
    model.load_state_dict(
        {key: draw[: shape.numel()].view(shape) for key, shape in shapes.items()}, assign=True
    )
    return model.eval()


def _timm_twin(extractor: ViTExtractor, **kwargs: object) -> torch.nn.Module:
    """timm's model of the extractor's arch (by its timm name) with the extractor's weights (its own tensors:
    built on the meta device, no random initialisation to overwrite)."""
    with torch.device("meta"):
        reference = timm.create_model(
            extractor.model.arch.timm_name, pretrained=False, num_classes=0, **kwargs
        )
    reference.load_state_dict(extractor.model.state_dict(), strict=True, assign=True)
    return reference.eval()


@pytest.mark.parametrize("arch", sorted(VIT_ARCHS))
def test_arch_has_the_layers_of_its_timm_arch(arch: str) -> None:
    with torch.device("meta"):
        ours = ViTExtractor(None, arch, normalise_features=False)
        reference = timm.create_model(VIT_ARCHS[arch].timm_name, pretrained=False, num_classes=0)
    shapes = {key: tuple(value.shape) for key, value in ours.model.state_dict().items()}
    assert shapes == {key: tuple(value.shape) for key, value in reference.state_dict().items()}
    grid = 224 // VIT_ARCHS[arch].patch_size if "14" not in arch else 37  # DINO: 224 px, DINOv2: 518 px
    prefix = 0 if arch.endswith("_reg") else 1  # with registers, no position embedding for the CLS token
    assert shapes["pos_embed"] == (1, grid * grid + prefix, FEAT_DIMS[arch])
    assert ("reg_token" in shapes) == arch.endswith("_reg")
    assert ("blocks.0.ls1.gamma" in shapes) == ("14" in arch)  # DINOv2's layer scale


@pytest.mark.parametrize("arch", sorted(VIT_ARCHS))
def test_every_arch_embeds_small_inputs(arch: str) -> None:
    """Every arch's forward (its layers: ``test_arch_has_the_layers_of_its_timm_arch``; the random
    initialisation: the tests of vits16, vits14 and vits14_reg below)."""
    model = _with_arbitrary_values(arch)
    assert isinstance(model, IExtractor)
    assert model.feat_dim == FEAT_DIMS[arch]
    side = 28 if "14" in arch else 32
    with torch.no_grad():
        out = model(_images(2, side, side))
    assert out.shape == (2, FEAT_DIMS[arch])
    assert torch.isfinite(out).all()


def test_normalise_features_gives_unit_norms() -> None:
    model = _extractor("vits16", normalise_features=True)
    with torch.no_grad():
        out = model(_images(3, 32, 48))
    torch.testing.assert_close(out.norm(dim=1), torch.ones(3))


def test_extract_equals_forward() -> None:
    model = _extractor("vits14_reg")
    x = _images(2, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(model.extract(x), model(x), rtol=0, atol=0)


def test_embedding_is_timms_cls_token_at_the_native_size() -> None:
    model = _extractor("vits16")
    x = _images(2, 224, 224)
    with torch.no_grad():
        expected = _timm_twin(model).forward_features(x)[:, 0]  # the CLS token after the final norm
        torch.testing.assert_close(model(x), expected)
        torch.testing.assert_close(
            _extractor("vits16", normalise_features=True)(x), expected / expected.norm(dim=1, keepdim=True)
        )


def test_registers_interpolate_as_timm_at_any_size() -> None:
    model = _extractor("vits14_reg")
    x = _images(2, 28, 42)  # a 2 x 3 grid of patches
    with torch.no_grad():
        expected = _timm_twin(model, dynamic_img_size=True).forward_features(x)[:, 0]
        torch.testing.assert_close(model(x), expected)


@pytest.mark.parametrize(("arch", "side"), [("vits16", (32, 48)), ("vits14", (28, 42))])
def test_dino_interpolation_is_the_original_one(arch: str, side: tuple[int, int]) -> None:
    """DINO / DINOv2 resample the position embedding with ``scale_factor=(grid + 0.1) / M`` (bicubic, no
    antialiasing), not with timm's antialiased resize: the reference is timm's model for the input's size
    given the position embedding resampled that way."""
    model = _extractor(arch)
    patch = VIT_ARCHS[arch].patch_size
    rows, cols = side[0] // patch, side[1] // patch
    stored = model.model.pos_embed.detach()
    native = round(math.sqrt(stored.shape[1] - 1))
    grid = stored[:, 1:].reshape(1, native, native, -1).permute(0, 3, 1, 2)
    resampled = F.interpolate(
        grid, scale_factor=((rows + 0.1) / native, (cols + 0.1) / native), mode="bicubic"
    )
    assert resampled.shape[-2:] == (rows, cols)
    state = dict(model.model.state_dict())
    state["pos_embed"] = torch.cat([stored[:, :1], resampled.flatten(2).transpose(1, 2)], dim=1)
    with torch.device("meta"):
        reference = timm.create_model(
            VIT_ARCHS[arch].timm_name, pretrained=False, num_classes=0, img_size=side
        )
    reference.load_state_dict(state, assign=True)
    x = _images(2, *side)
    with torch.no_grad():
        expected = reference.eval().forward_features(x)[:, 0]
        antialiased = _timm_twin(model, dynamic_img_size=True).forward_features(x)[:, 0]
        torch.testing.assert_close(model(x), expected)
    assert not torch.allclose(expected, antialiased, atol=1e-4)  # the two resamplings differ


def test_offset_interpolation_keeps_a_constant_grid_constant() -> None:
    pos = torch.full((1, 16, 5), 2.5)  # a 4 x 4 grid
    out = interpolate_pos_embed_with_offset(pos, (2, 3), offset=0.1)
    torch.testing.assert_close(out, torch.full((1, 6, 5), 2.5))
    with pytest.raises(ValueError, match="square grid"):
        interpolate_pos_embed_with_offset(torch.zeros(1, 15, 5), (2, 3), offset=0.1)


def test_pixels_beyond_whole_patches_are_ignored() -> None:
    model = _extractor("vits16")
    x = _images(2, 40, 37)
    with torch.no_grad():
        torch.testing.assert_close(model(x), model(x[..., :32, :32]), rtol=0, atol=0)


def _bilinear_resize_by(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Bilinear resampling by ``scale`` computed by hand: an output side of ``floor(n * scale)`` pixels, the
    output pixel ``i`` taken at the input coordinate ``(i + 0.5) / scale - 0.5`` (half-pixel centres)."""
    rows, cols = (math.floor(n * scale) for n in x.shape[-2:])
    ys = ((torch.arange(rows) + 0.5) / scale - 0.5) * 2 / x.shape[-2] + 1 / x.shape[-2] - 1
    xs = ((torch.arange(cols) + 0.5) / scale - 0.5) * 2 / x.shape[-1] + 1 / x.shape[-1] - 1
    grid = torch.stack(torch.meshgrid(xs, ys, indexing="xy"), dim=-1).expand(x.shape[0], rows, cols, 2)
    return F.grid_sample(x, grid, mode="bilinear", align_corners=False)


@pytest.mark.parametrize("normalise", [False, True])
def test_multi_scale_is_the_mean_over_the_rescaled_inputs(normalise: bool) -> None:
    single = _extractor("vits16")
    multi = _extractor("vits16", normalise_features=normalise, use_multi_scale=True)
    multi.load_state_dict(single.state_dict())
    sizes: list[tuple[int, int]] = []
    multi.model.register_forward_pre_hook(lambda _m, args: sizes.append(tuple(args[0].shape[-2:])))
    x = _images(2, 64, 64)
    with torch.no_grad():
        out = multi(x)
        # the scales 1, 1/sqrt(2), 1/2: 64 -> 64, floor(45.25) = 45 and 32 pixels a side
        expected = sum(single(_bilinear_resize_by(x, s)) for s in (1.0, 2**-0.5, 0.5)) / 3
    assert sizes == [(64, 64), (45, 45), (32, 32)]
    if normalise:
        expected = expected / expected.norm(dim=1, keepdim=True)
    torch.testing.assert_close(out, expected)


def test_input_too_small_or_not_rgb_is_refused() -> None:
    with pytest.raises(ValueError, match=r"x of 24x24 pixels .* scale 0.500, shorter than a patch of 16"):
        _extractor("vits16", use_multi_scale=True)(_images(1, 24, 24))
    with pytest.raises(ValueError, match="shorter than a patch of 14"):
        _extractor("vits14")(_images(1, 13, 28))
    with pytest.raises(
        ValueError, match=r"x must be a batch of RGB images \[B, 3, H, W\], got the shape \(1, 28"
    ):
        _extractor("vits14")(torch.zeros(1, 28, 28))


def test_last_block_attention_is_timms_unfused_attention() -> None:
    model = _extractor("vits14_reg")
    reference = _timm_twin(model, dynamic_img_size=True)
    captured: list[torch.Tensor] = []
    last = reference.blocks[-1].attn
    last.fused_attn = False  # timm then computes the softmax explicitly and passes it through attn_drop
    last.attn_drop.register_forward_hook(lambda _m, _args, out: captured.append(out))
    x = _images(2, 28, 42)
    with torch.no_grad():
        reference(x)
        attention = last_block_attention(model.model, x)
    assert attention.shape == (2, 6, 1 + 4 + 6, 1 + 4 + 6)  # CLS, 4 registers, 2 x 3 patches
    torch.testing.assert_close(attention, captured[0])
    torch.testing.assert_close(attention.sum(dim=-1), torch.ones(2, 6, 11))


@pytest.mark.parametrize(("arch", "prefix"), [("vits16", 1), ("vits14_reg", 5)])
def test_cls_attention_map_is_the_cls_row_over_the_patches(arch: str, prefix: int) -> None:
    model = _extractor(arch)
    patch = VIT_ARCHS[arch].patch_size
    x = _images(1, 2 * patch, 3 * patch)
    with torch.no_grad():
        full = last_block_attention(model.model, x)
        heads = cls_attention_map(model.model, x)
    assert heads.shape == (1, 6, 2, 3)
    torch.testing.assert_close(heads.flatten(2), full[:, :, 0, prefix:])
    # the CLS query's weights over all keys sum to 1: what the prefix tokens do not take, the patches do
    torch.testing.assert_close(heads.sum(dim=(2, 3)), 1 - full[:, :, 0, :prefix].sum(dim=-1))


def test_draw_attention_gives_an_image_of_the_input_size() -> None:
    model = _extractor("vits16").train()
    rng = np.random.default_rng(0)
    array = rng.integers(0, 256, size=(37, 45, 3), dtype=np.uint8)
    drawn = model.draw_attention(array)
    assert drawn.shape == (37, 45, 3)
    assert drawn.dtype == np.uint8
    assert drawn.max() == 255
    assert model.training  # the mode is restored
    drawn_pil = model.draw_attention(Image.fromarray(array))  # as OML: a PIL image for a PIL image
    assert isinstance(drawn_pil, Image.Image) and drawn_pil.mode == "RGB" and drawn_pil.size == (45, 37)
    np.testing.assert_array_equal(np.asarray(drawn_pil), drawn)


def test_draw_attention_paints_each_patch_with_its_attention() -> None:
    """On a flat grey image the colour of a pixel depends on its patch's attention only: constant inside a
    patch, and the one drawn for the 2 x 3 grid of the CLS attention (mean over heads, 0.6 at its maximum)
    over a white image (the grey stretched to a maximum of 255)."""
    model = _extractor("vits16")
    grey = np.full((32, 48, 3), 128, dtype=np.uint8)
    drawn = model.draw_attention(grey).astype(int)
    cells = drawn.reshape(2, 16, 3, 16, 3)
    assert (cells == cells[:, :1, :, :1]).all()
    x = (
        torch.from_numpy(grey / 255.0).float().permute(2, 0, 1)
        - torch.tensor([0.485, 0.456, 0.406])[:, None, None]
    )
    x = (x / torch.tensor([0.229, 0.224, 0.225])[:, None, None]).unsqueeze(0)
    with torch.no_grad():
        attention = cls_attention_map(model.model, x).mean(dim=1)[0]
    heat = 0.6 * attention / attention.max()
    white = np.full((2, 3, 3), 255, dtype=np.uint8)  # a flat image is stretched to white
    expected = overlay_heatmap(white, heat.numpy())
    np.testing.assert_array_equal(cells[:, 0, :, 0], expected)


def test_draw_attention_refuses_bad_images() -> None:
    model = _extractor("vits16")
    with pytest.raises(ValueError, match=r"image must be an RGB array \[H, W, 3\]"):
        model.draw_attention(np.zeros((32, 32)))
    with pytest.raises(ValueError, match="smaller than a patch of 16x16"):
        model.draw_attention(np.zeros((8, 32, 3)))
    with pytest.raises(TypeError, match="PIL image or a numpy array, got list"):
        model.draw_attention([[0, 0, 0]])


def test_unknown_arch_lists_the_known_ones() -> None:
    with pytest.raises(
        ValueError,
        match=r"Unknown arch 'vitx16' of ViTExtractor; known archs: vits8, vits16, vitb8, vitb16, vits14",
    ):
        ViTExtractor(None, "vitx16", normalise_features=False)


def test_local_checkpoints_of_the_user_load(tmp_path: Path) -> None:
    trained = _extractor("vits14_reg", normalise_features=True)
    x = _images(2, 28, 28)
    with torch.no_grad():
        expected = trained(x)
    plain = tmp_path / "extractor.pth"
    torch.save(trained.state_dict(), plain)
    lightning = tmp_path / "epoch=3.ckpt"
    state = {f"model.{key}": value for key, value in trained.state_dict().items()}
    torch.save({"state_dict": {**state, "criterion.weight": torch.ones(3)}, "epoch": 3}, lightning)
    for weights in (plain, str(lightning)):
        torch.manual_seed(1)
        loaded = ViTExtractor(weights, "vits14_reg", normalise_features=True).eval()
        with torch.no_grad():
            torch.testing.assert_close(loaded(x), expected, rtol=0, atol=0)


def test_a_checkpoint_of_another_arch_fails_naming_file_and_keys(tmp_path: Path) -> None:
    path = tmp_path / "vits16.pth"
    torch.save(_extractor("vits16").state_dict(), path)
    with pytest.raises(
        CheckpointError, match=r"vits16\.pth.*missing keys \(25\): reg_token, blocks\.0\.ls1\.gamma"
    ):
        ViTExtractor(path, "vits14_reg", normalise_features=False)
    state = _extractor("vits16").state_dict()
    del state["model.norm.bias"]
    torch.save(state, path)
    with pytest.raises(CheckpointError, match=r"vits16\.pth.*missing keys \(1\): norm\.bias"):
        ViTExtractor(str(path), "vits16", normalise_features=False)
