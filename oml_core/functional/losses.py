"""OML's ``oml.functional.losses``: the reduction of per-sample losses and the surrogate of Precision@k, pure
tensor functions shared with the losses of oml-losses (``SurrogatePrecision`` and the others)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from oml_core.utils.misc_torch import iter_chunks

#: The reductions of :func:`get_reduced`.
REDUCTIONS = ("mean", "sum", "none")


def check_reduction(reduction: str) -> str:
    """Return ``reduction`` if it is one of :data:`REDUCTIONS`, else raise a ``ValueError`` naming it."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {', '.join(map(repr, REDUCTIONS))}, got {reduction!r}")
    return reduction


def get_reduced(tensor: Tensor, reduction: str) -> Tensor:
    """Reduce per-sample values ``tensor`` ``[n]`` (OML's parameter name).

    ``mean`` -> ``tensor.mean()``, ``sum`` -> ``tensor.sum()``, ``none`` -> ``tensor`` unchanged.
    The mean of an empty tensor is ``0`` (``tensor.sum()``, still attached to the graph) instead of
    ``nan``, so that a batch without a single triplet does not poison training.

    Raises:
        ValueError: ``reduction`` is not one of :data:`REDUCTIONS`.
    """
    check_reduction(reduction)
    if reduction == "none":
        return tensor
    if reduction == "sum" or tensor.numel() == 0:
        return tensor.sum()
    return tensor.mean()


#: Values of the ``[rows, B, B]`` pairwise differences of :func:`soft_rank` held at once.
RANK_CHUNK_VALUES = 2**22


def soft_rank(dist: Tensor, temperature: float) -> Tensor:
    """Soft position of every column among its row's columns, by increasing distance::

        rank[i, j] = sum_l sigmoid((dist[i, j] - dist[i, l]) / temperature)

    which tends to ``#{l: dist[i, l] < dist[i, j]} + 1/2`` (the ``l = j`` term is ``sigmoid(0) = 1/2``) as the
    temperature goes to 0. The ``[rows, B, B]`` sigmoids are computed (and recomputed for the gradient) in
    chunks of rows, so that memory stays ``O(B^2)`` plus a chunk, not ``O(B^3)``.

    Args:
        dist: ``[n, B]`` distances.
        temperature: The sigmoid's temperature (> 0).

    Returns:
        ``[n, B]`` soft ranks, differentiable w.r.t. ``dist``.
    """
    return _SoftRank.apply(dist, temperature)


def _rank_chunks(dist: Tensor) -> list[slice]:
    return list(iter_chunks(len(dist), max(1, RANK_CHUNK_VALUES // max(1, dist.shape[1] ** 2))))


def _sigmoids(dist: Tensor, temperature: float) -> Tensor:
    """``sigmoid((dist[i, j] - dist[i, l]) / temperature)``: ``[n, B, B]`` indexed ``[i, j, l]``."""
    return torch.sigmoid_((dist[:, :, None] - dist[:, None, :]).div_(temperature))


class _SoftRank(torch.autograd.Function):
    # ``ctx`` holds the temperature besides the saved tensors: ``Any``, as torch's stubs know neither
    @staticmethod
    def forward(ctx: Any, dist: Tensor, temperature: float) -> Tensor:
        rank = torch.empty_like(dist)
        for chunk in _rank_chunks(dist):
            torch.sum(_sigmoids(dist[chunk], temperature), dim=2, out=rank[chunk])
        ctx.save_for_backward(dist)
        ctx.temperature = temperature
        return rank

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        # d rank[i, j] / d dist[i, m] = 1[j == m] sum_l w[i, j, l] - w[i, j, m],  w = sigmoid' / temperature
        (dist,) = ctx.saved_tensors
        dist_grad = torch.empty_like(dist)
        for chunk in _rank_chunks(dist):
            sig = _sigmoids(dist[chunk], ctx.temperature)
            slope = sig.mul_(1 - sig).div_(ctx.temperature)
            row_grad = grad[chunk]
            dist_grad[chunk] = row_grad * slope.sum(dim=2) - torch.bmm(row_grad[:, None, :], slope)[:, 0, :]
        return dist_grad, None


def surrogate_precision(
    distances: Tensor, mask_gt: Tensor, k: int, t1: float, t2: float, reduction: str = "mean"
) -> Tensor:
    """Surrogate of Precision@k of a ``[n, B]`` distance matrix whose rows are the queries, reduced over the
    rows by ``reduction`` (OML's ``oml.functional.losses.surrogate_precision``, signature and default)::

        rank[i, j] = sum_l sigmoid((distances[i, j] - distances[i, l]) / t2)           (see :func:`soft_rank`)
        precision[i] = sum_j sigmoid((k - rank[i, j]) / t1) * mask_gt[i, j] / min(sum_j mask_gt[i, j], k)

    Args:
        distances: ``[n, B]`` distances.
        mask_gt: Boolean ``[n, B]``: which columns are relevant to each row.
        k: The ``k`` of Precision@k.
        t1: Temperature of the sigmoid of the rank (the Heaviside ``1[rank <= k]``).
        t2: Temperature of the sigmoids of the pairwise comparisons (the Heaviside ``1[d_ij > d_il]``).
        reduction: ``mean`` (of the rows' precisions, a scalar), ``sum`` or ``none`` (``[n]``).

    Returns:
        The reduced precisions, each in ``[0, 1]`` for small temperatures.

    Raises:
        ValueError: ``reduction`` is unknown.
    """
    check_reduction(reduction)
    in_top_k = torch.sigmoid((k - soft_rank(distances, t2)) / t1)
    precision = (in_top_k * mask_gt).sum(dim=1) / mask_gt.sum(dim=1).clamp(max=k)
    return get_reduced(precision, reduction)


__all__ = [
    "REDUCTIONS",
    "RANK_CHUNK_VALUES",
    "check_reduction",
    "get_reduced",
    "soft_rank",
    "surrogate_precision",
]
