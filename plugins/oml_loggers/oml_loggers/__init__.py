"""oml plugin package ``oml_loggers``: pipeline loggers.

``from oml_loggers import TensorBoardPipelineLogger``; the plugin (:mod:`oml_loggers.plugin`) registers it
as the logger ``tensorboard``. Public names are imported lazily (PEP 562), so that loading the plugin's
entry point does not import Lightning or TensorBoard.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oml_loggers.config import cfg_to_yaml
    from oml_loggers.tensorboard import TensorBoardPipelineLogger

_LAZY = {"TensorBoardPipelineLogger": "oml_loggers.tensorboard", "cfg_to_yaml": "oml_loggers.config"}

__all__ = ["TensorBoardPipelineLogger", "cfg_to_yaml"]


def __getattr__(name: str) -> Any:
    """Import the public name ``name`` from its module on first access."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'oml_loggers' has no attribute {name!r}")


def __dir__() -> list[str]:
    """Module attributes, the lazy public names included."""
    return sorted({*globals(), *__all__})
