"""SurrogatePrecision: a differentiable approximation of Precision@k (Recall@k Surrogate Loss, Patel et al.)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.autograd.function import FunctionCtx, once_differentiable

from oml_core.utils.misc_torch import iter_chunks, pairwise_l2
from oml_losses.reduction import check_reduction, get_reduced

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
    @staticmethod
    def forward(ctx: FunctionCtx, dist: Tensor, temperature: float) -> Tensor:
        rank = torch.empty_like(dist)
        for chunk in _rank_chunks(dist):
            torch.sum(_sigmoids(dist[chunk], temperature), dim=2, out=rank[chunk])
        ctx.save_for_backward(dist)
        ctx.temperature = temperature
        return rank

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad: Tensor) -> tuple[Tensor, None]:
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


class SurrogatePrecision(nn.Module):
    """This loss is a differentiable approximation of Precision@k metric.

    The loss is described in `Recall@k Surrogate Loss with Large Batches and Similarity Mixup
    <https://arxiv.org/abs/2108.11179>`_ under a bit different name. Precision@k is written with two step
    (Heaviside) functions, ``1[d_ij > d_il]`` inside the rank and ``1[rank <= k]``; each is approximated with
    a sigmoid of temperature ``temperature2`` and ``temperature1``. Every sample of the batch is a query and
    the whole batch, itself included (at distance 0, with its own label), is its gallery, so ``k + 1``
    neighbours are considered, as in OML::

        D = pairwise L2 distances of the batch,   gt[i, j] = (labels[i] == labels[j])
        rank[i, j] = sum_l sigmoid((D[i, j] - D[i, l]) / temperature2)
        precision[i] = sum_j sigmoid((k + 1 - rank[i, j]) / temperature1) * gt[i, j] / min(sum_j gt[i, j], k + 1)
        loss[i] = 1 - precision[i]

    As both temperatures go to 0, ``precision[i]`` tends to ``(1 + h_i) / min(n_i, k + 1)``, with ``h_i`` the
    number of samples of ``i``'s label among its ``k`` nearest other samples and ``n_i`` the size of its
    label group (itself included). The smaller the temperature, the closer the sigmoid to the step function,
    but the sparser the gradients; in the original paper ``t1 = 1.0`` and ``t2 = 0.01`` have been used.

    The per-sample losses are reduced with ``reduction`` (``sum`` is ``sum_i (1 - precision[i])``; OML
    returns ``1 - sum_i precision[i]`` there, which has the same gradient). Memory is ``O(B^2)``: the
    ``[B, B, B]`` comparisons of the ranks are computed in chunks (:func:`soft_rank`).

    Args:
        k: Parameter of Precision@k.
        temperature1: Scaling factor for the 1st sigmoid, see docs above.
        temperature2: Scaling factor for the 2nd sigmoid, see docs above.
        reduction: ``mean``, ``sum`` or ``none``.

    Raises:
        ValueError: ``k`` is not a positive int, a temperature is not positive, or ``reduction`` is unknown.
    """

    criterion_name = "surrogate_precision"

    def __init__(
        self, k: int, temperature1: float = 1.0, temperature2: float = 0.01, reduction: str = "mean"
    ) -> None:
        super().__init__()
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        for name, value in (("temperature1", temperature1), ("temperature2", temperature2)):
            if not value > 0:
                raise ValueError(f"{name} must be positive, got {value!r}")
        self.k = k
        self.temperature1 = temperature1
        self.temperature2 = temperature2
        self.reduction = check_reduction(reduction)

    def forward(self, features: Tensor, labels: Tensor) -> Tensor:
        """Return the loss.

        Args:
            features: Features with the shape of ``[batch_size, feature_size]``.
            labels: Labels with the size of ``batch_size``.

        Returns:
            Loss value: a scalar for ``mean``/``sum``, ``[batch_size]`` for ``none``.

        Raises:
            ValueError: ``features`` is not two-dimensional, or ``labels`` is not ``[batch_size]``.
        """
        labels = torch.as_tensor(labels, device=features.device)
        if features.ndim != 2 or labels.shape != (len(features),):
            raise ValueError(
                "features must be [batch_size, feature_size] and labels [batch_size], got the shapes "
                f"{tuple(features.shape)} and {tuple(labels.shape)}"
            )
        mask_gt = labels[:, None] == labels[None, :]
        precision = surrogate_precision(
            pairwise_l2(features),
            mask_gt,
            k=self.k + 1,
            t1=self.temperature1,
            t2=self.temperature2,
            reduction="none",
        )
        return get_reduced(1 - precision, self.reduction)


__all__ = ["SurrogatePrecision", "soft_rank", "surrogate_precision"]
