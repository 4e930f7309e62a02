"""SurrogatePrecision: a differentiable approximation of Precision@k (Recall@k Surrogate Loss, Patel et al.)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from oml_core.functional.losses import check_reduction, get_reduced, soft_rank, surrogate_precision
from oml_core.utils.misc_torch import pairwise_l2


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
