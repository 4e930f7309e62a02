"""Hook implementations of the ``oml_loggers`` plugin (entry point ``oml_loggers = "oml_loggers.plugin"``).

:data:`COMPONENTS` is the plugin's one table: the hooks register from it and the package ``oml_loggers`` takes
its lazy exports and ``__all__`` from it and from :data:`EXTRA_EXPORTS`. Factories are lazy ``"module:attr"``
strings: Lightning, TensorBoard and the optional client libraries (mlflow, wandb, neptune, clearml) are imported
only when a logger is built.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from oml_core import hookimpl
from oml_core.utils.lazy import Component, register_components

if TYPE_CHECKING:
    from oml_core.registry.hookspecs import RegisterCallback, RegisterConfigDirCallback

#: Every logger of the plugin, each exported by ``oml_loggers`` under its class name.
COMPONENTS: tuple[Component, ...] = (
    Component(
        "logger",
        "tensorboard",
        "oml_loggers.tensorboard:TensorBoardPipelineLogger",
        "TensorBoard event files: metrics, figures and the pipeline info (default logger)",
    ),
    Component(
        "logger",
        "mlflow",
        "oml_loggers.mlflow:MLFlowPipelineLogger",
        "MLflow run (local sqlite by default): metrics, params, figures and pipeline info as artifacts",
    ),
    Component(
        "logger",
        "wandb",
        "oml_loggers.wandb:WandBPipelineLogger",
        "Weights & Biases run (WANDB_API_KEY, or offline): metrics, config, images, artifacts",
    ),
    Component(
        "logger",
        "neptune",
        "oml_loggers.neptune:NeptunePipelineLogger",
        "Neptune run (NEPTUNE_API_TOKEN, or mode offline): metrics, hyperparams, images, files",
    ),
    Component(
        "logger",
        "clearml",
        "oml_loggers.clearml:ClearMLPipelineLogger",
        "ClearML task (offline by default): scalars, hyperparameters, debug images, artifacts",
    ),
)

#: The other public names of ``oml_loggers`` (helpers, not components): ``{name: module}``.
EXTRA_EXPORTS: MappingProxyType[str, str] = MappingProxyType(
    {
        "MissingCredentialsError": "oml_loggers.clients",
        "PipelineInfo": "oml_loggers.pipeline_info",
        "cfg_to_yaml": "oml_loggers.config",
        "end_open_runs": "oml_loggers.lifetime",
    }
)


@hookimpl
def oml_register_loggers(register: RegisterCallback) -> None:
    """Register the loggers ``tensorboard``, ``mlflow``, ``wandb``, ``neptune`` and ``clearml``."""
    register_components(register, COMPONENTS, "logger")


@hookimpl
def oml_register_config_dirs(register: RegisterConfigDirCallback) -> None:
    """The default configs of the loggers: ``logger/<name>.yaml``."""
    register("pkg://oml_loggers.configs")
