"""The plugin module named by the entry point: one ``@hookimpl`` function per kind of component.

Factories are given as lazy ``"module:attr"`` strings, so ``oml plugins`` lists them without importing
torch; the classes are imported only when a config builds them.
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback, RegisterConfigDirCallback


@hookimpl
def oml_register_extractors(register: RegisterCallback) -> None:
    """Register the extractor ``tiny_conv``."""
    register(
        "tiny_conv",
        "oml_plugin_example.extractor:TinyConvExtractor",
        description="example plugin: 2 conv layers + global average pooling + linear",
    )


@hookimpl
def oml_register_losses(register: RegisterCallback) -> None:
    """Register the loss ``contrastive_example``."""
    register(
        "contrastive_example",
        "oml_plugin_example.loss:ContrastiveLoss",
        description="example plugin: classic contrastive loss over all pairs of the batch",
    )


@hookimpl
def oml_register_config_dirs(register: RegisterConfigDirCallback) -> None:
    """Put the plugin's default configs (``configs/<kind>/<name>.yaml``) on hydra's search path, so that
    ``oml train extractor@extractor=tiny_conv`` works."""
    register("pkg://oml_plugin_example.configs")
