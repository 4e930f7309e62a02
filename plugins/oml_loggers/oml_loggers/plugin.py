"""The plugin module of the ``oml_loggers`` plugin (entry point ``oml_loggers = "oml_loggers.plugin"``).

:data:`COMPONENTS` is the plugin's one table: declared as ``OML_COMPONENTS``, the registry registers it, and the
package ``oml_loggers`` takes its lazy exports and ``__all__`` from it and from :data:`EXTRA_EXPORTS`. Factories are
lazy ``"module:attr"`` strings: Lightning, TensorBoard and the optional client libraries (mlflow, wandb, neptune,
clearml) are imported only when a logger is built."""

from __future__ import annotations

from types import MappingProxyType

from oml_core.utils.lazy import Component

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

#: The declarations the registry reads (no hook function): the table, and the package of the default configs
#: (``<kind>/<name>.yaml``).
OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://oml_loggers.configs",)
