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
from torch.autograd.function import FunctionCtx, once_differentiable

from oml_core.interfaces.criterions import ITripletLossWithMiner
from oml_core.interfaces.miners import ITripletsMiner, ITripletsMinerInBatch
from oml_core.utils.misc_torch import elementwise_dist, iter_chunks, pairwise_l2
from oml_losses.miners.inbatch_all_tri import AllTripletsMiner
from oml_losses.miners.triplet_masks import PositiveSlots, positive_slots
from oml_losses.reduction import check_reduction, get_reduced

#: Values of the ``[anchors, positive slots, batch]`` loss tensor of the dense all-triplets path held at once.
DENSE_CHUNK_VALUES = 2**18


def _check_margin(margin: float | None) -> float | None:
    if margin is not None and not margin > 0:
        raise ValueError(
            f"margin must be a positive number, or None for the soft triplet loss; got {margin!r}"
        )
    return margin


def triplet_values(pos_dist: Tensor, neg_dist: Tensor, margin: float | None) -> Tensor:
    """Per-triplet losses of broadcastable ``d_ap`` and ``d_an``.

    ``relu(margin + d_ap - d_an)`` for a number ``margin``; ``softplus(d_ap - d_an) = log1p(exp(d_ap - d_an))``
    (the same function, without overflow for large distances) for ``margin=None``.
    """
    if margin is None:
        return nn.functional.softplus(pos_dist - neg_dist)
    return torch.relu(margin + pos_dist - neg_dist)


#: OML's type of a loss's ``last_logs`` (``oml.losses.triplet.TLogs``): a float per logged name.
TLogs = dict[str, float]


def _triplet_logs(loss: Tensor, pos_dist: Tensor, neg_dist: Tensor) -> TLogs:
    """``active_tri`` (share of the losses > 0; 0 of no triplet), mean ``pos_dist`` and ``neg_dist`` (nan)."""
    with torch.no_grad():
        active = int((loss > 0).sum()) / loss.numel() if loss.numel() else 0.0
        return {"active_tri": active, "pos_dist": float(pos_dist.mean()), "neg_dist": float(neg_dist.mean())}


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
        loss = triplet_values(pos_dist, neg_dist, self.margin)
        if self.need_logs:
            self.last_logs = _triplet_logs(loss, pos_dist, neg_dist)
        return get_reduced(loss, reduction=self.reduction)


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


class _AllTripletsSum(torch.autograd.Function):
    """Sum of the losses of the triplets ``(a, pos_ids[a, s], n)`` of a distance matrix, and their number
    of active ones (loss > 0).

    ``loss[a, s, n] = triplet_values(dist[a, pos_ids[a, s]], neg[a, n])`` in chunks of anchors, where
    ``neg`` is ``dist`` with ``+inf`` at the anchor's own label (``pos_ids[a]`` is padded with ``a``), so that
    the loss and the gradient of a padded slot or of a same-label column are ``0``. The gradient is summed in
    the same pass, with ``slope = d loss / d t`` (``1[loss > 0]`` for the margin loss, ``sigmoid(d_ap - d_an)``
    for the soft one)::

        d sum / d dist[a, pos_ids[a, s]] = sum_n slope[a, s, n],    d sum / d dist[a, n] = -sum_s slope[a, s, n]

    so that only ``[B, S]`` and ``[B, B]`` tensors outlive a chunk.
    """

    @staticmethod
    def forward(
        ctx: FunctionCtx, dist: Tensor, pos_ids: Tensor, valid: Tensor, margin: float | None
    ) -> tuple[Tensor, Tensor]:
        pos = dist.gather(1, pos_ids).masked_fill_(~valid, -torch.inf)
        neg = dist.clone().scatter_(1, pos_ids, torch.inf).fill_diagonal_(torch.inf)
        pos_grad, neg_grad = torch.empty_like(pos), torch.empty_like(neg)
        total, n_active = dist.new_zeros(()), torch.zeros((), dtype=torch.long, device=dist.device)
        rows = max(1, DENSE_CHUNK_VALUES // max(1, pos.shape[1] * neg.shape[1]))
        for chunk in iter_chunks(len(pos), rows):
            pos_chunk, neg_chunk = pos[chunk, :, None], neg[chunk, None, :]
            loss = triplet_values(pos_chunk, neg_chunk, margin)
            total += loss.sum()
            if margin is None:
                n_active += torch.count_nonzero(loss)
                slope = (pos_chunk - neg_chunk).sigmoid_()
            else:
                slope = loss.sign_()
            torch.sum(slope, dim=2, out=pos_grad[chunk])
            torch.sum(slope, dim=1, out=neg_grad[chunk]).neg_()
        if margin is not None:  # the slope is 1 exactly where the loss is > 0
            n_active = pos_grad.sum(dtype=torch.float64).round().long()
        ctx.save_for_backward(pos_ids, pos_grad, neg_grad)
        ctx.mark_non_differentiable(n_active)
        return total, n_active

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad: Tensor, _: Tensor) -> tuple[Tensor, None, None, None]:
        pos_ids, pos_grad, neg_grad = ctx.saved_tensors
        return neg_grad.scatter_add(1, pos_ids, pos_grad).mul_(grad), None, None, None


def all_triplets_loss_sum(
    dist: Tensor, slots: PositiveSlots, margin: float | None
) -> tuple[Tensor, int, dict[str, float]]:
    """Sum of the losses of all the triplets of a batch, from its distance matrix, without index tensors.

    The triplets are ``(a, p, n)`` with ``labels[a] == labels[p]``, ``a != p``, ``labels[n] != labels[a]``
    (those of :class:`AllTripletsMiner`). Each anchor's positives fill ``S`` slots (:func:`positive_slots`),
    so that the losses are ``[B, S, B]`` values, summed chunk by chunk (:class:`_AllTripletsSum`): for a
    balanced batch of ``P`` instances per label that is ``B x (P - 1) x B``, the number of triplets plus the
    ``P - 1`` same-label columns of each row.

    Args:
        dist: ``[B, B]`` distances (:func:`~oml_core.utils.misc_torch.pairwise_l2`).
        slots: ``positive_slots(labels)``.
        margin: As in :class:`TripletLoss`.

    Returns:
        The summed loss (attached to ``dist``'s graph), the number of triplets and the logs of
        :class:`TripletLoss` (``active_tri``, mean ``pos_dist`` and ``neg_dist`` over the triplets).
    """
    pos_ids, valid, counts = slots
    n_pos, n_neg = counts - 1, len(counts) - counts
    n_triplets = slots.n_triplets
    total, n_active = _AllTripletsSum.apply(dist, pos_ids, valid, margin)
    if not n_triplets:
        return total, 0, {"active_tri": 0.0, "pos_dist": float("nan"), "neg_dist": float("nan")}
    with torch.no_grad():
        pos_sums = (dist.gather(1, pos_ids) * valid).sum(dim=1)
        neg_sums = dist.sum(dim=1) - pos_sums
        logs = {
            "active_tri": int(n_active) / n_triplets,
            "pos_dist": float((pos_sums * n_neg).sum() / n_triplets),
            "neg_dist": float((neg_sums * n_pos).sum() / n_triplets),
        }
    return total, n_triplets, logs


class TripletLossWithMiner(ITripletLossWithMiner):
    """This class combines a miner and :class:`TripletLoss`.

    ``forward(features, labels)`` mines triplets ``(a, p, n)`` and returns the value of
    ``TripletLoss(margin, reduction)`` on them::

        loss(a, p, n) = relu(margin + d_ap - d_an)     or   log1p(exp(d_ap - d_an))   (margin=None)

    without gathering per-triplet copies of the features:

    - ``AllTripletsMiner`` (not subsampling, ``reduction`` ``mean``/``sum``): the batch's distance matrix
      (:func:`~oml_core.utils.misc_torch.pairwise_l2`) is computed once and the losses of all its triplets are
      summed from it (:func:`all_triplets_loss_sum`): time ``O(B x max positives x B)``, memory ``O(B^2)``;
    - any other in-batch miner (``ITripletsMinerInBatch``, or ``AllTripletsMiner`` subsampling or with
      ``reduction="none"``): its index triplets ``_sample(features.detach(), labels)`` pick ``d_ap`` and
      ``d_an`` from the distance matrix; when they are no more than the samples (``HardTripletsMiner``: one
      per anchor), gathering their features costs no more than the batch and the matrix is skipped;
    - other miners return features: :class:`TripletLoss` on them. A miner that also returns a fourth
      tensor, the boolean ``is_original_tri`` of ``TripletMinerWithMemory`` (triplets of the batch vs. of its
      memory bank), gets the loss over all the triplets (each counts once) and, with ``need_logs``, the
      logs of each part: ``orig_active_tri``, ``bank_active_tri``, ``pos_dist_orig``, ``neg_dist_orig``,
      ``pos_dist_bank``, ``neg_dist_bank``.

    ``last_logs`` (filled when ``need_logs`` is set): ``active_tri``, ``pos_dist``, ``neg_dist`` over all
    the triplets, as in :class:`TripletLoss`.

    Args:
        margin: Margin value, set ``None`` to use ``SoftTripletLoss``.
        miner: A miner that implements the logic of picking triplets to pass them to the triplet loss.
            OML's default is ``AllTripletsMiner()``; ``None`` creates a fresh ``AllTripletsMiner()``.
        reduction: ``mean``, ``sum`` or ``none``.
        need_logs: Set ``True`` if you want to store logs.

    Raises:
        TypeError: ``miner`` is not an ``ITripletsMiner``.
        ValueError: ``margin`` is not positive, or ``reduction`` is unknown.
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
        self.tri_loss = TripletLoss(margin=margin, reduction="none", need_logs=need_logs)
        self.reduction = check_reduction(reduction)
        self.need_logs = need_logs
        self.last_logs: dict[str, Any] = {}

    @property
    def margin(self) -> float | None:
        """The margin (``None``: soft triplet loss)."""
        return self.tri_loss.margin

    def forward(self, features: Tensor, labels: Tensor | list[int]) -> Tensor:
        """Mine triplets and return their loss.

        Args:
            features: Features with the shape ``[batch_size, feat]``.
            labels: Labels with the size of ``batch_size``.

        Returns:
            Loss value: a scalar for ``mean``/``sum``, one value per mined triplet for ``none``.

        Raises:
            ValueError: ``features`` is not ``[batch_size, feat]`` or ``labels`` differs in length.
        """
        if features.ndim != 2:
            raise ValueError(f"features must be [batch_size, feat], got the shape {tuple(features.shape)}")
        if len(features) != len(labels):
            raise ValueError(f"features and labels differ in length: {len(features)} and {len(labels)}")
        if not isinstance(self.miner, ITripletsMinerInBatch):
            return self._from_features(features, labels)
        labels_t = torch.as_tensor(labels, device=features.device)
        if labels_t.ndim != 1:
            raise ValueError(f"labels must be one-dimensional, got the shape {tuple(labels_t.shape)}")
        if type(self.miner) is AllTripletsMiner and self.reduction != "none":
            slots = positive_slots(labels_t)
            if slots.n_triplets <= self.miner.max_output_triplets:  # the miner would not subsample
                return self._all_triplets_dense(features, slots)
        return self._in_batch(features, labels_t)

    def _all_triplets_dense(self, features: Tensor, slots: PositiveSlots) -> Tensor:
        total, n_triplets, logs = all_triplets_loss_sum(pairwise_l2(features), slots, self.margin)
        if self.need_logs:
            self.last_logs = logs
        return total / n_triplets if self.reduction == "mean" and n_triplets else total

    def _in_batch(self, features: Tensor, labels: Tensor) -> Tensor:
        ids = self.miner._sample(features.detach(), labels=labels)
        ids_a, ids_p, ids_n = (torch.as_tensor(i, dtype=torch.long, device=features.device) for i in ids)
        if len(ids_a) <= len(features):  # at most a triplet per sample: cheaper than the [B, B] matrix
            pos_dist, neg_dist = _gathered_distances(features, ids_a, ids_p, ids_n)
        else:
            dist = pairwise_l2(features)
            pos_dist, neg_dist = dist[ids_a, ids_p], dist[ids_a, ids_n]
        loss = triplet_values(pos_dist, neg_dist, self.margin)
        if self.need_logs:
            self.last_logs = _triplet_logs(loss, pos_dist, neg_dist)
        return get_reduced(loss, self.reduction)

    def _from_features(self, features: Tensor, labels: Tensor | list[int]) -> Tensor:
        return self._gathered(*self.miner.sample(features=features, labels=labels))

    def _gathered(
        self, anchor: Tensor, positive: Tensor, negative: Tensor, is_original: Tensor | None = None
    ) -> Tensor:
        loss = self.tri_loss(anchor=anchor, positive=positive, negative=negative)
        if self.need_logs:
            self.last_logs = dict(self.tri_loss.last_logs)
            if is_original is not None:
                self.last_logs.update(_memory_logs(loss, anchor, positive, negative, is_original))
        return get_reduced(loss, self.reduction)


def _gathered_distances(
    features: Tensor, ids_a: Tensor, ids_p: Tensor, ids_n: Tensor
) -> tuple[Tensor, Tensor]:
    """``(||x_a - x_p||, ||x_a - x_n||)`` of the triplets, by one gather and one norm (the gradient of
    ``torch.linalg.vector_norm``, as :class:`TripletLoss`); the anchors are not gathered when they are all the
    rows in order (the hard miners' output). ``index_select``: its backward (``index_add_``) is several times
    faster on the CPU than that of ``features[ids]``."""
    n = len(ids_a)
    in_order = n == len(features) and torch.equal(ids_a, torch.arange(n, device=ids_a.device))
    anchors = features if in_order else features.index_select(0, ids_a)
    others = features.index_select(0, torch.cat([ids_p, ids_n])).view(2, n, features.shape[1])
    pos_dist, neg_dist = torch.linalg.vector_norm(others - anchors, dim=2).unbind(0)
    return pos_dist, neg_dist


def _memory_logs(
    loss: Tensor, anchor: Tensor, positive: Tensor, negative: Tensor, is_original: Tensor
) -> dict[str, float]:
    """The logs of :class:`TripletLoss` over the original (batch) triplets and over the memory-bank ones."""
    logs = {}
    for part, mask in (("orig", is_original), ("bank", ~is_original)):
        with torch.no_grad():
            pos_dist = elementwise_dist(anchor[mask], positive[mask], p=2)
            neg_dist = elementwise_dist(anchor[mask], negative[mask], p=2)
        part_logs = _triplet_logs(loss[mask], pos_dist, neg_dist)
        logs[f"{part}_active_tri"] = part_logs["active_tri"]
        logs[f"pos_dist_{part}"] = part_logs["pos_dist"]
        logs[f"neg_dist_{part}"] = part_logs["neg_dist"]
    return logs


__all__ = [
    "TLogs",
    "TripletLoss",
    "TripletLossPlain",
    "TripletLossWithMiner",
    "PositiveSlots",
    "all_triplets_loss_sum",
    "get_tri_ids_in_plain",
    "positive_slots",
    "triplet_values",
]
