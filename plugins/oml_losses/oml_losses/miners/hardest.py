"""Hard triplets from a distance matrix: for every anchor, a window of its hardest positives and negatives.

Shared by :class:`~oml_losses.miners.inbatch_hard_tri.HardTripletsMiner` (the window ``1..1``),
:class:`~oml_losses.miners.inbatch_nhard_tri.NHardTripletsMiner` and
:class:`~oml_losses.miners.miner_with_bank.MinerWithBank`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from oml_losses.miners.triplet_masks import get_pos_neg_masks, triplets_from_masks


def hardness_window_mask(
    distmat: Tensor, candidates: Tensor, window: slice, hardest_is_farthest: bool
) -> Tensor:
    """Mask ``[A, B]`` of the candidates whose hardness rank, per row, falls in ``window``.

    In every row the candidates are ranked from the hardest (rank ``0``): by decreasing distance when
    ``hardest_is_farthest`` (positives), by increasing distance otherwise (negatives); equal distances are
    ranked by increasing column index. ``window = slice(start, stop)`` keeps the ranks ``start <= r < stop``;
    a row with fewer candidates keeps what it has in the window (possibly nothing).

    Args:
        distmat: Distances ``[A, B]``.
        candidates: Boolean ``[A, B]``: which columns may be chosen in every row.
        window: The 0-based, half-open range of ranks to keep.
        hardest_is_farthest: Rank the largest distances first.
    """
    worst = -torch.inf if hardest_is_farthest else torch.inf
    keys = distmat.masked_fill(~candidates, worst)  # non-candidates go last
    order = torch.sort(keys, dim=1, descending=hardest_is_farthest, stable=True).indices
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(keys.shape[1], device=keys.device).expand_as(order))
    return candidates & (ranks >= window.start) & (ranks < window.stop)


def get_hard_triplets_ids(
    distmat: Tensor, labels: Tensor, positive_window: slice, negative_window: slice
) -> tuple[Tensor, Tensor, Tensor]:
    """Triplets of every anchor with its positives of ranks ``positive_window`` and its negatives of ranks
    ``negative_window`` (see :func:`hardness_window_mask`), all pairs of the two, sorted lexicographically.

    Args:
        distmat: Distances ``[A, B]`` from the anchors, which are the first ``A`` of the ``B`` items, to all.
        labels: Labels ``[B]`` of the items.
        positive_window: 0-based half-open range of the positives' ranks (hardest: the farthest).
        negative_window: 0-based half-open range of the negatives' ranks (hardest: the closest).

    Returns:
        Three ``int64`` tensors of equal length on ``distmat``'s device: anchor, positive and negative indices.
        An anchor without a positive or a negative in its window gives no triplet.
    """
    is_pos, is_neg = get_pos_neg_masks(labels, device=distmat.device, n_anchors=distmat.shape[0])
    hardest_only = (
        (positive_window.start, positive_window.stop)
        == (negative_window.start, negative_window.stop)
        == (0, 1)
    )
    if hardest_only and distmat.numel():
        # the hardest of each: arg-max/min (the first index on ties), no sort and no masks of the choice
        ids_a = (is_pos.any(dim=1) & is_neg.any(dim=1)).nonzero().squeeze(1)
        farthest = distmat.masked_fill(~is_pos, -torch.inf).argmax(dim=1)
        closest = distmat.masked_fill(~is_neg, torch.inf).argmin(dim=1)
        return ids_a, farthest[ids_a], closest[ids_a]
    return triplets_from_masks(
        hardness_window_mask(distmat, is_pos, positive_window, hardest_is_farthest=True),
        hardness_window_mask(distmat, is_neg, negative_window, hardest_is_farthest=False),
    )


__all__ = ["get_hard_triplets_ids", "hardness_window_mask"]
