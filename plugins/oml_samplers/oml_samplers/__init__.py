"""oml plugin: batch samplers.

The public classes are importable from the top level (``from oml_samplers import BalanceSampler``); they
are imported lazily on first access, so that loading the plugin module (``oml_samplers.plugin``, which only
registers lazy ``"module:attr"`` strings) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oml_samplers.balance import BalanceSampler

_EXPORTS = {"BalanceSampler": "oml_samplers.balance"}

__all__ = ["BalanceSampler"]


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first access (PEP 562)."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
