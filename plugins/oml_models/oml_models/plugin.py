"""Hook implementations of the ``oml_models`` plugin (entry point ``oml_models = "oml_models.plugin"``).

Factories are lazy ``"module:attr"`` strings: torchvision is imported only when a model is built.
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback


@hookimpl
def oml_register_extractors(register: RegisterCallback) -> None:
    """Register the extractor ``resnet`` (:class:`oml_models.resnet.ResnetExtractor`)."""
    register(
        "resnet",
        "oml_models.resnet:ResnetExtractor",
        description="torchvision ResNet-18/34/50/101/152 with optional GeM pooling, fc removal and L2 norm",
    )
