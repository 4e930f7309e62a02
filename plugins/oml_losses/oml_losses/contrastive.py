"""The contrastive (pair margin) loss of Hadsell et al.: :class:`ContrastiveLoss`."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from oml_core.utils.misc_torch import pairwise_l2
from oml_losses.batch_pairs import check_non_negative, check_number, cosine_similarities, masked_mean
from oml_losses.miners.checks import check_batch
from oml_losses.reduction import check_reduction

DISTANCES = ("l2", "cosine")


class ContrastiveLoss(nn.Module):
    """Contrastive loss from `Dimensionality Reduction by Learning an Invariant Mapping
    <https://ieeexplore.ieee.org/document/1640964>`_ (Hadsell, Chopra, LeCun, CVPR 2006), with the margins and
    the reduction of pytorch-metric-learning's ``ContrastiveLoss``.

    Every unordered pair ``i < j`` of the batch is used (no mining), with ``d_ij`` the L2 distance
    ``||x_i - x_j||_2`` (``distance="l2"``) or ``1 - cos(x_i, x_j)`` (``distance="cosine"``)::

        pos_loss_ij = relu(d_ij - pos_margin)      labels[i] == labels[j]   (P: the positive pairs)
        neg_loss_ij = relu(neg_margin - d_ij)      labels[i] != labels[j]   (N: the negative pairs)

    Reductions:

    - ``mean`` (PML's default ``AvgNonZeroReducer``): the mean of the positive-pair losses over the positive
      pairs whose loss is ``> 0``, plus the mean of the negative-pair losses over the negative pairs whose loss
      is ``> 0``; each mean is ``0`` when no pair of its kind has a loss ``> 0``::

          loss = sum_P pos_loss / max(1, #{P: pos_loss > 0}) + sum_N neg_loss / max(1, #{N: neg_loss > 0})

      (counting each pair once or in both orders, as PML does, gives the same means);
    - ``sum``: ``sum_P pos_loss + sum_N neg_loss`` (each unordered pair once);
    - ``none``: the per-pair losses ``[|P| + |N|]``: the positive pairs, then the negative pairs, each in the
      row-major order of ``(i, j)``, ``i < j``.

    Unlike PML's default ``LpDistance``, ``"l2"`` does not normalise the features: L2-normalise them in the
    extractor to get PML's default. ``last_logs`` (every forward pass): ``pos_dist`` and ``neg_dist``, the
    mean distances of the positive and of the negative pairs (``nan`` without such pairs), and ``active_pos``
    and ``active_neg``, the shares of the positive and of the negative pairs with a loss ``> 0`` (``0`` without
    such pairs).

    Args:
        pos_margin: Positive pairs closer than this are not pulled together (``>= 0``).
        neg_margin: Negative pairs farther than this are not pushed apart (``> pos_margin``).
        distance: ``"l2"`` or ``"cosine"`` (``1 - cosine similarity``, in ``[0, 2]``).
        reduction: ``mean``, ``sum`` or ``none``, as above.

    Raises:
        ValueError: a margin is not a finite number, ``pos_margin < 0``, ``neg_margin <= pos_margin``, or
            ``distance`` or ``reduction`` is unknown.
    """

    criterion_name = "contrastive"

    def __init__(
        self, pos_margin: float = 0.0, neg_margin: float = 1.0, distance: str = "l2", reduction: str = "mean"
    ) -> None:
        super().__init__()
        self.pos_margin = check_non_negative(pos_margin, "pos_margin")
        if not check_number(neg_margin, "neg_margin") > pos_margin:
            raise ValueError(f"neg_margin must be greater than pos_margin={pos_margin!r}, got {neg_margin!r}")
        self.neg_margin = neg_margin
        if distance not in DISTANCES:
            raise ValueError(f"distance must be one of {', '.join(map(repr, DISTANCES))}, got {distance!r}")
        self.distance = distance
        self.reduction = check_reduction(reduction)
        self.last_logs: dict[str, Any] = {}

    def distances(self, features: Tensor) -> Tensor:
        """``[B, B]`` distances of the rows of ``features``: L2 or ``1 - cosine``."""
        if self.distance == "l2":
            return pairwise_l2(features)
        return 1 - cosine_similarities(features)

    def forward(self, features: Tensor, labels: Tensor | list[int]) -> Tensor:
        """Return the loss of all the pairs of the batch.

        Args:
            features: Features ``[batch_size, feat]``.
            labels: Integer labels ``[batch_size]``.

        Returns:
            A scalar for ``mean``/``sum`` (``0``, attached to the graph, when there is no pair), the per-pair
            losses for ``none``.

        Raises:
            ValueError: ``features`` is not ``[batch_size, feat]`` or ``labels`` is not ``[batch_size]``.
            TypeError: the labels are not integers.
        """
        labels = check_batch(features, labels)
        dist = self.distances(features)
        upper = torch.ones_like(dist, dtype=torch.bool).triu_(diagonal=1)
        same = labels[:, None] == labels[None, :]
        pos_mask, neg_mask = same & upper, ~same & upper
        pos_loss = torch.where(pos_mask, torch.relu(dist - self.pos_margin), 0.0)
        neg_loss = torch.where(neg_mask, torch.relu(self.neg_margin - dist), 0.0)
        n_pos_active, n_neg_active = (pos_loss > 0).sum(), (neg_loss > 0).sum()
        self.last_logs = {
            "pos_dist": masked_mean(dist, pos_mask),
            "neg_dist": masked_mean(dist, neg_mask),
            "active_pos": int(n_pos_active) / max(1, int(pos_mask.sum())),
            "active_neg": int(n_neg_active) / max(1, int(neg_mask.sum())),
        }
        if self.reduction == "none":
            return torch.cat([pos_loss[pos_mask], neg_loss[neg_mask]])
        if self.reduction == "sum":
            return pos_loss.sum() + neg_loss.sum()
        return pos_loss.sum() / n_pos_active.clamp(min=1) + neg_loss.sum() / n_neg_active.clamp(min=1)


__all__ = ["DISTANCES", "ContrastiveLoss"]
