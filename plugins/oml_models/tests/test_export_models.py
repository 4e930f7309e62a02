"""``oml export`` of the image families of oml-models, each a tiny randomly initialised model of its own class: a
ViT (DINO's architecture) under an MLP head (``ExtractorWithMLP``), CLIP's image tower and Unicom's ViT. Each graph
runs on onnxruntime as its PyTorch model at another batch size; the preprocessing comes from the transforms."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from oml_models import ExtractorWithMLP, ViTCLIPExtractor, ViTExtractor, ViTUnicomExtractor
from oml_models.clip import CLIP_ARCHS
from oml_models.unicom_vit import UNICOM_ARCHS, UnicomArch
from oml_models.vit_backbone import VIT_ARCHS, ViTArch

from oml_core.export import ExportError, ExportSource, write_export
from oml_core.export.extractor import OnnxExtractor
from oml_core.registry import Registry

#: A tiny open_clip model config (its text tower is never built): 32 px images, patches of 16, 2 blocks of 64.
TINY_CLIP = {
    "embed_dim": 16,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "patch_size": 16, "head_width": 32},
    "text_cfg": {"context_length": 8, "vocab_size": 64, "width": 32, "heads": 2, "layers": 1},
}


@pytest.fixture(scope="module")
def tiny_archs(tmp_path_factory) -> Iterator[None]:
    """The tiny archs ``vit_tiny``, ``clip_tiny`` and ``unicom_tiny`` among the classes' own (removed after)."""
    import open_clip

    config = tmp_path_factory.mktemp("open_clip") / "tiny_clip_test.json"
    config.write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(config)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(VIT_ARCHS, "vit_tiny", ViTArch("none", 8, 32, depth=2, num_heads=2, img_size=32))
        patch.setitem(CLIP_ARCHS, "clip_tiny", "tiny_clip_test")
        patch.setitem(UNICOM_ARCHS, "unicom_tiny", UnicomArch(16, 32, 2, 2, embedding_size=24, img_size=32))
        yield


def _export(extractor: torch.nn.Module, name: str, folder: Path, transforms: dict | None) -> OnnxExtractor:
    """``extractor`` exported to ``folder`` (as a checkpoint's, with ``transforms``), its graph as an extractor."""
    source = ExportSource(
        "checkpoint", f"{name}.ckpt", extractor, {"name": name, "args": {}}, transforms, None, None
    )
    write_export(source, folder, Registry())
    return OnnxExtractor(folder)


def _relative_l2(found: torch.Tensor, expected: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(found - expected) / torch.linalg.vector_norm(expected))


@pytest.mark.parametrize(
    ("name", "build", "transforms"),
    [
        (
            "extractor_with_mlp",
            lambda: ExtractorWithMLP(ViTExtractor(None, "vit_tiny", normalise_features=True), [16, 8]),
            {"name": "norm_resize_torch", "args": {"im_size": 32}},
        ),
        ("vit_clip", lambda: ViTCLIPExtractor(None, "clip_tiny", normalise_features=True), None),
        ("vit_unicom", lambda: ViTUnicomExtractor(None, "unicom_tiny", normalise_features=False), None),
    ],
)
def test_an_image_family_exports_with_parity_at_another_batch_size(
    tiny_archs, tmp_path, name, build, transforms
):
    torch.manual_seed(0)
    model = build().eval()
    onnx = _export(model, name, tmp_path / name, transforms)
    manifest = onnx.manifest.data
    assert manifest["inputs"] == [{"name": "images", "dtype": "float32", "shape": ["batch", 3, 32, 32]}]
    assert manifest["parity"]["max_relative_l2"] <= 1e-4 and onnx.feat_dim == model.feat_dim
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert _relative_l2(onnx(x), model(x)) < 1e-4
    if transforms is not None:  # torchvision's Resize and Normalize, described
        pre = onnx.manifest.preprocessing
        assert (pre["image_size"], pre["interpolation"], pre["transforms"]) == (32, "bilinear", transforms)
        assert pre["mean"] == pytest.approx([0.485, 0.456, 0.406]) and pre["std"] == pytest.approx(
            [0.229, 0.224, 0.225]
        )
        assert [step["type"] for step in pre["steps"]] == ["Resize", "ToTensor", "Normalize"]


def test_a_fixed_size_tower_refuses_transforms_of_another_size(tiny_archs, tmp_path):
    model = ViTCLIPExtractor(None, "clip_tiny")
    with pytest.raises(ExportError) as raised:
        _export(model, "vit_clip", tmp_path / "clip", {"name": "norm_resize_torch", "args": {"im_size": 64}})
    assert str(raised.value) == (
        "the extractor 'vit_clip' of vit_clip.ckpt cannot be exported to ONNX: ViTCLIPExtractor takes images of "
        "32x32 px, its transforms make 64x64"
    )
    assert not (tmp_path / "clip").exists()
