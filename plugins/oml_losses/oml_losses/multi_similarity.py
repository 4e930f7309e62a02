"""The Multi-Similarity loss of Wang et al.: :class:`MultiSimilarityLoss`."""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from oml_losses.batch_pairs import (
    check_number,
    check_positive,
    cosine_similarities,
    log1p_sum_exp,
    masked_mean,
    pair_masks,
)
from oml_losses.miners.checks import check_batch
from oml_losses.reduction import check_reduction, get_reduced


class MultiSimilarityLoss(nn.Module):
    """Multi-Similarity loss from `Multi-Similarity Loss with General Pair Weighting for Deep Metric Learning
    <https://arxiv.org/abs/1904.06627>`_ (Wang et al., CVPR 2019), without its pair mining, as
    pytorch-metric-learning's ``MultiSimilarityLoss`` without a miner.

    With ``S[i, j]`` the cosine similarity of the L2-normalised features, ``P(i)`` the other samples of
    ``i``'s label and ``N(i)`` the samples of the other labels, every sample ``i`` is an anchor::

        loss_i = 1 / alpha * log(1 + sum_{p in P(i)} exp(-alpha * (S[i, p] - base)))
               + 1 / beta  * log(1 + sum_{n in N(i)} exp( beta  * (S[i, n] - base)))

    computed as ``logsumexp`` (no overflow for large ``alpha``, ``beta``). A sum over no pair is ``0``, so an
    anchor without positives (a label with a single sample in the batch) contributes only its negative term,
    and one without negatives only its positive term. The ``[batch_size]`` anchor losses are reduced with
    ``reduction`` (:func:`~oml_losses.reduction.get_reduced`): ``mean`` averages over all the anchors, as PML's
    default ``MeanReducer``. ``last_logs`` (every forward pass): ``pos_sim`` and ``neg_sim``, the mean
    similarities of the positive and of the negative pairs (``nan`` without such pairs).

    Args:
        alpha: Scale of the positive similarities (``> 0``).
        beta: Scale of the negative similarities (``> 0``).
        base: The similarity margin ``lambda`` both kinds of pairs are compared with.
        reduction: ``mean``, ``sum`` or ``none``.

    Raises:
        ValueError: ``alpha`` or ``beta`` is not a positive number, ``base`` is not a finite number, or
            ``reduction`` is unknown.
    """

    criterion_name = "multi_similarity"

    def __init__(
        self, alpha: float = 2.0, beta: float = 50.0, base: float = 0.5, reduction: str = "mean"
    ) -> None:
        super().__init__()
        self.alpha = check_positive(alpha, "alpha")
        self.beta = check_positive(beta, "beta")
        self.base = check_number(base, "base")
        self.reduction = check_reduction(reduction)
        self.last_logs: dict[str, Any] = {}

    def forward(self, features: Tensor, labels: Tensor | list[int]) -> Tensor:
        """Return the loss.

        Args:
            features: Features ``[batch_size, feat]``.
            labels: Integer labels ``[batch_size]``.

        Returns:
            A scalar for ``mean``/``sum``, the anchor losses ``[batch_size]`` for ``none``.

        Raises:
            ValueError: ``features`` is not ``[batch_size, feat]`` or ``labels`` is not ``[batch_size]``.
            TypeError: the labels are not integers.
        """
        labels = check_batch(features, labels)
        sim = cosine_similarities(features)
        pos_mask, neg_mask = pair_masks(labels)
        pos_loss = log1p_sum_exp(-self.alpha * (sim - self.base), pos_mask, dim=1) / self.alpha
        neg_loss = log1p_sum_exp(self.beta * (sim - self.base), neg_mask, dim=1) / self.beta
        self.last_logs = {"pos_sim": masked_mean(sim, pos_mask), "neg_sim": masked_mean(sim, neg_mask)}
        return get_reduced(pos_loss + neg_loss, self.reduction)


__all__ = ["MultiSimilarityLoss"]
