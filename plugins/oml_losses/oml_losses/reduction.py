"""Reduction of per-sample loss values: ``mean``, ``sum`` or ``none`` (the core's
:mod:`oml_core.functional.losses`, OML's ``oml.functional.losses``, under this plugin's module path)."""

from __future__ import annotations

from oml_core.functional.losses import REDUCTIONS, check_reduction, get_reduced

__all__ = ["REDUCTIONS", "check_reduction", "get_reduced"]
