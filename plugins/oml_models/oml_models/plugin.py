"""The plugin module of the ``oml_models`` plugin (entry point ``oml_models = "oml_models.plugin"``).

:data:`COMPONENTS` is the plugin's one table of extractors, pairwise models, transforms and pretrained checkpoints:
declared as ``OML_COMPONENTS``, the registry registers it, and the package ``oml_models`` takes its lazy exports and
``__all__`` from it and from :data:`EXTRA_EXPORTS`. Factories are lazy ``"module:attr"`` strings, but for the
checkpoints, whose factories are the ``PretrainedModel`` factories of :data:`oml_models.zoo.PRETRAINED` (metadata
only: the zoo imports no torch and calling them downloads nothing): torchvision, timm and open_clip are imported
only when a model is built. The default config of a component ``name`` of kind ``kind`` is
``oml_models/configs/<kind>/<name>.yaml``."""

from __future__ import annotations

from types import MappingProxyType

from oml_core.utils.lazy import Component
from oml_models.zoo import ALIASES, PRETRAINED

#: Every checkpoint of :data:`oml_models.zoo.PRETRAINED` (aliases: :data:`oml_models.zoo.ALIASES`), described as
#: its ``PretrainedModel`` is; not exported (``oml_models.zoo`` is their home).
_CHECKPOINTS: tuple[Component, ...] = tuple(
    Component("pretrained", key, factory, factory().description, aliases=ALIASES.get(key, ()), export=False)
    for key, factory in PRETRAINED.items()
)

#: Every component of the plugin; all but the checkpoints are exported by ``oml_models`` under their class or
#: function name.
COMPONENTS: tuple[Component, ...] = (
    Component(
        "extractor",
        "resnet",
        "oml_models.resnet:ResnetExtractor",
        "torchvision ResNet-18..152, GeM pooling, fc removal, L2 norm",
    ),
    Component(
        "extractor",
        "vit",
        "oml_models.vit:ViTExtractor",
        "ViT of DINO (S/8, S/16, B/8, B/16) and DINOv2 (S/B/L 14, registers)",
    ),
    Component(
        "extractor",
        "vit_clip",
        "oml_models.clip:ViTCLIPExtractor",
        "image tower of CLIP (open_clip): B/16, B/32, L/14, L/14@336",
    ),
    Component(
        "extractor",
        "vit_unicom",
        "oml_models.unicom:ViTUnicomExtractor",
        "Unicom ViT (deepglint): B/32, B/16, L/14, L/14@336",
    ),
    Component(
        "extractor",
        "extractor_with_mlp",
        "oml_models.mlp:ExtractorWithMLP",
        "an extractor with an MLP projection head",
    ),
    Component(
        "pairwise_model",
        "linear_siamese",
        "oml_models.siamese:LinearTrivialDistanceSiamese",
        "L2 distance of linearly projected embeddings",
    ),
    Component(
        "pairwise_model",
        "trivial_distance_siamese",
        "oml_models.siamese:TrivialDistanceSiamese",
        "L2 distance of an extractor's embeddings",
    ),
    Component(
        "pairwise_model",
        "concat_siamese",
        "oml_models.siamese:ConcatSiamese",
        "both images stacked through an extractor and an MLP head (STIR-style re-ranker)",
    ),
    Component(
        "transforms", "norm_torch", "oml_models.transforms:get_normalisation_torch", "ToTensor + Normalize"
    ),
    Component(
        "transforms",
        "norm_resize_torch",
        "oml_models.transforms:get_normalisation_resize_torch",
        "Resize to a square + ToTensor + Normalize (torchvision)",
    ),
    Component(
        "transforms",
        "augs_torch",
        "oml_models.transforms:get_augs_torch",
        "OML's torchvision training augmentations",
    ),
    Component(
        "transforms",
        "augs_hypvit_torch",
        "oml_models.transforms:get_augs_hypvit",
        "Hyp-ViT training augmentations",
    ),
    Component(
        "transforms",
        "norm_resize_hypvit_torch",
        "oml_models.transforms:get_normalisation_resize_hypvit",
        "shorter side resize + centre crop + Normalize (ImageNet evaluation)",
    ),
    Component(
        "transforms",
        "norm_resize_pad",
        "oml_models.transforms:get_normalisation_resize_pad",
        "longer side resize + white padding to a square + Normalize (norm_resize_albu on torchvision)",
    ),
    Component(
        "transforms",
        "norm_resize_pad_clip",
        "oml_models.transforms:get_normalisation_resize_pad_clip",
        "norm_resize_pad with CLIP's mean and std",
    ),
    Component(
        "transforms",
        "unicom_transforms",
        "oml_models.transforms:get_unicom_transforms",
        "the Unicom checkpoints' preprocessing: shorter side resize + centre crop + CLIP's Normalize",
    ),
    Component(
        "transforms",
        "norm_albu",
        "oml_models.transforms_albu:get_normalisation_albu",
        "albumentations Normalize + ToTensorV2 (OML's; needs oml-models[albu])",
    ),
    Component(
        "transforms",
        "norm_resize_albu",
        "oml_models.transforms_albu:get_normalisation_resize_albu",
        "longer side resize + white padding to a square + Normalize (albumentations, OML's; needs oml-models[albu])",
    ),
    Component(
        "transforms",
        "norm_resize_albu_clip",
        "oml_models.transforms_albu:get_normalisation_resize_albu_clip",
        "norm_resize_albu with CLIP's mean and std (needs oml-models[albu])",
    ),
    *_CHECKPOINTS,
)

#: The other public names of ``oml_models`` (building blocks and helpers, not components): ``{name: module}``.
EXTRA_EXPORTS: MappingProxyType[str, str] = MappingProxyType(
    {
        "CheckpointError": "oml_core.utils.checkpoints",
        "GEM": "oml_models.pooling",
        "AlbuCompose": "oml_models.transforms_albu",
        "get_transforms_for_pretrained": "oml_models.transforms",
        "get_im_reader_for_transforms": "oml_models.transforms",
        "TTransforms": "oml_models.transforms",
        "vis_vit": "oml_models.vit",
    }
)

#: The declarations the registry reads (no hook function): the table, and the package of the default configs
#: (``<kind>/<name>.yaml``).
OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://oml_models.configs",)
