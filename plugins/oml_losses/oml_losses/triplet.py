"""The triplet losses: :class:`TripletLoss`, :class:`TripletLossPlain` and :class:`TripletLossWithMiner`.

For a triplet of anchor ``a``, positive ``p`` and negative ``n`` features with the L2 distances
``d_ap = ||a - p||_2`` and ``d_an = ||a - n||_2``, the loss is::

    relu(margin + d_ap - d_an)         (margin is a number: TripletMarginLoss)
    log1p(exp(d_ap - d_an))            (margin is None: SoftTripletLoss)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from oml_core.interfaces.criterions import ITripletLossWithMiner
from oml_core.interfaces.miners import ITripletsMiner
from oml_core.utils.misc_torch import elementwise_dist
from oml_losses.miners.inbatch_all_tri import AllTripletsMiner
from oml_losses.reduction import check_reduction, get_reduced


def _check_margin(margin: float | None) -> float | None:
    if margin is not None and not margin > 0:
        raise ValueError(
            f"margin must be a positive number, or None for the soft triplet loss; got {margin!r}"
        )
    return margin


def get_tri_ids_in_plain(n: int) -> tuple[list[int], list[int], list[int]]:
    """Anchor, positive and negative indices of ``n`` stacked features: ``0,3,6..``, ``1,4,7..``, ``2,5,8..``.

    Raises:
        ValueError: ``n`` is not a multiple of 3.
    """
    if n % 3 != 0:
        raise ValueError(f"the number of stacked triplet features must be a multiple of 3, got {n}")
    return list(range(0, n, 3)), list(range(1, n, 3)), list(range(2, n, 3))


class TripletLoss(nn.Module):
    """Class, which combines classical ``TripletMarginLoss`` and ``SoftTripletLoss``.

    Per triplet, with ``d_ap = ||anchor - positive||_2`` and ``d_an = ||anchor - negative||_2``::

        loss = relu(margin + d_ap - d_an)      if margin is a number
        loss = log1p(exp(d_ap - d_an))         if margin is None (SoftTripletLoss)

    The soft version may help when ``TripletMarginLoss`` converges to its margin value (dimension
    collapse). The soft loss is computed as ``softplus(d_ap - d_an)``, the same function, which does not
    overflow for large distances. The per-triplet values are then reduced with ``reduction``.

    When ``need_logs`` is set, every forward pass fills ``self.last_logs`` with floats:
    ``active_tri`` (fraction of triplets whose loss is > 0), ``pos_dist`` (mean ``d_ap``) and
    ``neg_dist`` (mean ``d_an``); the means of zero triplets are ``nan``.

    Args:
        margin: Margin value, set ``None`` to use ``SoftTripletLoss``.
        reduction: ``mean``, ``sum`` or ``none``.
        need_logs: Set ``True`` if you want to store logs.

    Raises:
        ValueError: ``margin`` is not positive, or ``reduction`` is unknown.
    """

    criterion_name = "triplet"

    def __init__(self, margin: float | None, reduction: str = "mean", need_logs: bool = False) -> None:
        super().__init__()
        self.margin = _check_margin(margin)
        self.reduction = check_reduction(reduction)
        self.need_logs = need_logs
        self.last_logs: dict[str, Any] = {}

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        """Return the reduced triplet loss.

        Args:
            anchor: Anchor features with the shape of ``(batch_size, feat)``.
            positive: Positive features with the shape of ``(batch_size, feat)``.
            negative: Negative features with the shape of ``(batch_size, feat)``.

        Returns:
            Loss value: a scalar for ``mean``/``sum``, ``[batch_size]`` for ``none``.
        """
        if not (anchor.shape == positive.shape == negative.shape) or anchor.ndim != 2:
            raise ValueError(
                "anchor, positive and negative must be [batch_size, feat] tensors of one shape, got "
                f"{tuple(anchor.shape)}, {tuple(positive.shape)} and {tuple(negative.shape)}"
            )
        pos_dist = elementwise_dist(anchor, positive, p=2)
        neg_dist = elementwise_dist(anchor, negative, p=2)
        if self.margin is None:
            loss = nn.functional.softplus(pos_dist - neg_dist)  # log1p(exp(.)) without overflow
        else:
            loss = torch.relu(self.margin + pos_dist - neg_dist)
        if self.need_logs:
            self.last_logs = _triplet_logs(loss, pos_dist, neg_dist)
        return get_reduced(loss, reduction=self.reduction)


def _triplet_logs(loss: Tensor, pos_dist: Tensor, neg_dist: Tensor) -> dict[str, float]:
    with torch.no_grad():
        active = int((loss > 0).sum()) / loss.numel() if loss.numel() else 0.0
        return {"active_tri": active, "pos_dist": float(pos_dist.mean()), "neg_dist": float(neg_dist.mean())}


class TripletLossPlain(nn.Module):
    """The same as :class:`TripletLoss`, but works with anchor, positive and negative features stacked.

    ``features`` rows ``0, 1, 2`` are the 1st triplet (anchor, positive, negative), rows ``3, 4, 5`` the
    2nd one and so on, so ``N`` rows hold ``N / 3`` triplets. ``last_logs`` as in :class:`TripletLoss`.

    Args:
        margin: Margin value, set ``None`` to use ``SoftTripletLoss``.
        reduction: ``mean``, ``sum`` or ``none``.
        need_logs: Set ``True`` if you want to store logs.
    """

    criterion_name = "triplet"

    def __init__(self, margin: float | None, reduction: str = "mean", need_logs: bool = False) -> None:
        super().__init__()
        self.criterion = TripletLoss(margin=margin, reduction=reduction, need_logs=need_logs)
        self.last_logs: dict[str, Any] = {}

    def forward(self, features: Tensor) -> Tensor:
        """Return the triplet loss of ``features`` ``[N, feat]`` holding ``N / 3`` stacked triplets.

        Raises:
            ValueError: ``N`` is not a multiple of 3.
        """
        ids_a, ids_p, ids_n = get_tri_ids_in_plain(len(features))
        loss = self.criterion(features[ids_a], features[ids_p], features[ids_n])
        self.last_logs = self.criterion.last_logs
        return loss


class TripletLossWithMiner(ITripletLossWithMiner):
    """This class combines a miner and :class:`TripletLoss`.

    ``forward(features, labels)`` mines triplets ``(a, p, n)`` from the batch with ``miner.sample`` and
    returns ``TripletLoss(margin, reduction)(features[a], features[p], features[n])``. ``last_logs`` as
    in :class:`TripletLoss` (filled when ``need_logs`` is set).

    Args:
        margin: Margin value, set ``None`` to use ``SoftTripletLoss``.
        miner: A miner that implements the logic of picking triplets to pass them to the triplet loss.
            OML's default is ``AllTripletsMiner()``; ``None`` creates a fresh ``AllTripletsMiner()``.
        reduction: ``mean``, ``sum`` or ``none``.
        need_logs: Set ``True`` if you want to store logs.
    """

    criterion_name = "triplet"

    def __init__(
        self,
        margin: float | None,
        miner: ITripletsMiner | None = None,
        reduction: str = "mean",
        need_logs: bool = False,
    ) -> None:
        super().__init__()
        if miner is None:
            miner = AllTripletsMiner()
        if not isinstance(miner, ITripletsMiner):
            raise TypeError(f"miner must implement ITripletsMiner, got {type(miner).__qualname__}")
        self.miner = miner
        self.tri_loss = TripletLoss(margin=margin, reduction=reduction, need_logs=need_logs)
        self.need_logs = need_logs
        self.last_logs: dict[str, Any] = {}

    def forward(self, features: Tensor, labels: Tensor | list[int]) -> Tensor:
        """Mine triplets and return their loss.

        Args:
            features: Features with the shape ``[batch_size, feat]``.
            labels: Labels with the size of ``batch_size``.

        Returns:
            Loss value.
        """
        if len(features) != len(labels):
            raise ValueError(f"features and labels differ in length: {len(features)} and {len(labels)}")
        anchor, positive, negative = self.miner.sample(features=features, labels=labels)
        loss = self.tri_loss(anchor=anchor, positive=positive, negative=negative)
        if self.need_logs:
            self.last_logs = self.tri_loss.last_logs
        return loss


__all__ = ["TripletLoss", "TripletLossPlain", "TripletLossWithMiner", "get_tri_ids_in_plain"]
