"""oml plugin package ``oml_loggers``: pipeline loggers.

``from oml_loggers import TensorBoardPipelineLogger, MLFlowPipelineLogger, WandBPipelineLogger,
NeptunePipelineLogger, ClearMLPipelineLogger``; the plugin (:mod:`oml_loggers.plugin`) registers them as the
loggers ``tensorboard``, ``mlflow``, ``wandb``, ``neptune`` and ``clearml``. Public names are imported lazily
(PEP 562), so that loading the plugin's entry point imports neither Lightning nor any client library; the
client libraries are the extras ``oml-loggers[mlflow|wandb|neptune|clearml|all]``. The exports and ``__all__``
come from the plugin's table (:data:`oml_loggers.plugin.COMPONENTS` and
:data:`~oml_loggers.plugin.EXTRA_EXPORTS`); the imports below, explicit re-exports, are for static type checkers
and IDEs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import table_exports
from oml_loggers.plugin import COMPONENTS, EXTRA_EXPORTS

if TYPE_CHECKING:
    from oml_loggers.clearml import ClearMLPipelineLogger as ClearMLPipelineLogger
    from oml_loggers.clients import MissingCredentialsError as MissingCredentialsError
    from oml_loggers.config import cfg_to_yaml as cfg_to_yaml
    from oml_loggers.lifetime import end_open_runs as end_open_runs
    from oml_loggers.mlflow import MLFlowPipelineLogger as MLFlowPipelineLogger
    from oml_loggers.neptune import NeptunePipelineLogger as NeptunePipelineLogger
    from oml_loggers.pipeline_info import PipelineInfo as PipelineInfo
    from oml_loggers.tensorboard import TensorBoardPipelineLogger as TensorBoardPipelineLogger
    from oml_loggers.wandb import WandBPipelineLogger as WandBPipelineLogger

__getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)
