"""The plugin module named by the entry point: the plugin's table of components, and one ``@hookimpl`` function
per kind that registers that kind from the table.

Factories are lazy ``"module:attr"`` strings, so ``oml plugins`` lists the components without importing torch;
the classes are imported only when a config builds them.
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback, RegisterConfigDirCallback
from oml_core.utils.lazy import Component, register_components

#: Every component of the plugin: kind, name, factory, description (and optionally aliases).
COMPONENTS: tuple[Component, ...] = (
    Component(
        "extractor",
        "tiny_conv",
        "oml_plugin_example.extractor:TinyConvExtractor",
        "example plugin: 2 conv layers + global average pooling + linear",
    ),
    Component(
        "loss",
        "contrastive_example",
        "oml_plugin_example.loss:ContrastiveLoss",
        "example plugin: classic contrastive loss over all pairs of the batch",
    ),
)


@hookimpl
def oml_register_extractors(register: RegisterCallback) -> None:
    """Register the extractor ``tiny_conv``."""
    register_components(register, COMPONENTS, "extractor")


@hookimpl
def oml_register_losses(register: RegisterCallback) -> None:
    """Register the loss ``contrastive_example``."""
    register_components(register, COMPONENTS, "loss")


@hookimpl
def oml_register_config_dirs(register: RegisterConfigDirCallback) -> None:
    """Put the plugin's default configs (``configs/<kind>/<name>.yaml``) on hydra's search path, so that
    ``oml train extractor@extractor=tiny_conv`` works."""
    register("pkg://oml_plugin_example.configs")
