"""oml plugin package ``oml_models``: extractors, pairwise models, image transforms and the pretrained zoo.

``from oml_models import ViTExtractor``; the plugin (:mod:`oml_models.plugin`) registers everything under
OML's names. The public names are imported lazily (PEP 562), so that loading the plugin's entry point
(``oml_models.plugin``, which imports this package first) imports neither torchvision, timm nor open_clip. The
exports and ``__all__`` come from the plugin's table (:data:`oml_models.plugin.COMPONENTS` and
:data:`~oml_models.plugin.EXTRA_EXPORTS`); the imports below, explicit re-exports, are for static type checkers
and IDEs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import table_exports
from oml_models.plugin import COMPONENTS, EXTRA_EXPORTS

if TYPE_CHECKING:
    from oml_core.utils.checkpoints import CheckpointError as CheckpointError
    from oml_models.clip import ViTCLIPExtractor as ViTCLIPExtractor
    from oml_models.mlp import ExtractorWithMLP as ExtractorWithMLP
    from oml_models.pooling import GEM as GEM
    from oml_models.resnet import ResnetExtractor as ResnetExtractor
    from oml_models.siamese import ConcatSiamese as ConcatSiamese
    from oml_models.siamese import LinearTrivialDistanceSiamese as LinearTrivialDistanceSiamese
    from oml_models.siamese import TrivialDistanceSiamese as TrivialDistanceSiamese
    from oml_models.transforms import TTransforms as TTransforms
    from oml_models.transforms import get_augs_hypvit as get_augs_hypvit
    from oml_models.transforms import get_augs_torch as get_augs_torch
    from oml_models.transforms import get_im_reader_for_transforms as get_im_reader_for_transforms
    from oml_models.transforms import get_normalisation_resize_hypvit as get_normalisation_resize_hypvit
    from oml_models.transforms import get_normalisation_resize_pad as get_normalisation_resize_pad
    from oml_models.transforms import get_normalisation_resize_pad_clip as get_normalisation_resize_pad_clip
    from oml_models.transforms import get_normalisation_resize_torch as get_normalisation_resize_torch
    from oml_models.transforms import get_normalisation_torch as get_normalisation_torch
    from oml_models.transforms import get_transforms_for_pretrained as get_transforms_for_pretrained
    from oml_models.transforms import get_unicom_transforms as get_unicom_transforms
    from oml_models.transforms_albu import AlbuCompose as AlbuCompose
    from oml_models.transforms_albu import get_normalisation_albu as get_normalisation_albu
    from oml_models.transforms_albu import get_normalisation_resize_albu as get_normalisation_resize_albu
    from oml_models.transforms_albu import (
        get_normalisation_resize_albu_clip as get_normalisation_resize_albu_clip,
    )
    from oml_models.unicom import ViTUnicomExtractor as ViTUnicomExtractor
    from oml_models.vit import ViTExtractor as ViTExtractor
    from oml_models.vit import vis_vit as vis_vit

__getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)
