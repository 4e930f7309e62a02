"""oml plugin package ``oml_loggers``: pipeline loggers.

``from oml_loggers import TensorBoardPipelineLogger``; the plugin (:mod:`oml_loggers.plugin`) registers it
as the logger ``tensorboard``. Public names are imported lazily (PEP 562), so that loading the plugin's
entry point does not import Lightning or TensorBoard.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from oml_loggers.config import cfg_to_yaml
    from oml_loggers.tensorboard import TensorBoardPipelineLogger

_LAZY = {"TensorBoardPipelineLogger": "oml_loggers.tensorboard", "cfg_to_yaml": "oml_loggers.config"}

__all__ = ["TensorBoardPipelineLogger", "cfg_to_yaml"]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
