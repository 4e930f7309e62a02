"""Hard triplets: for every anchor, a window of its hardest positives and negatives.

:func:`get_hard_triplets_ids` mines from a distance matrix, for
:class:`~oml_losses.miners.inbatch_nhard_tri.NHardTripletsMiner` and
:class:`~oml_losses.miners.miner_with_bank.MinerWithBank`; :func:`hardest_triplets_ids` mines the hardest
triplet of every anchor from the features, for :class:`~oml_losses.miners.inbatch_hard_tri.HardTripletsMiner`:
a float32 matrix multiply screens, exact distances settle the near ties (see there).
"""

from __future__ import annotations

import torch
from torch import Tensor

from oml_core.utils.misc_torch import l2_dist_mm, squared_norms
from oml_losses.miners.distances import l2_dist, l2_dist_pairs
from oml_losses.miners.triplet_masks import get_pos_neg_masks, positive_slots, triplets_from_masks

#: The window of the hardest item only (rank 0).
HARDEST = slice(0, 1)


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


def hard_triplets_lists(
    distmat: Tensor,
    labels: Tensor | list[int],
    positive_window: slice,
    negative_window: slice,
    ignore_anchor_mask: Tensor | list[int] | None = None,
) -> tuple[list[int], list[int], list[int]]:
    """:func:`get_hard_triplets_ids` of a square ``[B, B]`` distance matrix as python lists (OML's form of the
    miners' ``_sample_from_distmat``), without the triplets whose anchor is marked in ``ignore_anchor_mask``
    ``[B]`` (non-zero: not an anchor).
    """
    labels_t = torch.as_tensor(labels, device=distmat.device).long()
    ids_a, ids_p, ids_n = get_hard_triplets_ids(distmat, labels_t, positive_window, negative_window)
    if ignore_anchor_mask is not None:
        keep = torch.as_tensor(ignore_anchor_mask, device=distmat.device)[ids_a] == 0
        ids_a, ids_p, ids_n = ids_a[keep], ids_p[keep], ids_n[keep]
    return ids_a.tolist(), ids_p.tolist(), ids_n.tolist()


def _float32_matmul_is_ieee(device: torch.device) -> bool:
    """Whether float32 matrix products on ``device`` round as IEEE float32 (no TF32 or bfloat16 shortcut set by
    ``torch.set_float32_matmul_precision`` or the ``fp32_precision`` switches)."""
    if device.type not in ("cpu", "cuda"):
        return False
    backend = (
        torch.backends.cuda.matmul
        if device.type == "cuda"
        else getattr(torch.backends.mkldnn, "matmul", None)
    )
    precision = getattr(backend, "fp32_precision", None)
    if precision is None:  # torch without the per-backend switches
        return torch.get_float32_matmul_precision() == "highest"
    if precision == "none":  # not set for the backend: the generic switch
        precision = getattr(torch.backends, "fp32_precision", "none")
    return precision in ("none", "ieee")


def _hardest_columns(
    x: Tensor, scores: Tensor, columns: Tensor | None, tolerance: Tensor, largest: bool
) -> Tensor:
    """The batch index of the hardest candidate of every row of ``scores`` ``[B, C]``: the largest when
    ``largest`` (the other columns hold ``-inf``), else the smallest (the others ``+inf``). Column ``c`` of row
    ``a`` is the item ``columns[a, c]`` (``c`` itself when ``columns`` is ``None``), increasing along each row.

    *Screen*: the extreme of every row; where the runner-up is more than ``tolerance[a]`` away, it is the answer.
    *Settle* the other rows (near ties, equal rows, ``scores`` changed in place and restored meanwhile): their
    candidates within ``tolerance`` of the extreme are compared by their distances from the differences
    (:func:`~oml_losses.miners.distances.l2_dist_pairs`), then by index.
    """
    best, chosen = scores.max(dim=1) if largest else scores.min(dim=1)
    scores.scatter_(1, chosen[:, None], -torch.inf if largest else torch.inf)  # hide the best: the runner-up
    runner_up = scores.amax(dim=1) if largest else scores.amin(dim=1)
    scores.scatter_(1, chosen[:, None], best[:, None])
    gap = best - runner_up if largest else runner_up - best  # nan where there is no candidate
    rows = (gap <= tolerance).nonzero().squeeze(1)
    if len(rows):
        if largest:
            candidates = scores[rows] >= (best[rows] - tolerance[rows])[:, None]
        else:
            candidates = scores[rows] <= (best[rows] + tolerance[rows])[:, None]
        local, candidate_cols = torch.nonzero(candidates, as_tuple=True)  # by row, then by column
        items = candidate_cols if columns is None else columns[rows[local], candidate_cols]
        distances = l2_dist_pairs(x, rows[local], items)
        keys = -distances if largest else distances
        extreme = torch.full((len(rows),), torch.inf, dtype=keys.dtype, device=keys.device)
        extreme.scatter_reduce_(0, local, keys, reduce="amin")
        at_extreme = keys == extreme[local]
        first = torch.full((len(rows),), scores.shape[1], dtype=torch.long, device=keys.device)
        chosen[rows] = first.scatter_reduce_(0, local[at_extreme], candidate_cols[at_extreme], reduce="amin")
    return chosen if columns is None else columns.gather(1, chosen[:, None]).squeeze(1)


def hardest_triplets_ids(features: Tensor, labels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The hardest triplet of every anchor: its farthest positive and its closest negative by the Euclidean
    distance rounded to the features' dtype, equal distances going to the smallest index. That is what
    ``get_hard_triplets_ids(l2_dist(x, x), labels, HARDEST, HARDEST)`` approximates, except where the
    cancellation of :func:`l2_dist` (``|a|^2 + |b|^2 - 2 a.b``) leaves noise, between equal or nearly equal rows.
    Computed in two steps (:func:`_hardest_columns`):

    1. *Screen*: rank by ``s = |a|^2 + |b|^2 - 2 a.b`` from one matrix multiply in float32 (in float64 for
       float64 features, or when float32 products are not IEEE on the device). Rounding moves every ``s`` by at
       most ``e_a = 2 (d + 2) u (|a| + M)^2`` (the product of ``d + 2`` terms and the squared norms in it; ``u``
       the unit roundoff, ``M`` the largest row norm), and two distances that round to one value of the
       features' dtype (``u'``) differ in ``s`` by at most ``4 u' (|a| + M)^2``. So where the runner-up of a row
       is more than ``tol_a = 4 e_a + 8 u' (|a| + M)^2`` from its best, the best is the answer.
    2. *Settle* the other rows (near ties, equal rows): their candidates within ``tol_a`` of the best are
       compared by their distances from the differences (:func:`~oml_losses.miners.distances.l2_dist_pairs`),
       ties by index.

    The positives are each sample's ``[B, S]`` slots (:func:`~oml_losses.miners.triplet_masks.positive_slots`:
    no ``[B, B]`` label mask), set to ``+inf`` in the matrix for the negatives. On a 1024 x 384 float32 batch of
    random features only a few rows need step 2.

    Args:
        features: ``[B, d]`` features (detached here).
        labels: ``[B]`` int64 labels on the features' device.

    Returns:
        ``(anchors, positives, negatives)``: ``int64`` tensors on the features' device, one triplet per sample
        that has a positive and a negative, in increasing anchor order.
    """
    x = features.detach()
    slots = positive_slots(labels)
    ids_a = ((slots.counts > 1) & (slots.counts < len(x))).nonzero().squeeze(1)
    if not len(ids_a):
        return ids_a, ids_a.clone(), ids_a.clone()
    if x.device.type not in ("cpu", "cuda"):
        return get_hard_triplets_ids(l2_dist(x, x), labels, HARDEST, HARDEST)
    exact_float32 = x.dtype != torch.float64 and _float32_matmul_is_ieee(x.device)
    work = x.float() if exact_float32 else x.double()
    squared = l2_dist_mm(work, work, squared=True)
    norms = squared_norms(work).sqrt_()
    unit_roundoff = torch.finfo(work.dtype).eps / 2
    output_roundoff = torch.finfo(x.dtype).eps / 2
    coefficient = 8 * (x.shape[1] + 2) * unit_roundoff + 8 * output_roundoff  # tol_a / (|a| + M)^2
    tolerance = coefficient * (norms + norms.max()) ** 2
    positives = squared.gather(1, slots.pos_ids).masked_fill_(~slots.valid, -torch.inf)
    negatives = squared.scatter_(1, slots.pos_ids, torch.inf).fill_diagonal_(torch.inf)  # same label: +inf
    ids_p = _hardest_columns(x, positives, slots.pos_ids, tolerance, largest=True)
    ids_n = _hardest_columns(x, negatives, None, tolerance, largest=False)
    return ids_a, ids_p[ids_a], ids_n[ids_a]


__all__ = ["HARDEST", "get_hard_triplets_ids", "hardest_triplets_ids", "hardness_window_mask"]
