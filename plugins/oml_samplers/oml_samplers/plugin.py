"""Hook implementations of the ``oml_samplers`` plugin.

Factories are lazy ``"module:attr"`` strings: registering imports no torch module. Pipelines call a
sampler's factory with the runtime argument ``labels=``; the config gives the rest (``n_labels``,
``n_instances``).
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback

SAMPLERS = {
    "balance": ("oml_samplers.balance:BalanceSampler", "n_labels labels x n_instances instances per batch"),
}


@hookimpl
def oml_register_samplers(register: RegisterCallback) -> None:
    """Register ``balance``."""
    for name, (factory, description) in SAMPLERS.items():
        register(name, factory, description=description)
