"""oml plugin package ``oml_models``: extractors, pairwise models, image transforms and the pretrained zoo.

``from oml_models import ViTExtractor``; the plugin (:mod:`oml_models.plugin`) registers everything under
OML's names. The public names are imported lazily (PEP 562), so that loading the plugin's entry point
(``oml_models.plugin``, which imports this package first) imports neither torchvision, timm nor open_clip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from oml_core.utils.checkpoints import CheckpointError
    from oml_models.clip import ViTCLIPExtractor
    from oml_models.mlp import ExtractorWithMLP
    from oml_models.pooling import GEM
    from oml_models.resnet import ResnetExtractor
    from oml_models.siamese import ConcatSiamese, LinearTrivialDistanceSiamese, TrivialDistanceSiamese
    from oml_models.transforms import (
        get_augs_hypvit,
        get_augs_torch,
        get_normalisation_resize_hypvit,
        get_normalisation_resize_pad,
        get_normalisation_resize_pad_clip,
        get_normalisation_resize_torch,
        get_normalisation_torch,
        get_transforms_for_pretrained,
    )
    from oml_models.unicom import ViTUnicomExtractor
    from oml_models.vit import ViTExtractor

_LAZY = {
    "CheckpointError": "oml_core.utils.checkpoints",
    "GEM": "oml_models.pooling",
    "ResnetExtractor": "oml_models.resnet",
    "ViTExtractor": "oml_models.vit",
    "ViTCLIPExtractor": "oml_models.clip",
    "ViTUnicomExtractor": "oml_models.unicom",
    "ExtractorWithMLP": "oml_models.mlp",
    "LinearTrivialDistanceSiamese": "oml_models.siamese",
    "TrivialDistanceSiamese": "oml_models.siamese",
    "ConcatSiamese": "oml_models.siamese",
    "get_normalisation_torch": "oml_models.transforms",
    "get_normalisation_resize_torch": "oml_models.transforms",
    "get_augs_torch": "oml_models.transforms",
    "get_augs_hypvit": "oml_models.transforms",
    "get_normalisation_resize_hypvit": "oml_models.transforms",
    "get_normalisation_resize_pad": "oml_models.transforms",
    "get_normalisation_resize_pad_clip": "oml_models.transforms",
    "get_transforms_for_pretrained": "oml_models.transforms",
}

__all__ = [
    "GEM",
    "CheckpointError",
    "ConcatSiamese",
    "ExtractorWithMLP",
    "LinearTrivialDistanceSiamese",
    "ResnetExtractor",
    "TrivialDistanceSiamese",
    "ViTCLIPExtractor",
    "ViTExtractor",
    "ViTUnicomExtractor",
    "get_augs_hypvit",
    "get_augs_torch",
    "get_normalisation_resize_hypvit",
    "get_normalisation_resize_pad",
    "get_normalisation_resize_pad_clip",
    "get_normalisation_resize_torch",
    "get_normalisation_torch",
    "get_transforms_for_pretrained",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
