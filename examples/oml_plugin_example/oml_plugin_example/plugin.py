"""The plugin module named by the entry point: the plugin's table of components, declared as ``OML_COMPONENTS``
(oml's registry reads it: no hook function is needed), and its default configs, declared as ``OML_CONFIG_DIRS``.

Factories are lazy ``"module:attr"`` strings, so ``oml plugins`` lists the components without importing torch;
the classes are imported only when a config builds them.
"""

from __future__ import annotations

from oml_core.utils.lazy import Component

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

#: The declarations the registry reads (no hook function): the table, and the package of the default configs
#: (``<kind>/<name>.yaml``).
OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://oml_plugin_example.configs",)
