"""oml plugin package ``oml_models``: extractors (ResNet) and their building blocks.

``from oml_models import ResnetExtractor``; the plugin (:mod:`oml_models.plugin`) registers it as the
extractor ``resnet``. The public names are imported lazily (PEP 562), so that loading the plugin's entry
point (``oml_models.plugin``, which imports this package first) does not import torchvision.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oml_models.checkpoints import CheckpointError
    from oml_models.pooling import GEM
    from oml_models.resnet import ResnetExtractor

_LAZY = {
    "CheckpointError": "oml_models.checkpoints",
    "GEM": "oml_models.pooling",
    "ResnetExtractor": "oml_models.resnet",
}

__all__ = ["GEM", "CheckpointError", "ResnetExtractor"]


def __getattr__(name: str) -> Any:
    """Import the public name ``name`` from its module on first access."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'oml_models' has no attribute {name!r}")


def __dir__() -> list[str]:
    """Module attributes, the lazy public names included."""
    return sorted({*globals(), *__all__})
