"""FNMR@FMR: the False Non-Match Rate at given False Match Rates, with Open Metric Learning's definition.

Given the distances of the positive pairs ``u`` (same label) and of the negative pairs ``v`` (different
labels), the threshold for a false match rate ``fmr_k`` is the linear quantile of the negative distances,
``T_k = Q_v(fmr_k)``, and

.. math::
    \\textrm{FNMR}@\\textrm{FMR}_k = \\frac{1}{|u|} \\sum_i H(u_i - T_k), \\qquad H(0) = 1,

the fraction of positive distances ``>= T_k``.

The quantile is numpy's default ("linear", the 7th method of Hyndman and Fan), as OML computes it with
``np.quantile``: with the ``n`` negative distances sorted, ``x = (n - 1) * fmr``, ``i = floor(x)``,
``gamma = x - i``, ``a = v_(i)``, ``b = v_(min(i + 1, n - 1))`` and

``T = a + (b - a) * gamma`` when ``gamma < 0.5``, else ``T = b - (b - a) * (1 - gamma)``,

where ``b - a`` is taken in the distances' dtype and the rest in float64. Comparing a positive distance with
``T`` is done in float64, as numpy does, so the results match OML's bit for bit.

Three entry points:

- :func:`calc_fnmr_at_fmr`: from given arrays of positive and negative distances;
- :func:`calc_fnmr_at_fmr_rr`: over the items retrieved in a :class:`~oml_core.retrieval.RetrievalResults`
  (OML's ``calc_fnmr_at_fmr_rr``);
- :func:`calc_fnmr_at_fmr_all_pairs`: over ALL the query-gallery pairs, exactly, in bounded memory: the
  ``Q x G`` distances are computed block by block (:func:`~oml_core.knn.blocks.iter_distance_blocks`) and
  only counted, never stored.

How the all-pairs version selects exact order statistics without holding the distances. A non-negative
float32 ``d`` orders like its bit pattern read as an integer, so its top 20 bits (its *coarse key*: sign,
exponent and 11 mantissa bits) cut the distances into at most ``2**19`` ordered bins, each ``2**-11`` of its
values wide (relatively), and its low 12 bits (its *fine key*) tell the exact value within its bin.

1. Pass 1 counts the positive and the negative distances of every coarse bin (a scatter-add per part of a block).
   This gives the number of negative pairs ``n``, hence the 0-based ranks ``i`` and ``i + 1`` wanted for
   every ``fmr``, and the coarse bin holding each rank.
2. Pass 2 recomputes the blocks and counts, for the few bins found in pass 1 only, the distances of every
   fine key: that is the exact multiset of values in those bins, so the order statistics ``a``, ``b`` (ties
   included) and the thresholds ``T_k`` follow exactly.
3. The number of positive distances ``>= T_k`` is the count of the coarse bins above ``T_k``'s bin plus, in
   its bin, the count of the fine keys from ``T_k`` on. When ``T_k`` falls into a bin that holds positives
   but was not refined in pass 2 (``a`` and ``b`` in different bins, ``T_k`` between them), one more pass
   refines that bin.

Memory: the embeddings, one block of distances (with its ignore mask), the work buffers of one part of it
(about ``2**18`` elements, at least one row), and histograms of fixed size (``2**20`` counts, and ``2**13`` per
refined bin): never anything of the size of the ``Q x G`` pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch
from torch import Tensor

from oml_core.functional.ragged_tops import TMetricsDict, calc_gt_tops, cat_ragged
from oml_core.knn.blocks import DistanceBlock, iter_distance_blocks
from oml_core.utils.checks import as_int_tensor, check_in_range, check_indices
from oml_core.utils.misc_torch import iter_chunks, squared_norms

if TYPE_CHECKING:
    from oml_core.retrieval.retrieval_results import RetrievalResults

#: Key of the metric in the dictionaries of metrics (OML's).
FNMR_AT_FMR_KEY = "fnmr@fmr"

# Bit layout of a non-negative float32 distance: coarse key = bits >> 12 (at most 0x7F800 for finite values),
# fine key = bits & 0xFFF.
_FINE_BITS = 12
_N_FINE = 1 << _FINE_BITS
_N_COARSE = 1 << (31 - _FINE_BITS)
#: Histogram codes of pass 1: a negative pair counts at its coarse key, a positive one at ``_N_COARSE`` plus
#: its coarse key, an ignored one at ``_IGNORED``.
_IGNORED = 2 * _N_COARSE
#: Elements of the part of a block counted at once: small enough for the part's work buffers (an int32 and a
#: bool per element) to stay in the CPU caches from one operation to the next.
_PART_ELEMENTS = 1 << 18


# ----------------------------------------------------------------------------------- shared formulas
def _check_fmr_vals(fmr_vals: Sequence[float]) -> tuple[float, ...]:
    """``fmr_vals`` as a tuple of floats (:func:`~oml_core.utils.checks.check_in_range`: numbers in [0, 1])."""
    return tuple(float(x) for x in check_in_range(fmr_vals, "fmr_vals"))


def quantile_ranks(n: int, fmr_vals: Sequence[float]) -> tuple[Tensor, Tensor, Tensor]:
    """The order statistics and weights of numpy's linear quantiles of ``n`` sorted values.

    For every ``q`` in ``fmr_vals``: ``x = (n - 1) * q`` (in float64, as numpy), the 0-based ranks
    ``lo = floor(x)`` and ``hi = min(lo + 1, n - 1)``, and ``gamma = x - lo``. When ``gamma == 0`` the
    quantile is the value of rank ``lo`` alone, and ``hi`` is set to ``lo``.

    Returns:
        ``(lo, hi, gamma)``: two ``[len(fmr_vals)]`` LongTensors and a float64 tensor.
    """
    x = torch.tensor([(n - 1) * q for q in fmr_vals], dtype=torch.float64)
    lo = torch.floor(x)
    gamma = x - lo
    lo = lo.long()
    hi = torch.where(gamma > 0, torch.clamp(lo + 1, max=n - 1), lo)
    return lo, hi, gamma


def lerp_quantile(a: Tensor, b: Tensor, gamma: Tensor) -> Tensor:
    """numpy's linear interpolation between the order statistics ``a <= b`` (see the module's docstring).

    ``b - a`` is computed in the dtype of ``a`` and ``b``, everything else in float64: float64 thresholds.
    """
    diff = (b - a).double()
    a, b = a.double(), b.double()
    return torch.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)


def round_up_to_dtype(thresholds: Tensor, dtype: torch.dtype) -> Tensor:
    """For float64 ``thresholds``, the smallest values of the floating ``dtype`` that are ``>=`` them.

    For any ``x`` of that dtype, ``x >= t`` in float64 is the same as ``x >= round_up_to_dtype(t)`` in the
    dtype, so the positive distances are compared with a float64 threshold without being copied to float64.
    """
    if dtype == torch.float64:
        return thresholds
    rounded = thresholds.to(dtype)
    below = rounded.double() < thresholds
    return torch.where(below, torch.nextafter(rounded, torch.full_like(rounded, float("inf"))), rounded)


def _as_distances(values: np.ndarray | Tensor | Sequence[float], name: str) -> Tensor:
    """``values`` as a flat tensor (a view when possible); ``ValueError`` when empty, non-real or NaN."""
    if isinstance(values, Tensor):
        flat = values.detach().reshape(-1)
    else:
        flat = torch.as_tensor(np.ascontiguousarray(values)).reshape(-1)
    if flat.dtype == torch.bool or flat.is_complex():
        raise ValueError(f"{name} must hold real distances, got {flat.dtype}")
    if flat.numel() == 0:
        raise ValueError(f"{name} is empty: fnmr@fmr needs at least one positive and one negative distance")
    if flat.dtype.is_floating_point and bool(torch.isnan(flat).any()):
        raise ValueError(f"{name} contains NaN")
    return flat


def _count_at_least(values: Tensor, thresholds: Tensor) -> Tensor:
    """``[(values >= t).sum() for t in thresholds]``, the comparison exact in float64 (``[n_thresholds]``).

    Floating ``values`` are compared in their dtype with the thresholds rounded up to it (the same result);
    integer ones are compared in float64.
    """
    if not values.dtype.is_floating_point:
        values = values.double()
    bounds = round_up_to_dtype(thresholds, values.dtype).to(values.device)
    return torch.stack([torch.count_nonzero(values >= bound) for bound in bounds]).cpu()


# ----------------------------------------------------------------------------------- from distances
def calc_fnmr_at_fmr(
    pos_dist: np.ndarray | Tensor,
    neg_dist: np.ndarray | Tensor,
    fmr_vals: Sequence[float] = (0.1,),
) -> Tensor:
    """False Non-Match Rate at the given False Match Rates (OML's ``calc_fnmr_at_fmr``).

    ``T_k`` is the linear quantile (numpy's default) of ``neg_dist`` at ``fmr_vals[k]``, and the result is
    the fraction of ``pos_dist`` that are ``>= T_k`` (see the module's docstring for the formulas). Only the
    needed order statistics of ``neg_dist`` are selected (one partial sort of one copy); ``pos_dist`` is
    compared in place.

    Args:
        pos_dist: Distances between relevant samples (numpy array or tensor, flattened).
        neg_dist: Distances between non-relevant samples (numpy array or tensor, flattened).
        fmr_vals: Values of ``fmr`` (quantiles in ``[0, 1]``) to compute the ``fnmr`` at.

    Returns:
        ``[len(fmr_vals)]`` float32 tensor of ``fnmr@fmr`` values.

    Raises:
        ValueError: ``fmr_vals`` empty or outside ``[0, 1]``; ``pos_dist`` or ``neg_dist`` empty, NaN, or not
            real numbers.

    Example:
        >>> pos_dist = np.array([0, 0, 1, 1, 2, 2, 5, 5, 9, 9])
        >>> neg_dist = np.array([3, 3, 4, 4, 6, 6, 7, 7, 8, 8])
        >>> calc_fnmr_at_fmr(pos_dist, neg_dist, fmr_vals=(0.1, 0.5))
        tensor([0.4000, 0.2000])
    """
    fmr_vals = _check_fmr_vals(fmr_vals)
    pos = _as_distances(pos_dist, "pos_dist")
    neg = _as_distances(neg_dist, "neg_dist")
    if neg.dtype == torch.bfloat16:  # numpy has no bfloat16; float32 holds its values exactly
        neg = neg.float()
    lo, hi, gamma = quantile_ranks(len(neg), fmr_vals)
    ranks = torch.cat([lo, hi]).unique()
    partitioned = torch.from_numpy(np.partition(neg.cpu().numpy(), ranks.numpy()))
    thresholds = lerp_quantile(partitioned[lo], partitioned[hi], gamma)
    return (_count_at_least(pos, thresholds).double() / len(pos)).float()


def calc_fnmr_at_fmr_rr(rr: RetrievalResults, fmr_vals: Sequence[float] = (0.1,)) -> TMetricsDict:
    """``fnmr@fmr`` over the retrieved items of ``rr`` (OML's ``calc_fnmr_at_fmr_rr``).

    The positive distances are those of the retrieved items that are in the query's ``gt_ids``, the negative
    ones those of the other retrieved items; then :func:`calc_fnmr_at_fmr`. Vectorised over all the queries.

    Args:
        rr: Retrieval results with ground truth.
        fmr_vals: Values of ``fmr`` to calculate ``fnmr`` at; empty: no metric.

    Returns:
        ``{"fnmr@fmr": {fmr: 0-d tensor}}``, or ``{}`` when ``fmr_vals`` is empty.

    Raises:
        ValueError: ``rr`` has no ground truth; no retrieved item is relevant (no positive distance) or none
            is irrelevant (no negative distance); see :func:`calc_fnmr_at_fmr`.
    """
    if isinstance(fmr_vals, Sequence) and len(fmr_vals) == 0:
        return {}
    fmr_vals = _check_fmr_vals(fmr_vals)
    if rr.gt_ids is None:
        raise ValueError("calc_fnmr_at_fmr_rr needs retrieval results with ground truth (rr.gt_ids is None)")
    distances, _ = cat_ragged(rr.distances)
    is_positive, _ = cat_ragged(calc_gt_tops(rr.retrieved_ids, rr.gt_ids))
    is_positive = is_positive.bool().to(distances.device)
    for name, mask in (("relevant (a positive)", is_positive), ("irrelevant (a negative)", ~is_positive)):
        if not bool(mask.any()):
            raise ValueError(f"calc_fnmr_at_fmr_rr: no retrieved item is {name}; fnmr@fmr is undefined")
    values = calc_fnmr_at_fmr(distances[is_positive], distances[~is_positive], fmr_vals)
    return {FNMR_AT_FMR_KEY: dict(zip(fmr_vals, values))}


# ------------------------------------------------------------------------------------- over all pairs
class _Workspace:
    """Reused flat buffers, one per dtype, viewed as ``[rows, cols]`` (saves reallocating every part)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.buffers: dict[torch.dtype, Tensor] = {}

    def get(self, shape: torch.Size, dtype: torch.dtype) -> Tensor:
        size = shape[0] * shape[1]
        buffer = self.buffers.get(dtype)
        if buffer is None or buffer.numel() < size:
            buffer = self.buffers[dtype] = torch.empty(size, dtype=dtype, device=self.device)
        return buffer[:size].view(shape)


class _Part(NamedTuple):
    """Some rows of a block of distances."""

    rows: slice  # positions within ids_query
    cols: slice  # positions within ids_gallery
    distances: Tensor
    ignore: Tensor
    weight: int  # 2 for a part of a mirrored block: its pairs count in both orders


def _scatter_count(counts: Tensor, codes: Tensor, weight: int) -> None:
    """``counts[codes] += weight``, in place (``index_add_``: unlike ``bincount``, no fixed cost per call)."""
    weights = torch.full((1,), weight, dtype=counts.dtype, device=counts.device)
    counts.index_add_(0, codes, weights.expand(len(codes)))


def _iter_parts(blocks: Iterator[DistanceBlock]) -> Iterator[_Part]:
    """The blocks cut into parts of about ``_PART_ELEMENTS`` elements (at least one row each)."""
    for block in blocks:
        n_rows, n_cols = block.distances.shape
        start = block.query_positions.start
        for local in iter_chunks(n_rows, max(1, _PART_ELEMENTS // max(n_cols, 1))):
            yield _Part(
                slice(start + local.start, start + local.stop),
                block.gallery_positions,
                block.distances[local],
                block.ignore[local],
                2 if block.mirrored else 1,
            )


class _Pairs:
    """The query-gallery pairs of one call: their distances, part by part, and the labels of both sides."""

    def __init__(
        self,
        iter_blocks: Callable[[], Iterator[DistanceBlock]],
        labels_query: Tensor,
        labels_gallery: Tensor,
        device: torch.device,
    ) -> None:
        self.iter_blocks = iter_blocks
        self.labels_query, self.labels_gallery = labels_query, labels_gallery
        self.work = _Workspace(device)

    def coarse_keys(self, part: _Part) -> Tensor:
        """``[rows, cols]`` int32 coarse keys (in a work buffer) of the part's distances, which are ``>= +0.0``
        (the distance functions clamp at ``+0.0``; the sign bit would make a negative key, an index error)."""
        keys = self.work.get(part.distances.shape, torch.int32)
        return torch.bitwise_right_shift(part.distances.view(torch.int32), _FINE_BITS, out=keys)

    def coarse_histogram(self) -> Tensor:
        """Pass 1: ``[2, _N_COARSE]`` counts of the negative (row 0) and positive (row 1) pairs per coarse key."""
        counts = torch.zeros(_IGNORED + 1, dtype=torch.long, device=self.work.device)
        for part in _iter_parts(self.iter_blocks()):
            codes = self.coarse_keys(part)
            same = self.work.get(codes.shape, torch.bool)
            torch.eq(self.labels_query[part.rows, None], self.labels_gallery[None, part.cols], out=same)
            codes.add_(same, alpha=_N_COARSE).masked_fill_(part.ignore, _IGNORED)
            _scatter_count(counts, codes.view(-1), part.weight)
        return counts[:_IGNORED].view(2, _N_COARSE).cpu()

    def fine_histograms(self, bins: list[int]) -> Tensor:
        """Pass 2: ``[2, len(bins), _N_FINE]`` counts of the negative (row 0) and positive (row 1) pairs per
        fine key, for the coarse keys ``bins`` (ascending) only: the exact multisets of their distances."""
        n_bins = len(bins)
        counts = torch.zeros(2 * n_bins * _N_FINE, dtype=torch.long, device=self.work.device)
        targets = torch.tensor(bins, dtype=torch.int32, device=self.work.device)
        for part in _iter_parts(self.iter_blocks()):
            keys = self.coarse_keys(part)
            hit = torch.eq(keys, bins[0], out=self.work.get(keys.shape, torch.bool))
            for key in bins[1:]:
                hit.logical_or_(keys == key)
            rows, cols = hit.nonzero().unbind(1)
            kept = ~part.ignore[rows, cols]
            rows, cols = rows[kept], cols[kept]
            same = self.labels_query[part.rows][rows] == self.labels_gallery[part.cols][cols]
            fine_keys = part.distances.view(torch.int32)[rows, cols] & (_N_FINE - 1)
            slots = torch.searchsorted(targets, keys[rows, cols])
            _scatter_count(counts, (same.long() * n_bins + slots) * _N_FINE + fine_keys, part.weight)
        return counts.view(2, n_bins, _N_FINE).cpu()


def _bin_of_rank(counts: Tensor, ranks: Tensor) -> tuple[Tensor, Tensor]:
    """For 0-based ``ranks`` into the values counted by ``counts`` ``[..., n_bins]`` (last dim: bins in value
    order, leading dims matching those of ``ranks``), the bin holding each rank and the rank within it."""
    cumulative = torch.cumsum(counts, -1)
    bins = torch.searchsorted(cumulative, ranks, right=True)
    before = torch.where(bins > 0, cumulative.gather(-1, (bins - 1).clamp(min=0)), 0)
    return bins, ranks - before


def _float32_of(coarse: Tensor, fine: Tensor) -> Tensor:
    """The float32 numbers whose bits are ``coarse << _FINE_BITS | fine``."""
    return ((coarse << _FINE_BITS) | fine).to(torch.int32).view(torch.float32)


def _check_embeddings(embeddings: Tensor, distance: str) -> Tensor:
    """``embeddings`` in float32; ``ValueError`` unless ``[n, dim]`` and, for ``l2``, every float32 distance
    ``sqrt(|a|^2 + |b|^2 - 2 a.b)`` stays finite (``4 max |x|^2`` does not overflow)."""
    embeddings = torch.as_tensor(embeddings)
    if embeddings.ndim != 2:
        raise ValueError(f"embeddings must be a [n, dim] tensor, got shape {tuple(embeddings.shape)}")
    embeddings = embeddings.float()
    if distance == "l2" and len(embeddings) and not bool(torch.isfinite(4 * squared_norms(embeddings).max())):
        raise ValueError("embeddings must be finite, and small enough for l2 distances in float32")
    return embeddings


def calc_fnmr_at_fmr_all_pairs(
    embeddings: Tensor,
    ids_query: Tensor,
    ids_gallery: Tensor,
    labels: Tensor,
    fmr_vals: Sequence[float] = (0.1,),
    sequence_ids: Tensor | None = None,
    distance: str = "l2",
    chunk_size: int | None = None,
    memory_budget: int | None = None,
    symmetric: bool | None = None,
    verbose: bool = False,
) -> Tensor:
    """``fnmr@fmr`` over ALL the query-gallery pairs, exact, in bounded memory.

    The pairs are ``(q, g)`` for every query ``q`` and gallery item ``g`` except the ignored ones, as in the
    kNN: ``g`` is the same dataset item as ``q``, or (given ``sequence_ids``) shares its sequence. A pair is
    positive when both items have the same label, negative otherwise. Distances are computed in float32 as
    the kNN computes them (:func:`~oml_core.knn.blocks.iter_distance_blocks`), and the result equals
    :func:`calc_fnmr_at_fmr` of the positive and negative distances, which are never held: see the module's
    docstring for the counting passes (two, rarely three, over the distance blocks).

    When ``ids_query`` and ``ids_gallery`` are the same items ("1 vs rest"), only the upper-triangular blocks
    of the symmetric matrix are computed, each off-diagonal pair standing for both of its orders.

    Args:
        embeddings: ``[n, dim]`` embeddings of the whole dataset (computed in float32).
        ids_query: ``[Q]`` dataset indices of the queries.
        ids_gallery: ``[G]`` dataset indices of the gallery items.
        labels: ``[n]`` integer labels of the dataset items.
        fmr_vals: Values of ``fmr`` (quantiles in ``[0, 1]``) to compute the ``fnmr`` at.
        sequence_ids: ``[n]`` integer sequence ids; pairs of one sequence are ignored.
        distance: ``"l2"`` or ``"cosine"``.
        chunk_size: Queries per block. ``None``: sized from ``memory_budget``.
        memory_budget: Bytes of one block (``KNN_MEMORY_BUDGET`` when ``None``); not with ``chunk_size``.
        symmetric: See :func:`~oml_core.knn.blocks.iter_distance_blocks` (``None``: automatic).
        verbose: Set ``True`` to see progress bars over the blocks of every pass.

    Returns:
        ``[len(fmr_vals)]`` float32 tensor of ``fnmr@fmr`` values.

    Raises:
        ValueError: ``fmr_vals`` empty or outside ``[0, 1]``; ``labels`` or ids of the wrong length, not
            integers or out of range; no positive or no negative pair; embeddings not ``[n, dim]``, not finite
            or too large for float32 l2 distances; see :func:`~oml_core.knn.blocks.iter_distance_blocks`.
    """
    fmr_vals = _check_fmr_vals(fmr_vals)
    embeddings = _check_embeddings(embeddings, distance)
    n_items, device = len(embeddings), embeddings.device
    labels = as_int_tensor(labels, "labels", n=n_items, per="embedding")
    ids_query = check_indices(ids_query, "ids_query", n_items, device=device)
    ids_gallery = check_indices(ids_gallery, "ids_gallery", n_items, device=device)

    def iter_blocks() -> Iterator[DistanceBlock]:
        return iter_distance_blocks(
            embeddings,
            ids_query,
            ids_gallery,
            distance=distance,
            sequence_ids=sequence_ids,
            chunk_size=chunk_size,
            symmetric=symmetric,
            memory_budget=memory_budget,
            verbose=verbose,
        )

    labels = labels.to(device)
    pairs = _Pairs(iter_blocks, labels[ids_query], labels[ids_gallery], device)
    neg_coarse, pos_coarse = pairs.coarse_histogram()
    n_neg, n_pos = int(neg_coarse.sum()), int(pos_coarse.sum())
    if n_neg == 0:
        raise ValueError("no negative pairs: every query-gallery pair that is not ignored shares a label")
    if n_pos == 0:
        raise ValueError("no positive pairs: no query has a gallery item of its label that is not ignored")

    # exact order statistics of the negative distances: their coarse bins, then their fine keys in them
    lo, hi, gamma = quantile_ranks(n_neg, fmr_vals)
    ranks = torch.cat([lo, hi])
    rank_bins, within = _bin_of_rank(neg_coarse, ranks)
    refined = rank_bins.unique()
    fine = pairs.fine_histograms(refined.tolist())
    sub, _ = _bin_of_rank(fine[0][torch.searchsorted(refined, rank_bins)], within[:, None])
    values = _float32_of(rank_bins, sub.squeeze(1))
    thresholds = lerp_quantile(values[: len(lo)], values[len(lo) :], gamma)

    # positives >= threshold: whole coarse bins above the threshold's bin, fine keys within it
    bits = round_up_to_dtype(thresholds, torch.float32).view(torch.int32).long()
    keys, fine_keys = (bits >> _FINE_BITS).tolist(), (bits & (_N_FINE - 1)).tolist()
    pos_fine = dict(zip(refined.tolist(), fine[1]))
    missing = sorted({key for key in keys if key not in pos_fine and int(pos_coarse[key]) > 0})
    if missing:
        pos_fine.update(zip(missing, pairs.fine_histograms(missing)[1]))
    n_at_least = [
        int(pos_coarse[key + 1 :].sum()) + (int(pos_fine[key][fine_key:].sum()) if key in pos_fine else 0)
        for key, fine_key in zip(keys, fine_keys)
    ]
    return (torch.tensor(n_at_least, dtype=torch.float64) / n_pos).float()


__all__ = [
    "FNMR_AT_FMR_KEY",
    "calc_fnmr_at_fmr",
    "calc_fnmr_at_fmr_all_pairs",
    "calc_fnmr_at_fmr_rr",
    "lerp_quantile",
    "quantile_ranks",
    "round_up_to_dtype",
]
