"""Hook implementations of the ``oml_models`` plugin (entry point ``oml_models = "oml_models.plugin"``).

Factories are lazy ``"module:attr"`` strings: torchvision, timm and open_clip are imported only when a model
is built. The default config of a component ``name`` of kind ``kind`` is ``oml_models/configs/<kind>/<name>.yaml``.
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback

EXTRACTORS = {
    "resnet": (
        "oml_models.resnet:ResnetExtractor",
        "torchvision ResNet-18..152, GeM pooling, fc removal, L2 norm",
    ),
    "vit": (
        "oml_models.vit:ViTExtractor",
        "ViT of DINO (S/8, S/16, B/8, B/16) and DINOv2 (S/B/L 14, registers)",
    ),
    "vit_clip": (
        "oml_models.clip:ViTCLIPExtractor",
        "image tower of CLIP (open_clip): B/16, B/32, L/14, L/14@336",
    ),
    "vit_unicom": (
        "oml_models.unicom:ViTUnicomExtractor",
        "Unicom ViT (deepglint): B/32, B/16, L/14, L/14@336",
    ),
    "extractor_with_mlp": ("oml_models.mlp:ExtractorWithMLP", "an extractor with an MLP projection head"),
}

PAIRWISE_MODELS = {
    "linear_siamese": (
        "oml_models.siamese:LinearTrivialDistanceSiamese",
        "L2 distance of linearly projected embeddings",
    ),
    "trivial_distance_siamese": (
        "oml_models.siamese:TrivialDistanceSiamese",
        "L2 distance of an extractor's embeddings",
    ),
    "concat_siamese": (
        "oml_models.siamese:ConcatSiamese",
        "both images stacked through an extractor and an MLP head (STIR-style re-ranker)",
    ),
}

TRANSFORMS = {
    "norm_torch": ("oml_models.transforms:get_normalisation_torch", "ToTensor + Normalize"),
    "norm_resize_torch": (
        "oml_models.transforms:get_normalisation_resize_torch",
        "Resize to a square + ToTensor + Normalize (torchvision)",
    ),
    "augs_torch": ("oml_models.transforms:get_augs_torch", "OML's torchvision training augmentations"),
    "augs_hypvit_torch": ("oml_models.transforms:get_augs_hypvit", "Hyp-ViT training augmentations"),
    "norm_resize_hypvit_torch": (
        "oml_models.transforms:get_normalisation_resize_hypvit",
        "shorter side resize + centre crop + Normalize (ImageNet evaluation)",
    ),
    "norm_resize_albu": (
        "oml_models.transforms:get_normalisation_resize_pad",
        "longer side resize + white padding to a square + Normalize (OML's albumentations one, on torchvision)",
    ),
    "norm_resize_albu_clip": (
        "oml_models.transforms:get_normalisation_resize_pad_clip",
        "norm_resize_albu with CLIP's mean and std",
    ),
}


def _register_all(register: RegisterCallback, table: dict[str, tuple[str, str]]) -> None:
    for name, (factory, description) in table.items():
        register(name, factory, description=description)


@hookimpl
def oml_register_extractors(register: RegisterCallback) -> None:
    """Register the extractors of :data:`EXTRACTORS` under OML's names."""
    _register_all(register, EXTRACTORS)


@hookimpl
def oml_register_pairwise_models(register: RegisterCallback) -> None:
    """Register the pairwise models of :data:`PAIRWISE_MODELS` under OML's names."""
    _register_all(register, PAIRWISE_MODELS)


@hookimpl
def oml_register_transforms(register: RegisterCallback) -> None:
    """Register the image transforms of :data:`TRANSFORMS` under OML's names."""
    _register_all(register, TRANSFORMS)


@hookimpl
def oml_register_pretrained(register: RegisterCallback) -> None:
    """Register every checkpoint of :data:`oml_models.zoo.PRETRAINED` (metadata only: nothing is downloaded)."""
    from oml_models.zoo import ALIASES, PRETRAINED

    for key, factory in PRETRAINED.items():
        register(key, factory, aliases=ALIASES.get(key, ()), description=factory().description or None)


@hookimpl
def oml_register_config_dirs(register: RegisterCallback) -> None:
    """The default configs: ``extractor/<name>.yaml``, ``pairwise_model/<name>.yaml``, ``transforms/<name>.yaml``."""
    register("pkg://oml_models.configs")
