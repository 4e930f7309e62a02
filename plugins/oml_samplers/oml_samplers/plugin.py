"""Hook implementations of the ``oml_samplers`` plugin.

:data:`COMPONENTS` is the plugin's one table: the hooks register from it and the package ``oml_samplers`` takes
its lazy exports and ``__all__`` from it. Factories are lazy ``"module:attr"`` strings: registering imports no
torch module. Pipelines call a sampler's factory with the runtime argument ``labels=`` (and
``label2category=`` for the category samplers); the config gives the rest. The default config of every sampler
is ``configs/sampler/<name>.yaml``, found through :func:`oml_register_config_dirs`.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING

from oml_core import hookimpl
from oml_core.utils.lazy import Component, register_components

if TYPE_CHECKING:
    from oml_core.registry.hookspecs import RegisterCallback, RegisterConfigDirCallback

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


@hookimpl
def oml_register_samplers(register: RegisterCallback) -> None:
    """Register ``balance``, ``category_balance`` and ``distinct_category_balance``."""
    register_components(register, COMPONENTS, "sampler")


@hookimpl
def oml_register_config_dirs(register: RegisterConfigDirCallback) -> None:
    """Register the package ``oml_samplers.configs`` (``sampler/<name>.yaml``: the default configs)."""
    register("pkg://oml_samplers.configs")
