"""Hook implementations of the ``oml_loggers`` plugin (entry point ``oml_loggers = "oml_loggers.plugin"``).

Factories are lazy ``"module:attr"`` strings: Lightning and TensorBoard are imported only when a logger is
built.
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback


@hookimpl
def oml_register_loggers(register: RegisterCallback) -> None:
    """Register the logger ``tensorboard`` (:class:`oml_loggers.tensorboard.TensorBoardPipelineLogger`)."""
    register(
        "tensorboard",
        "oml_loggers.tensorboard:TensorBoardPipelineLogger",
        description="TensorBoard event files: metrics, figures and the pipeline config (default logger)",
    )
