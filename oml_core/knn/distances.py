"""The distances of the kNN search: each one's factors, statistics and overflow bound, and their dtype.

Precision: the distances are computed in float32 for narrower embeddings (float16, bfloat16: the squared
distances of float16 embeddings of magnitude ~300 already overflow float16), so no float32 copy of the
embeddings is made; float32 and float64 embeddings keep their dtype (:func:`compute_dtype`). Distances that
still overflow (float32 embeddings of magnitude ~1e19) are an error, :class:`NonFiniteDistanceError`, naming the
query and the gallery item (:mod:`oml_core.knn.blocks` checks the blocks whenever the rows' statistics, through
:attr:`DistanceKind.bounded`, do not rule an overflow out).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NamedTuple

import torch
from torch import Tensor

from oml_core.utils.misc_torch import (
    cosine_dist_mm,
    cosine_factors,
    inverse_norms,
    l2_dist_mm,
    l2_factors,
    l2_from_squared_,
    squared_norms,
)

TDistance = Literal["l2", "cosine"]


class NonFiniteDistanceError(ValueError):
    """A distance between a query and a gallery item is not finite in the dtype it is computed in (the
    embeddings are too large for it); the message names the query and the gallery item, by their positions and
    their rows of the embeddings."""


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype that the distances of embeddings of ``dtype`` are computed in: float32 for narrower floats
    (float16, bfloat16) and for integers, else ``dtype`` itself (float32, float64)."""
    return torch.promote_types(dtype, torch.float32)


def dtype_name(dtype: torch.dtype) -> str:
    """``"float32"`` for ``torch.float32``."""
    return str(dtype).removeprefix("torch.")


def _inverse_norms(x: Tensor) -> Tensor:
    """:func:`~oml_core.utils.misc_torch.inverse_norms`, also right for the rows whose norm overflows ``x``'s
    dtype although their entries are finite (``1e19`` in float32): those are divided by their largest entry
    first (their inverse norm is then tiny but not ``0``, which would make all their distances ``1``)."""
    inv = inverse_norms(x)
    overflown = (inv == 0).nonzero().squeeze(1)
    if len(overflown):
        rows = x.index_select(0, overflown)
        scale = rows.abs().amax(dim=1)
        inv[overflown] = inverse_norms(rows / scale[:, None]) / scale
    return inv


class DistanceKind(NamedTuple):
    """How a distance is computed block by block: the per-row statistics and the factors whose matrix product
    gives the "raw" values, turned into distances in place."""

    stats: Callable[[Tensor], Tensor]  # [n, d] -> [n], a per-row statistic computed once
    factors: Callable[..., Tensor]  # (x, query, stats, out) -> factors whose products are "raw" distances
    to_distance: Callable[[Tensor], Tensor]  # raw values (e.g. squared l2) -> distances, in place
    function: Callable[[Tensor, Tensor], Tensor]  # the pairwise distance itself
    # (stats, dtype) -> [n] rows whose raw values with any other such row are certainly finite (the others'
    # blocks are checked); None: the raw values are always finite
    bounded: Callable[[Tensor, torch.dtype], Tensor] | None


def _l2_bounded(squared: Tensor, dtype: torch.dtype) -> Tensor:
    # every partial sum of [-2a, |a|^2, 1] . [b, 1, |b|^2] is at most (|a| + |b|)^2 <= 4 max(|a|^2, |b|^2)
    # in magnitude, which stays finite (with room for rounding) when both squared norms are below max / 8
    return squared < torch.finfo(dtype).max / 8


DISTANCES: dict[str, DistanceKind] = {
    "l2": DistanceKind(squared_norms, l2_factors, l2_from_squared_, l2_dist_mm, _l2_bounded),
    # the factors of a row are its entries times its inverse norm, of magnitude at most 1: never an overflow
    "cosine": DistanceKind(
        _inverse_norms, cosine_factors, lambda v: v.clamp_(0.0, 2.0), cosine_dist_mm, None
    ),
}


def distance_kind(distance: str) -> DistanceKind:
    """The :class:`DistanceKind` called ``distance``.

    Raises:
        ValueError: an unknown name.
    """
    try:
        return DISTANCES[distance]
    except KeyError:
        raise ValueError(f"Unknown distance {distance!r}; expected one of {sorted(DISTANCES)}") from None


def get_distance_fn(distance: str) -> Callable[[Tensor, Tensor], Tensor]:
    """The pairwise distance ``f(x1 [n, d], x2 [m, d]) -> [n, m]`` called ``distance``.

    ``"l2"``: Euclidean distance (:func:`~oml_core.utils.misc_torch.l2_dist_mm`);
    ``"cosine"``: ``1 - cos(x1_i, x2_j)``, in ``[0, 2]`` (:func:`~oml_core.utils.misc_torch.cosine_dist_mm`).

    Raises:
        ValueError: an unknown name.
    """
    return distance_kind(distance).function


__all__ = [
    "DISTANCES",
    "DistanceKind",
    "NonFiniteDistanceError",
    "TDistance",
    "compute_dtype",
    "distance_kind",
    "dtype_name",
    "get_distance_fn",
]
