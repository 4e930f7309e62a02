"""Reduction of per-sample loss values: ``mean``, ``sum`` or ``none``."""

from __future__ import annotations

from torch import Tensor

REDUCTIONS = ("mean", "sum", "none")


def check_reduction(reduction: str) -> str:
    """Return ``reduction`` if it is one of :data:`REDUCTIONS`, else raise a ``ValueError`` naming it."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(map(repr, REDUCTIONS))}, got {reduction!r}")
    return reduction


def get_reduced(values: Tensor, reduction: str) -> Tensor:
    """Reduce per-sample ``values`` ``[n]``.

    ``mean`` -> ``values.mean()``, ``sum`` -> ``values.sum()``, ``none`` -> ``values`` unchanged.
    The mean of an empty tensor is ``0`` (``values.sum()``, still attached to the graph) instead of
    ``nan``, so that a batch without a single triplet does not poison training.

    Raises:
        ValueError: ``reduction`` is not one of :data:`REDUCTIONS`.
    """
    check_reduction(reduction)
    if reduction == "none":
        return values
    if reduction == "sum" or values.numel() == 0:
        return values.sum()
    return values.mean()
