"""Hook implementations of the ``oml_loggers`` plugin (entry point ``oml_loggers = "oml_loggers.plugin"``).

Factories are lazy ``"module:attr"`` strings: Lightning, TensorBoard and the optional client libraries
(mlflow, wandb, neptune, clearml) are imported only when a logger is built.
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback, RegisterConfigDirCallback

#: ``(name, factory, description)`` of every logger of the plugin.
LOGGERS = (
    (
        "tensorboard",
        "oml_loggers.tensorboard:TensorBoardPipelineLogger",
        "TensorBoard event files: metrics, figures and the pipeline info (default logger)",
    ),
    (
        "mlflow",
        "oml_loggers.mlflow:MLFlowPipelineLogger",
        "MLflow run (local sqlite by default): metrics, params, figures and pipeline info as artifacts",
    ),
    (
        "wandb",
        "oml_loggers.wandb:WandBPipelineLogger",
        "Weights & Biases run (WANDB_API_KEY, or offline): metrics, config, images, artifacts",
    ),
    (
        "neptune",
        "oml_loggers.neptune:NeptunePipelineLogger",
        "Neptune run (NEPTUNE_API_TOKEN, or mode offline): metrics, hyperparams, images, files",
    ),
    (
        "clearml",
        "oml_loggers.clearml:ClearMLPipelineLogger",
        "ClearML task (offline by default): scalars, hyperparameters, debug images, artifacts",
    ),
)


@hookimpl
def oml_register_loggers(register: RegisterCallback) -> None:
    """Register the loggers ``tensorboard``, ``mlflow``, ``wandb``, ``neptune`` and ``clearml``."""
    for name, factory, description in LOGGERS:
        register(name, factory, description=description)


@hookimpl
def oml_register_config_dirs(register: RegisterConfigDirCallback) -> None:
    """The default configs of the loggers: ``logger/<name>.yaml``."""
    register("pkg://oml_loggers.configs")
