"""The ``k`` nearest gallery items of every query, kept while the blocks of distances go by
(:class:`RunningTopK`): each block's candidates are found by ``torch.topk`` or by a scan under the current
``k``-th distances, and merged in lexicographic order (distance, gallery position), so that the result does
not depend on how the matrix is cut into blocks."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from oml_core.utils.ragged import Ragged

#: A query's row of a block is scanned for the entries under its current k-th distance (rather than given to
#: ``torch.topk``) once it has been compared with this many times ``k`` gallery items (few entries then pass).
SCAN_AFTER_SEEN = 20
#: Rows whose minima are taken together when a block is scanned for candidates (see :class:`RunningTopK`).
SCAN_GROUP = 8

_INT_OF_FLOAT = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}


def _sortable_bits(values: Tensor) -> Tensor:
    """Integers in the order of the non-negative floats ``values`` (their bit patterns, ``-0.0`` taken as
    ``+0.0``): integer sorts are several times faster than float sorts on the CPU."""
    return (values + 0.0).view(_INT_OF_FLOAT.get(values.dtype, torch.int64))


def _argsort_small(keys: Tensor) -> Tensor:
    """Stable argsort of non-negative integer ``keys`` below ``2**31`` (sorted as int32: faster)."""
    return torch.argsort(keys.int(), stable=True)


def _lexicographic_order(group: Tensor, values: Tensor, positions: Tensor) -> Tensor:
    """The order by ``(group, value, position)`` of non-negative ``values`` (``group`` and ``positions`` in
    ``[0, 2**31)``). Float32 (or narrower) values: one sort of ``group << 32 | value bits``, enough unless two
    finite values of a group are equal; otherwise three stable sorts."""
    bits = _sortable_bits(values)
    if bits.element_size() <= 4:
        keys, order = torch.sort((group << 32) | bits.long())
        inf_bits = int(_sortable_bits(values.new_full((1,), float("inf"))))
        tied = (keys[1:] == keys[:-1]) & ((keys[1:] & 0xFFFFFFFF) != inf_bits)  # unfilled slots may tie
        if not bool(tied.any()):
            return order
    order = _argsort_small(positions)
    order = order.index_select(0, torch.argsort(bits.index_select(0, order), stable=True))
    return order.index_select(0, _argsort_small(group.index_select(0, order)))


def _group_minima(dist: Tensor) -> Tensor:
    """``[m // SCAN_GROUP, w]``: the minimum of every column over every group of ``SCAN_GROUP`` rows (a
    remainder of rows is left out)."""
    n_groups = len(dist) // SCAN_GROUP
    return dist[: n_groups * SCAN_GROUP].view(n_groups, SCAN_GROUP, dist.shape[1]).amin(dim=1)


def _nonzero_2d(mask: Tensor) -> tuple[Tensor, Tensor]:
    """``mask.nonzero(as_tuple=True)`` of a contiguous, mostly false 2-D mask, eight bytes at a time (several
    times faster on the CPU)."""
    n_cols, flat = mask.shape[1], mask.view(-1)
    n_words = len(flat) // 8
    words = flat[: n_words * 8].view(torch.int64).nonzero().squeeze(1)
    candidates = (words[:, None] * 8 + torch.arange(8, device=mask.device)[None, :]).view(-1)
    hits = torch.cat(
        [candidates[flat.index_select(0, candidates)], flat[n_words * 8 :].nonzero().view(-1) + n_words * 8]
    )
    return hits // n_cols, hits % n_cols


def _not_above(
    dist: Tensor, group_mins: Tensor, bound: Tensor, per_row: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """``(i, j, dist[i, j])`` for the entries with ``dist[i, j] <= bound[i]`` (``per_row``) or ``<= bound[j]``,
    ``dist`` being contiguous.

    Only the groups of rows whose minimum (``group_mins``) passes the group's loosest bound are looked at
    entry by entry, and the remainder rows (fewer than ``SCAN_GROUP``)."""
    n_cols = dist.shape[1]
    in_groups = len(group_mins) * SCAN_GROUP
    if per_row:
        group_bounds = bound[:in_groups].view(-1, SCAN_GROUP)
        groups, cols = _nonzero_2d(group_mins <= group_bounds.amax(dim=1)[:, None])
        limits = group_bounds.index_select(0, groups)
    else:
        groups, cols = _nonzero_2d(group_mins <= bound[None, :])
        limits = bound.index_select(0, cols)[:, None]
    first = groups * (SCAN_GROUP * n_cols) + cols  # the group's entry in its first row, flat
    steps = torch.arange(SCAN_GROUP, device=dist.device) * n_cols
    values = dist.view(-1).index_select(0, (first[:, None] + steps[None, :]).view(-1)).view(-1, SCAN_GROUP)
    hit, step = (values <= limits).nonzero(as_tuple=True)
    rest = dist[in_groups:]
    rest_rows, rest_cols = (rest <= (bound[in_groups:, None] if per_row else bound[None, :])).nonzero(
        as_tuple=True
    )
    return (
        torch.cat([groups.index_select(0, hit) * SCAN_GROUP + step, rest_rows + in_groups]),
        torch.cat([cols.index_select(0, hit), rest_cols]),
        torch.cat([values[hit, step], rest[rest_rows, rest_cols]]),
    )


class Candidates(NamedTuple):
    """Entries of a block that may enter their query's top ``k``: query, gallery position and raw value of
    each."""

    queries: Tensor
    positions: Tensor
    values: Tensor


class RunningTopK:
    """The ``k`` best ``(distance, gallery position)`` found so far for every query, sorted by distance and,
    among equal distances, by position; unfilled slots hold ``(inf, G)``.

    A block is offered row by row (and, mirrored, column by column). Rows that have already seen enough
    gallery items ("warm") take the entries not above their current ``k``-th distance: the block's minima over
    groups of :data:`SCAN_GROUP` rows tell, for both directions at once and at the cost of one reduction, the
    few groups worth a closer look (few entries pass once a query has seen many gallery items, which is why
    the symmetric strips start small and grow). The other ("cold") rows take the block's top ``k`` by
    ``torch.topk`` plus every entry tied with its ``k``-th. The candidates are merged in lexicographic order,
    so the result does not depend on how the matrix is split into blocks.

    Args:
        n_query: Number of queries.
        k: Number of neighbours to keep.
        n_gallery: Gallery size (the position of unfilled slots).
        dtype: Dtype of the distances.
        device: Device of the distances.
    """

    def __init__(
        self, n_query: int, k: int, n_gallery: int, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.k = k
        self.dist = torch.full((n_query, k), float("inf"), dtype=dtype, device=device)
        self.ids = torch.full((n_query, k), n_gallery, dtype=torch.long, device=device)
        self.seen = torch.zeros(n_query, dtype=torch.long, device=device)  # gallery items offered so far

    def _thresholds(self, queries: slice, n_cols: int) -> tuple[Tensor, Tensor | None]:
        """The cold ``queries`` (local indices) and the scan bound of the warm ones (``-inf`` for the cold;
        ``None`` when all are cold), for a block of ``n_cols`` gallery items."""
        threshold = self.dist[queries, self.k - 1]
        # a scan keeps about k * n_cols / seen entries per row: when that is many, torch.topk is cheaper
        cold = torch.isinf(threshold) | (self.seen[queries] < min(SCAN_AFTER_SEEN * self.k, n_cols))
        self.seen[queries] += n_cols
        cold_ids = cold.nonzero().squeeze(1)
        return cold_ids, None if len(cold_ids) == len(cold) else threshold.masked_fill(cold, float("-inf"))

    def candidates(self, dist: Tensor, row_offset: int, col_offset: int, mirrored: bool) -> list[Candidates]:
        """The entries of the block ``dist`` ``[m, w]`` (queries ``row_offset + i``, gallery positions
        ``col_offset + j``; when ``mirrored``, also queries ``col_offset + j`` and gallery positions
        ``row_offset + i``) that may enter the top ``k`` of their query, for :meth:`merge` (merging after every
        block keeps the thresholds of the next ones tight)."""
        n_rows, n_cols = dist.shape
        cold_rows, bound_rows = self._thresholds(slice(row_offset, row_offset + n_rows), n_cols)
        cold_cols, bound_cols = (torch.zeros(0, dtype=torch.long), None)
        if mirrored:
            cold_cols, bound_cols = self._thresholds(slice(col_offset, col_offset + n_cols), n_rows)
        found = [
            Candidates(i + row_offset, j + col_offset, v)
            for i, j, v in self._cold_candidates(dist, cold_rows)
        ]
        found += [
            Candidates(j + col_offset, i + row_offset, v)
            for j, i, v in self._cold_candidates(dist.T, cold_cols)
        ]
        if bound_rows is not None or bound_cols is not None:
            group_mins = _group_minima(dist)
            if bound_rows is not None:
                i, j, v = _not_above(dist, group_mins, bound_rows, per_row=True)
                found.append(Candidates(i + row_offset, j + col_offset, v))
            if bound_cols is not None:
                i, j, v = _not_above(dist, group_mins, bound_cols, per_row=False)
                found.append(Candidates(j + col_offset, i + row_offset, v))
        return found

    def _cold_candidates(self, dist: Tensor, rows: Tensor) -> list[tuple[Tensor, Tensor, Tensor]]:
        """The top ``k`` entries of the ``rows`` of ``dist``, and every entry tied with a row's ``k``-th."""
        if not len(rows):
            return []
        sub = dist if len(rows) == len(dist) else dist[rows]
        n_cols = sub.shape[1]
        k = min(self.k, n_cols)
        values, cols = torch.topk(sub, min(k + 1, n_cols), dim=1, largest=False, sorted=True)
        kth = values[:, k - 1]
        # torch.topk picks arbitrarily among the entries tied with the k-th: take them all
        tied = torch.zeros_like(kth, dtype=torch.bool)
        if values.shape[1] > k:
            tied = (values[:, k] == kth) & torch.isfinite(kth)
        clean = ~tied
        out = [
            (
                rows[clean, None].expand(-1, k).reshape(-1),
                cols[clean, :k].reshape(-1),
                values[clean, :k].reshape(-1),
            )
        ]
        if bool(tied.any()):
            t = tied.nonzero().squeeze(1)
            i, j = (sub[t] <= kth[t, None]).nonzero(as_tuple=True)
            out.append((rows[t][i], j, sub[t][i, j]))
        return out

    def merge(self, found: list[Candidates]) -> None:
        """Keep the ``k`` best of every query among its current ones and the candidates ``found`` (pairs not
        offered before), lexicographically by (value, position); values are clamped at ``0``."""
        queries, positions, values = (torch.cat(parts) for parts in zip(*found))
        if not len(queries):
            return
        # index_select / index_copy_ rather than [] indexing: several times faster on the CPU
        k, n_query, device = self.k, len(self.dist), queries.device
        is_touched = torch.zeros(n_query, dtype=torch.bool, device=device).index_fill_(0, queries, True)
        touched = is_touched.nonzero().squeeze(1)
        n = len(touched)
        slots = torch.arange(n, device=device)
        slot = torch.empty(n_query, dtype=torch.long, device=device).index_copy_(0, touched, slots)
        group = torch.cat([slots.repeat_interleave(k), slot.index_select(0, queries)])
        positions = torch.cat([self.ids.index_select(0, touched).view(-1), positions])
        values = torch.cat([self.dist.index_select(0, touched).view(-1), values.clamp(min=0.0)])
        order = _lexicographic_order(group, values, positions)
        counts = torch.bincount(group, minlength=n)
        starts = torch.cumsum(counts, 0) - counts
        best = order.index_select(0, (starts[:, None] + torch.arange(k, device=device)[None, :]).view(-1))
        self.dist.index_copy_(0, touched, values.index_select(0, best).view(n, k))
        self.ids.index_copy_(0, touched, positions.index_select(0, best).view(n, k))

    def results(self, to_distance: Callable[[Tensor], Tensor]) -> tuple[Ragged, Ragged]:
        """Ragged ``(distances, positions)`` of every query on the CPU, without the unfilled/ignored slots;
        ``to_distance`` turns the kept raw values into distances."""
        valid = torch.isfinite(self.dist)
        counts = valid.sum(dim=1).cpu()
        return Ragged(to_distance(self.dist[valid]).cpu(), counts), Ragged(self.ids[valid].cpu(), counts)


__all__ = ["SCAN_AFTER_SEEN", "SCAN_GROUP", "Candidates", "RunningTopK"]
