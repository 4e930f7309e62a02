"""Lazy top-level exports for plugin packages (PEP 562).

A plugin package re-exports its public classes at the top level (``from oml_losses import TripletLoss``)
without importing them when only its ``plugin`` module is loaded::

    __getattr__, __dir__ = lazy_exports(__name__, {"TripletLoss": "oml_losses.triplet"})
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from oml_core.utils.imports import resolve


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package`` importing ``name`` from ``exports[name]`` on first
    access; the value is then cached in the package's namespace, so later lookups cost nothing."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = resolve(f"{exports[name]}:{name}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
