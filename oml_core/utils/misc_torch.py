"""Torch helpers shared by the core and the plugins (distances, chunking)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor


def elementwise_dist(x1: Tensor, x2: Tensor, p: int = 2) -> Tensor:
    """Distances between the rows of equally shaped ``x1`` and ``x2``: ``||x1[i] - x2[i]||_p`` -> ``[n]``."""
    if x1.shape != x2.shape or x1.ndim != 2:
        raise ValueError(
            f"expected two [n, d] tensors of one shape, got {tuple(x1.shape)} and {tuple(x2.shape)}"
        )
    return torch.linalg.vector_norm(x1 - x2, ord=p, dim=1)


def pairwise_dist(x1: Tensor, x2: Tensor, p: int = 2) -> Tensor:
    """All distances between the rows of ``x1`` ``[n, d]`` and ``x2`` ``[m, d]``: ``[n, m]``.

    For ``p == 2`` the result is computed exactly with ``torch.cdist``'s direct mode (no
    ``|a|^2 + |b|^2 - 2ab`` cancellation), so that equal vectors are at distance exactly 0.
    """
    if x1.ndim != 2 or x2.ndim != 2 or x1.shape[1] != x2.shape[1]:
        raise ValueError(f"expected [n, d] and [m, d] tensors, got {tuple(x1.shape)} and {tuple(x2.shape)}")
    return torch.cdist(x1, x2, p=p, compute_mode="donot_use_mm_for_euclid_dist")


def iter_chunks(n: int, chunk_size: int) -> Iterator[slice]:
    """Slices ``[0, c), [c, 2c), ...`` covering ``range(n)``; used to keep memory bounded by a chunk."""
    if chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    for start in range(0, n, chunk_size):
        yield slice(start, min(start + chunk_size, n))
