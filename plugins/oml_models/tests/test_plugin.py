"""The oml_models plugin through the registry: every name registered, every default config and every zoo row
builds (random weights; the zoo's large models on the meta device), and loading the plugin imports nothing
heavy."""

from __future__ import annotations

import subprocess
import sys

import oml_models
import pytest
import torch
from PIL import Image

from oml_core.interfaces.models import IExtractor, IPairwiseModel
from oml_core.registry import Registry
from oml_core.zoo import get_pretrained, get_transforms_for_pretrained, pretrained_keys

EXTRACTORS = ["extractor_with_mlp", "resnet", "vit", "vit_clip", "vit_unicom"]
PAIRWISE_MODELS = ["concat_siamese", "linear_siamese", "trivial_distance_siamese"]
TRANSFORMS = [
    "augs_hypvit_torch",
    "augs_torch",
    "norm_albu",
    "norm_resize_albu",
    "norm_resize_albu_clip",
    "norm_resize_hypvit_torch",
    "norm_resize_pad",
    "norm_resize_pad_clip",
    "norm_resize_torch",
    "norm_torch",
    "unicom_transforms",
]
#: The inputs the default configs' models take: CLIP and Unicom need their exact image size.
INPUT_SIZE = {"vit_clip": 224, "vit_unicom": 224}


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry(allow=["oml_models"], strict=True)


def test_every_name_is_registered_and_exported(registry: Registry) -> None:
    assert [
        n for n in registry.names("extractor") if registry.get("extractor", n).plugin.name != "oml_core"
    ] == (EXTRACTORS)
    assert registry.names("pairwise_model") == PAIRWISE_MODELS
    assert set(TRANSFORMS) <= set(registry.names("transforms"))
    for kind in ("extractor", "pairwise_model"):
        for name in registry.names(kind):
            if registry.get(kind, name).plugin.name == "oml_core":  # the core's own (the onnx extractor)
                continue
            factory = registry.get(kind, name).load()
            assert getattr(oml_models, factory.__name__) is factory


@pytest.mark.parametrize("name", EXTRACTORS)
def test_every_extractor_builds_from_its_default_config(registry: Registry, name: str) -> None:
    model = registry.build("extractor", registry.default_config("extractor", name)).eval()
    assert isinstance(model, IExtractor)
    size = INPUT_SIZE.get(name, 32)
    with torch.no_grad():
        out = model(torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0)))
    assert out.shape == (2, model.feat_dim) and torch.isfinite(out).all()


@pytest.mark.parametrize("name", PAIRWISE_MODELS)
def test_every_pairwise_model_builds_from_its_default_config(registry: Registry, name: str) -> None:
    model = registry.build("pairwise_model", registry.default_config("pairwise_model", name)).eval()
    assert isinstance(model, IPairwiseModel)
    generator = torch.Generator().manual_seed(0)
    shape = (3, 384) if name == "linear_siamese" else (3, 3, 32, 32)
    x1, x2 = torch.randn(shape, generator=generator), torch.randn(shape, generator=generator)
    with torch.no_grad():
        assert model.predict(x1, x2).shape == (3,)


@pytest.mark.parametrize("name", TRANSFORMS)
def test_every_transform_builds_from_its_default_config(registry: Registry, name: str) -> None:
    cfg = registry.default_config("transforms", name)
    out = registry.build("transforms", cfg)(Image.new("RGB", (300, 200), (10, 200, 30)))
    size = cfg["args"].get("crop_size", cfg["args"].get("im_size"))
    assert out.shape == ((3, 200, 300) if size is None else (3, size, size))


def test_every_zoo_row_has_transforms_and_builds(registry: Registry) -> None:
    keys = pretrained_keys(registry=registry)
    assert len(keys) == 32 and {
        "vits16_dino",
        "vitl14_reg_dinov2",
        "resnet50_moco_v2",
        "sber_vitl14_224",
    } <= set(keys)
    image = Image.new("RGB", (300, 200), (10, 200, 30))
    feat_dims: dict[
        str, int
    ] = {}  # by extractor and init_args: the rows that share them build the same model
    for key in keys:
        row = get_pretrained(key, registry)
        transform, imread = get_transforms_for_pretrained(key, registry)
        assert transform(image).ndim == 3 and callable(imread), key
        spec = {"name": row.extractor, "args": {**row.init_args, "weights": None}}
        if repr(spec) not in feat_dims:
            with torch.device("meta"):  # the architecture only: no memory
                feat_dims[repr(spec)] = registry.build("extractor", spec).feat_dim
        assert feat_dims[repr(spec)] > 0, key


def test_the_manuals_spelling_of_the_unicom_keys_is_an_alias(registry: Registry) -> None:
    assert get_pretrained("vitb32_unicorn", registry) == get_pretrained("vitb32_unicom", registry)
    assert get_pretrained("vitl14_336px_unicorn", registry).filename == "FP16-ViT-L-14-336px.pt"


def test_pretrained_models_lists_each_class_its_own_keys() -> None:
    from oml_models import ResnetExtractor, ViTExtractor

    assert set(ResnetExtractor.pretrained_models) == {
        "resnet50_moco_v2",
        *(f"resnet{depth}_imagenet1k_v1" for depth in (18, 34, 50, 101, 152)),
    }
    assert (
        "vits16_dino" in ViTExtractor.pretrained_models
        and "resnet50_moco_v2" not in ViTExtractor.pretrained_models
    )


def test_loading_the_plugin_imports_no_model_library() -> None:
    code = (
        "import sys, oml_models.plugin; from oml_core.registry import Registry; "
        "r = Registry(allow=['oml_models']); r.names('pretrained'); r.names('extractor'); "
        "print(sorted(m for m in ('torchvision', 'timm', 'open_clip') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
