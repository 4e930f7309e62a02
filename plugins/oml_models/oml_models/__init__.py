"""oml plugin package ``oml_models``: extractors (ResNet) and their building blocks.

``from oml_models import ResnetExtractor``; the plugin (:mod:`oml_models.plugin`) registers it as the
extractor ``resnet``. The public names are imported lazily (PEP 562), so that loading the plugin's entry
point (``oml_models.plugin``, which imports this package first) does not import torchvision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from oml_core.utils.checkpoints import CheckpointError
    from oml_models.pooling import GEM
    from oml_models.resnet import ResnetExtractor

_LAZY = {
    "CheckpointError": "oml_core.utils.checkpoints",
    "GEM": "oml_models.pooling",
    "ResnetExtractor": "oml_models.resnet",
}

__all__ = ["GEM", "CheckpointError", "ResnetExtractor"]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
