"""Hook implementations of the ``oml_samplers`` plugin.

Factories are lazy ``"module:attr"`` strings: registering imports no torch module. Pipelines call a
sampler's factory with the runtime argument ``labels=`` (and ``label2category=`` for the category
samplers); the config gives the rest. The default config of every sampler is
``configs/sampler/<name>.yaml``, found through :func:`oml_register_config_dirs`.
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback, RegisterConfigDirCallback

SAMPLERS = {
    "balance": ("oml_samplers.balance:BalanceSampler", "n_labels labels x n_instances instances per batch"),
    "category_balance": (
        "oml_samplers.category_balance:CategoryBalanceSampler",
        "n_categories categories x n_labels labels x n_instances instances per batch, drawn with repetition",
    ),
    "distinct_category_balance": (
        "oml_samplers.distinct_category_balance:DistinctCategoryBalanceSampler",
        "n_categories x n_labels x n_instances per batch, labels not reused until they run out",
    ),
}


@hookimpl
def oml_register_samplers(register: RegisterCallback) -> None:
    """Register ``balance``, ``category_balance`` and ``distinct_category_balance``."""
    for name, (factory, description) in SAMPLERS.items():
        register(name, factory, description=description)


@hookimpl
def oml_register_config_dirs(register: RegisterConfigDirCallback) -> None:
    """Register the package ``oml_samplers.configs`` (``sampler/<name>.yaml``: the default configs)."""
    register("pkg://oml_samplers.configs")
