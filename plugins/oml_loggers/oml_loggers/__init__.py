"""oml plugin package ``oml_loggers``: pipeline loggers.

``from oml_loggers import TensorBoardPipelineLogger, MLFlowPipelineLogger, WandBPipelineLogger,
NeptunePipelineLogger, ClearMLPipelineLogger``; the plugin (:mod:`oml_loggers.plugin`) registers them as the
loggers ``tensorboard``, ``mlflow``, ``wandb``, ``neptune`` and ``clearml``. Public names are imported lazily
(PEP 562), so that loading the plugin's entry point imports neither Lightning nor any client library; the
client libraries are the extras ``oml-loggers[mlflow|wandb|neptune|clearml|all]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from oml_loggers.clearml import ClearMLPipelineLogger
    from oml_loggers.clients import MissingCredentialsError
    from oml_loggers.config import cfg_to_yaml
    from oml_loggers.mlflow import MLFlowPipelineLogger
    from oml_loggers.neptune import NeptunePipelineLogger
    from oml_loggers.pipeline_info import PipelineInfo
    from oml_loggers.tensorboard import TensorBoardPipelineLogger
    from oml_loggers.wandb import WandBPipelineLogger

_LAZY = {
    "ClearMLPipelineLogger": "oml_loggers.clearml",
    "MLFlowPipelineLogger": "oml_loggers.mlflow",
    "MissingCredentialsError": "oml_loggers.clients",
    "NeptunePipelineLogger": "oml_loggers.neptune",
    "PipelineInfo": "oml_loggers.pipeline_info",
    "TensorBoardPipelineLogger": "oml_loggers.tensorboard",
    "WandBPipelineLogger": "oml_loggers.wandb",
    "cfg_to_yaml": "oml_loggers.config",
}

__all__ = [
    "ClearMLPipelineLogger",
    "MLFlowPipelineLogger",
    "MissingCredentialsError",
    "NeptunePipelineLogger",
    "PipelineInfo",
    "TensorBoardPipelineLogger",
    "WandBPipelineLogger",
    "cfg_to_yaml",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
