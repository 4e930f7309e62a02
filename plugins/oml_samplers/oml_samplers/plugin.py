"""The plugin module of the ``oml_samplers`` plugin.

:data:`COMPONENTS` is the plugin's one table: declared as ``OML_COMPONENTS``, the registry registers it, and the
package ``oml_samplers`` takes its lazy exports and ``__all__`` from it. Factories are lazy ``"module:attr"``
strings: registering imports no torch module. Pipelines call a sampler's factory with the runtime argument
``labels=`` (and ``label2category=`` for the category samplers); the config gives the rest. The default config of
every sampler is ``configs/sampler/<name>.yaml``, found through ``OML_CONFIG_DIRS``."""

from __future__ import annotations

from types import MappingProxyType

from oml_core.utils.lazy import Component

#: Every component of the plugin, each exported by ``oml_samplers`` under its class name.
COMPONENTS: tuple[Component, ...] = (
    Component(
        "sampler",
        "balance",
        "oml_samplers.balance:BalanceSampler",
        "n_labels labels x n_instances instances per batch",
    ),
    Component(
        "sampler",
        "category_balance",
        "oml_samplers.category_balance:CategoryBalanceSampler",
        "n_categories categories x n_labels labels x n_instances instances per batch, drawn with repetition",
    ),
    Component(
        "sampler",
        "distinct_category_balance",
        "oml_samplers.distinct_category_balance:DistinctCategoryBalanceSampler",
        "n_categories x n_labels x n_instances per batch, labels not reused until they run out",
    ),
)

#: The other public names of ``oml_samplers``: none.
EXTRA_EXPORTS: MappingProxyType[str, str] = MappingProxyType({})

#: The declarations the registry reads (no hook function): the table, and the package of the default configs
#: (``<kind>/<name>.yaml``).
OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://oml_samplers.configs",)
