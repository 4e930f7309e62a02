"""A differentiable matrix of the Euclidean distances within a batch, exact near zero.

The losses that need many distances of one batch (all its triplets, the soft ranks of surrogate
precision) take them from this one ``[B, B]`` matrix instead of gathering per-triplet copies of the features.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from oml_core.utils.misc_torch import iter_chunks

#: A pair is recomputed exactly when ``|a - b|^2 <= CLOSE_RATIO * (|a|^2 + |b|^2)`` (norms of the centred rows).
CLOSE_RATIO = 0.1
#: Feature values held at once while recomputing the close pairs (bounds their temporary memory).
PAIRS_CHUNK_VALUES = 2**22


def pairwise_l2(features: Tensor) -> Tensor:
    """``D[i, j] = ||x_i - x_j||_2`` for the rows of ``features`` ``[B, d]``: a ``[B, B]`` differentiable matrix.

    The rows are centred first (``x - mean(x)``, which leaves the distances unchanged), then one matrix
    multiply gives ``|a - b|^2 = |a|^2 + |b|^2 - 2 a.b``. That form loses precision by cancellation when
    ``|a - b|`` is small next to ``|a|`` and ``|b|``, so the close pairs (``|a - b|^2 <= 0.1 (|a|^2 + |b|^2)``,
    which includes duplicated rows) are recomputed directly as ``torch.linalg.vector_norm(a - b)``; the
    diagonal is exactly ``0``. The gradient is the one of ``vector_norm``::

        dD[i, j] / dx_i = (x_i - x_j) / D[i, j]        (0 where D[i, j] == 0, as vector_norm gives)

    so that ``x.grad = rowsum(S) * x - S @ x`` with ``S = G + G^T``, ``G = grad / D``: one more matrix multiply
    for the far pairs, and the direct differences for the close ones. Finite for duplicated rows.

    Args:
        features: ``[B, d]`` rows.

    Returns:
        ``[B, B]`` distances.

    Raises:
        ValueError: ``features`` is not two-dimensional.
    """
    if features.ndim != 2:
        raise ValueError(f"features must be [batch_size, dim], got the shape {tuple(features.shape)}")
    return _PairwiseL2.apply(features)


def _close_pair_diffs(x: Tensor, ids_i: Tensor, ids_j: Tensor) -> Iterator[tuple[slice, Tensor]]:
    """``x[i] - x[j]`` of the pairs, in chunks of at most :data:`PAIRS_CHUNK_VALUES` values."""
    rows = max(1, PAIRS_CHUNK_VALUES // max(1, x.shape[1]))
    for chunk in iter_chunks(len(ids_i), rows):
        yield chunk, x[ids_i[chunk]] - x[ids_j[chunk]]


def _close_pairs(sq: Tensor, norms: Tensor) -> tuple[Tensor, Tensor]:
    """Unordered pairs ``i < j`` with ``sq[i, j] <= CLOSE_RATIO * (norms[i] + norms[j])`` in either order."""
    scaled = norms * CLOSE_RATIO
    close = sq <= scaled[:, None] + scaled[None, :]
    ids_i, ids_j = torch.nonzero(close, as_tuple=True)
    upper = ids_i < ids_j
    lower_only = (ids_i > ids_j) & ~close[ids_j, ids_i]
    keep = upper | lower_only
    return torch.minimum(ids_i, ids_j)[keep], torch.maximum(ids_i, ids_j)[keep]


class _PairwiseL2(torch.autograd.Function):
    @staticmethod
    def forward(ctx: FunctionCtx, x: Tensor) -> Tensor:
        centred = x - x.mean(dim=0)
        norms = (centred * centred).sum(dim=1)
        sq = torch.addmm(norms[None, :], centred, centred.T, alpha=-2.0).add_(norms[:, None])
        ids_i, ids_j = _close_pairs(sq, norms)
        dist = sq.clamp_(min=0.0).sqrt_().fill_diagonal_(0.0)
        close_dist = torch.cat(
            [torch.linalg.vector_norm(diff, dim=1) for _, diff in _close_pair_diffs(x, ids_i, ids_j)]
            or [x.new_zeros(0)]
        )
        dist[ids_i, ids_j] = close_dist
        dist[ids_j, ids_i] = close_dist
        ctx.save_for_backward(x, centred, dist, ids_i, ids_j, close_dist)
        return dist

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad: Tensor) -> Tensor:
        x, centred, dist, ids_i, ids_j, close_dist = ctx.saved_tensors
        close_grad = grad[ids_i, ids_j] + grad[ids_j, ids_i]
        weights = (grad / dist).fill_diagonal_(0.0)  # far pairs are > 0 apart; the others are set here
        weights[ids_i, ids_j] = 0.0
        weights[ids_j, ids_i] = 0.0
        sym = weights.T.contiguous().add_(weights)  # faster than weights + weights.T
        x_grad = torch.addmm(sym.sum(dim=1, keepdim=True) * centred, sym, centred, alpha=-1.0)
        close_weights = torch.where(close_dist > 0, close_grad / close_dist, 0.0)
        for chunk, diff in _close_pair_diffs(x, ids_i, ids_j):
            contribution = close_weights[chunk, None] * diff
            x_grad.index_add_(0, ids_i[chunk], contribution)
            x_grad.index_add_(0, ids_j[chunk], -contribution)
        return x_grad


__all__ = ["CLOSE_RATIO", "pairwise_l2"]
