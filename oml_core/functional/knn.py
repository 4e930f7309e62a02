"""Memory-bounded k-nearest-neighbour search of queries among gallery items.

The distance matrix ``[Q, G]`` is never held whole. It is computed block by block: strips of ``chunk_size``
queries, each cut into tiles of columns sized from a memory budget (small enough to stay in the CPU cache),
every block by one matrix multiply of "factors" that give the distances directly
(:func:`~oml_core.utils.misc_torch.l2_factors`) into a reused buffer (:func:`iter_distance_blocks`). Every
consumer (the top-k of :func:`search_knn`, the FNMR over all the pairs) looks at one block at a time.

When the queries and the gallery are the same items (the "1 vs rest" protocol), the matrix is symmetric and
only its upper-triangular part is computed: strip ``[a, b)`` covers the columns from ``a`` on; its blocks
right of the diagonal stand for their transposes too (*mirrored* blocks), so the multiply is halved.

A gallery item is *ignored* for a query (never retrieved, never a ground truth, never a pair) when it is the
same dataset item or, given sequence ids, when it shares the query's sequence.

Precision: the distances are computed in float32 for narrower embeddings (float16, bfloat16: the squared
distances of float16 embeddings of magnitude ~300 already overflow float16), strip by strip and tile by tile,
so no float32 copy of the embeddings is made; float32 and float64 embeddings keep their dtype
(:func:`compute_dtype`). Distances that still overflow (float32 embeddings of magnitude ~1e19) are an error,
:class:`NonFiniteDistanceError`, naming the query and the gallery item: the blocks are checked whenever the
rows' squared norms do not rule an overflow out, which costs nothing for embeddings of ordinary magnitude.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, NamedTuple, overload

import torch
from torch import Tensor
from tqdm.auto import tqdm

from oml_core.utils.checks import as_int_tensor, check_indices, check_int
from oml_core.utils.misc_torch import (
    ROWS_CHUNK,
    cosine_dist_mm,
    cosine_factors,
    inverse_norms,
    iter_chunks,
    l2_dist_mm,
    l2_factors,
    l2_from_squared_,
    squared_norms,
)
from oml_core.utils.ragged import Ragged

TDistance = Literal["l2", "cosine"]

#: Default memory budget of one block (its distances and ignore flags), in bytes, on the CPU: a block that
#: stays in the cache is faster to compute and to scan, and no fresh memory is touched block after block.
KNN_MEMORY_BUDGET = 2**24  # 16 MiB
#: Default memory budget of one block on other devices (GPUs), where bigger blocks mean fewer launches.
KNN_MEMORY_BUDGET_ACCELERATOR = 2**30
#: Bytes per element of a block: a float32 distance and a bool ignore flag.
BLOCK_BYTES_PER_ELEMENT = 5
#: Default queries per strip (the rows of the matrix multiplies).
STRIP_ROWS = 1024
#: A query's row of a block is scanned for the entries under its current k-th distance (rather than given to
#: ``torch.topk``) once it has been compared with this many times ``k`` gallery items (few entries then pass).
SCAN_AFTER_SEEN = 20
#: Rows whose minima are taken together when a block is scanned for candidates (see :class:`_RunningTopK`).
SCAN_GROUP = 8
#: Rows of the first strip of an automatic symmetric search; the next ones double up to ``STRIP_ROWS``: the
#: first strip's columns have no threshold yet (all taken by ``torch.topk``), and a strip as high as all the
#: strips above it lets about ``k`` entries per column pass the thresholds.
SYMMETRIC_FIRST_ROWS = 512


class NonFiniteDistanceError(ValueError):
    """A distance between a query and a gallery item is not finite in the dtype it is computed in (the
    embeddings are too large for it); the message names the query and the gallery item, by their positions and
    their rows of the embeddings."""


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype that the distances of embeddings of ``dtype`` are computed in: float32 for narrower floats
    (float16, bfloat16) and for integers, else ``dtype`` itself (float32, float64)."""
    return torch.promote_types(dtype, torch.float32)


def _name(dtype: torch.dtype) -> str:
    """``"float32"`` for ``torch.float32``."""
    return str(dtype).removeprefix("torch.")


def _inverse_norms(x: Tensor) -> Tensor:
    """:func:`~oml_core.utils.misc_torch.inverse_norms`, also right for the rows whose norm overflows ``x``'s
    dtype although their entries are finite (``1e19`` in float32): those are divided by their largest entry
    first (their inverse norm is then tiny but not ``0``, which would make all their distances ``1``)."""
    inv = inverse_norms(x)
    overflown = (inv == 0).nonzero().squeeze(1)
    if len(overflown):
        rows = x.index_select(0, overflown)
        scale = rows.abs().amax(dim=1)
        inv[overflown] = inverse_norms(rows / scale[:, None]) / scale
    return inv


class _DistanceKind(NamedTuple):
    stats: Callable[[Tensor], Tensor]  # [n, d] -> [n], a per-row statistic computed once
    factors: Callable[..., Tensor]  # (x, query, stats, out) -> factors whose products are "raw" distances
    to_distance: Callable[[Tensor], Tensor]  # raw values (e.g. squared l2) -> distances, in place
    function: Callable[[Tensor, Tensor], Tensor]  # the pairwise distance itself
    # (stats, dtype) -> [n] rows whose raw values with any other such row are certainly finite (the others'
    # blocks are checked); None: the raw values are always finite
    bounded: Callable[[Tensor, torch.dtype], Tensor] | None


def _l2_bounded(squared: Tensor, dtype: torch.dtype) -> Tensor:
    # every partial sum of [-2a, |a|^2, 1] . [b, 1, |b|^2] is at most (|a| + |b|)^2 <= 4 max(|a|^2, |b|^2)
    # in magnitude, which stays finite (with room for rounding) when both squared norms are below max / 8
    return squared < torch.finfo(dtype).max / 8


DISTANCES: dict[str, _DistanceKind] = {
    "l2": _DistanceKind(squared_norms, l2_factors, l2_from_squared_, l2_dist_mm, _l2_bounded),
    # the factors of a row are its entries times its inverse norm, of magnitude at most 1: never an overflow
    "cosine": _DistanceKind(
        _inverse_norms, cosine_factors, lambda v: v.clamp_(0.0, 2.0), cosine_dist_mm, None
    ),
}


def _distance_kind(distance: str) -> _DistanceKind:
    try:
        return DISTANCES[distance]
    except KeyError:
        raise ValueError(f"Unknown distance {distance!r}; expected one of {sorted(DISTANCES)}") from None


def get_distance_fn(distance: str) -> Callable[[Tensor, Tensor], Tensor]:
    """The pairwise distance ``f(x1 [n, d], x2 [m, d]) -> [n, m]`` called ``distance``.

    ``"l2"``: Euclidean distance (:func:`~oml_core.utils.misc_torch.l2_dist_mm`);
    ``"cosine"``: ``1 - cos(x1_i, x2_j)``, in ``[0, 2]`` (:func:`~oml_core.utils.misc_torch.cosine_dist_mm`).

    Raises:
        ValueError: an unknown name.
    """
    return _distance_kind(distance).function


def default_memory_budget(device: torch.device) -> int:
    """Bytes of one block by default: :data:`KNN_MEMORY_BUDGET` on the CPU, else
    :data:`KNN_MEMORY_BUDGET_ACCELERATOR`."""
    return KNN_MEMORY_BUDGET if torch.device(device).type == "cpu" else KNN_MEMORY_BUDGET_ACCELERATOR


def block_shape(memory_budget: int, chunk_size: int | None = None) -> tuple[int, int]:
    """``(rows, columns)`` of the blocks: ``chunk_size`` rows (``STRIP_ROWS`` by default, fewer when the budget
    cannot hold a column of them) and as many columns as ``memory_budget`` bytes hold (at least one)."""
    rows = chunk_size or max(1, min(STRIP_ROWS, memory_budget // BLOCK_BYTES_PER_ELEMENT))
    return rows, max(1, memory_budget // (BLOCK_BYTES_PER_ELEMENT * rows))


# ------------------------------------------------------------------------------------------ grouping
class _Groups(NamedTuple):
    """Gallery positions grouped by an integer key, and every query's group (its key's), without a Q x G
    comparison: ``order[starts[q] : starts[q] + counts[q]]`` are the gallery positions with query ``q``'s key,
    ascending."""

    order: Tensor
    starts: Tensor
    counts: Tensor


def _group(keys_gallery: Tensor, keys_query: Tensor) -> _Groups:
    sorted_keys, order = torch.sort(keys_gallery, stable=True)
    starts = torch.searchsorted(sorted_keys, keys_query)
    counts = torch.searchsorted(sorted_keys, keys_query, right=True) - starts
    return _Groups(order, starts, counts)


def _expand(groups: _Groups, rows: slice) -> tuple[Tensor, Tensor]:
    """``(row, position)`` pairs of the groups of the queries ``rows``: row (local to ``rows``) ascending,
    then position ascending."""
    starts, counts = groups.starts[rows], groups.counts[rows]
    local = torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)
    first = torch.cumsum(counts, 0) - counts
    offsets = torch.arange(len(local), device=counts.device) - first[local]
    return local, groups.order[starts[local] + offsets]


def ground_truth_ids(
    labels_query: Tensor, labels_gallery: Tensor, keys_query: Tensor, keys_gallery: Tensor
) -> Ragged:
    """Every query's ground truth: the gallery positions with its label, minus those sharing its ignore key
    (itself, its sequence), ascending, on the CPU. Grouped by sorting the gallery's labels once, never by a
    ``Q x G`` comparison.

    Args:
        labels_query: ``[Q]`` integer labels of the queries (coded as the gallery's).
        labels_gallery: ``[G]`` integer labels of the gallery items.
        keys_query: ``[Q]`` ignore keys of the queries.
        keys_gallery: ``[G]`` ignore keys of the gallery items (equal keys: an ignored pair).
    """
    rows, positions = _expand(_group(labels_gallery, labels_query), slice(None))
    keep = keys_gallery[positions] != keys_query[rows]
    rows, positions = rows[keep], positions[keep]
    return Ragged(positions.cpu(), torch.bincount(rows, minlength=len(labels_query)).cpu())


# --------------------------------------------------------------------------------------- the search
def _contiguous_range(ids: Tensor) -> slice | None:
    """``slice(a, b)`` when ``ids`` is ``a, a + 1, ..., b - 1``, else ``None``."""
    if len(ids) == 0:
        return slice(0, 0)
    start = int(ids[0])
    if torch.equal(ids, torch.arange(start, start + len(ids), device=ids.device)):
        return slice(start, start + len(ids))
    return None


def _rows_of(x: Tensor, ids: Tensor) -> Tensor:
    """``x[ids]``, as a view when ``ids`` is a contiguous range (no copy)."""
    span = _contiguous_range(ids)
    return x[span] if span is not None else x[ids]


def _check_embeddings(embeddings: Tensor, name: str) -> Tensor:
    if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
        shape = tuple(embeddings.shape) if isinstance(embeddings, Tensor) else type(embeddings).__name__
        raise ValueError(f"{name} must be a [n, dim] tensor, got {shape}")
    if not embeddings.dtype.is_floating_point:
        embeddings = embeddings.float()
    # every entry is finite when every row's sum is (20x faster to check than isfinite(x).all(1)); a sum that
    # overflows on finite entries is told apart by the exact check, which runs only then
    if bool(torch.isfinite(embeddings.sum(dim=1, dtype=compute_dtype(embeddings.dtype))).all()):
        return embeddings
    finite = torch.isfinite(embeddings).all(dim=1)
    if not bool(finite.all()):
        row = int((~finite).nonzero()[0, 0])
        raise ValueError(f"{name} must be finite, row {row} is not: {embeddings[row][:8].tolist()}")
    return embeddings


@overload
def _per_item(values: Tensor, name: str, n_items: int, device: torch.device) -> Tensor: ...


@overload
def _per_item(values: None, name: str, n_items: int, device: torch.device) -> None: ...


def _per_item(values: Tensor | None, name: str, n_items: int, device: torch.device) -> Tensor | None:
    """``None``, or ``values`` as ``[n_items]`` integer codes (labels, sequence ids): see
    :func:`~oml_core.utils.checks.as_int_tensor`."""
    if values is None:
        return None
    return as_int_tensor(
        values, name, n=n_items, per="embedding", expected="hold integer codes", flatten=True, device=device
    )


class _Block(NamedTuple):
    rows: slice
    cols: slice
    distances: Tensor
    mirrored: bool
    ignored: tuple[Tensor, Tensor]  # (row, column) pairs within the block that are ignored


def _spans(start: int, stop: int, size: int) -> list[slice]:
    return [slice(a, min(a + size, stop)) for a in range(start, stop, size)]


class _RowNames(NamedTuple):
    """How the error messages name a query and a gallery item: their position and the row of the embeddings
    given by the caller that they are."""

    query_rows: Tensor | None  # [Q] the row of every query (None: its position)
    gallery_rows: Tensor | None  # [G] the row of every gallery item (None: its position)
    query_source: str  # the name of the caller's embeddings of the queries
    gallery_source: str

    def query(self, position: int) -> str:
        row = position if self.query_rows is None else int(self.query_rows[position])
        return f"query {position} (row {row} of {self.query_source})"

    def gallery(self, position: int) -> str:
        row = position if self.gallery_rows is None else int(self.gallery_rows[position])
        return f"gallery item {position} (row {row} of {self.gallery_source})"


class _Search:
    """Queries and gallery of one search: embeddings, ignore keys (equal keys: ignored pair), distance and the
    block layout. The queries are ``x_query[ids_query]`` (``x_query`` itself when ``ids_query`` is ``None``),
    gathered strip by strip; the gallery is ``x_gallery`` ``[G, d]``. The distances are computed in
    :func:`compute_dtype` of the gallery's dtype (narrower rows are converted strip by strip, tile by tile);
    ``names`` names the rows in error messages."""

    def __init__(
        self,
        x_query: Tensor,
        ids_query: Tensor | None,
        x_gallery: Tensor,
        keys_query: Tensor,
        keys_gallery: Tensor,
        distance: str,
        chunk_size: int | None,
        memory_budget: int | None,
        symmetric: bool,
        names: _RowNames,
    ) -> None:
        check_int(chunk_size, "chunk_size", allow_none=True)
        check_int(memory_budget, "memory_budget", allow_none=True)
        if x_query.shape[1] != x_gallery.shape[1]:
            raise ValueError(
                f"queries and gallery embeddings differ in dimension: {x_query.shape[1]} != {x_gallery.shape[1]}"
            )
        self.kind = _distance_kind(distance)
        self.distance = distance
        self.dtype = compute_dtype(x_gallery.dtype)
        self.names = names
        self.x_query, self.ids_query, self.x_gallery = x_query, ids_query, x_gallery
        self.keys_query, self.keys_gallery = keys_query, keys_gallery
        self.symmetric = symmetric
        self.n_query = len(x_query) if ids_query is None else len(ids_query)
        self.n_gallery = len(x_gallery)
        self.ignored_groups = _group(keys_gallery, keys_query)
        budget = default_memory_budget(x_gallery.device) if memory_budget is None else memory_budget
        self.strip_rows, self.tile_columns = block_shape(budget, chunk_size)
        self.grow = symmetric and chunk_size is None

    def strips(self) -> list[slice]:
        """Strips of ``strip_rows``; automatic symmetric ones grow from ``SYMMETRIC_FIRST_ROWS``, each as high
        as all the strips above it (see :class:`_RunningTopK`)."""
        if not self.grow:
            return list(iter_chunks(self.n_query, self.strip_rows))
        strips, start = [], 0
        while start < self.n_query:
            rows = min(self.strip_rows, max(SYMMETRIC_FIRST_ROWS, start))
            strips.append(slice(start, min(self.n_query, start + rows)))
            start = strips[-1].stop
        return strips

    def tiles(self, rows: slice) -> list[tuple[slice, bool]]:
        """The ``(columns, mirrored)`` blocks of the strip ``rows``: all the columns, or (symmetric) those of
        the diagonal block and, mirrored, those right of it."""
        if not self.symmetric:
            return [(cols, False) for cols in _spans(0, self.n_gallery, self.tile_columns)]
        diagonal = [(cols, False) for cols in _spans(rows.start, rows.stop, self.tile_columns)]
        return diagonal + [(cols, True) for cols in _spans(rows.stop, self.n_gallery, self.tile_columns)]

    def max_block_elements(self) -> int:
        return min(self.strip_rows, self.n_query) * min(self.tile_columns, self.n_gallery)

    def n_available(self) -> Tensor:
        """``[Q]``: gallery items not ignored for every query."""
        return self.n_gallery - self.ignored_groups.counts

    def gt_ids(self, labels_query: Tensor, labels_gallery: Tensor) -> Ragged:
        """Gallery positions of every query's label, minus the ignored ones, ascending (CPU)."""
        return ground_truth_ids(labels_query, labels_gallery, self.keys_query, self.keys_gallery)

    def _query_rows(self, rows: slice) -> Tensor:
        """The embeddings of the queries ``rows`` (positions), in the search's dtype."""
        x_rows = self.x_query[rows] if self.ids_query is None else self.x_query[self.ids_query[rows]]
        return x_rows.to(self.dtype)

    def _bounded(self, stats: Tensor) -> bool:
        """Whether the raw values of the rows with the statistics ``stats`` are certainly finite (with those of
        any other such rows): then their blocks need no check."""
        return self.kind.bounded is None or bool(self.kind.bounded(stats, self.dtype).all())

    def _check_finite(self, raw: Tensor, rows: slice, cols: slice, ignored: tuple[Tensor, Tensor]) -> None:
        """Raise :class:`NonFiniteDistanceError` naming the first query and gallery item of the block ``raw``
        (queries ``rows``, gallery items ``cols``) whose value is not finite, but for the ``ignored`` pairs."""
        finite = torch.isfinite(raw)
        finite[ignored] = True
        if bool(finite.all()):
            return
        i, j = ((~finite).nonzero()[0]).tolist()
        value = float(raw[i, j])
        largest = (
            float(self._query_rows(slice(rows.start + i, rows.start + i + 1)).abs().max()),
            float(self.x_gallery[cols.start + j].abs().max()),
        )
        raise NonFiniteDistanceError(
            f"the {self.distance} distance between {self.names.query(rows.start + i)} and "
            f"{self.names.gallery(cols.start + j)} is not finite in {_name(self.dtype)} ({value}): the "
            f"embeddings are too large (their largest entries are {largest[0]:g} and {largest[1]:g}); scale "
            "them down, e.g. normalise them"
        )

    def _gallery_stats(self) -> Tensor:
        """The gallery's statistics, in the search's dtype (narrower rows converted chunk by chunk)."""
        x, stats = self.x_gallery, self.kind.stats
        if x.dtype == self.dtype:
            return stats(x)
        if not len(x):
            return x.new_zeros(0, dtype=self.dtype)
        return torch.cat([stats(part.to(self.dtype)) for part in x.split(ROWS_CHUNK)])

    def blocks(self, verbose: bool = False, exact: bool = True) -> Iterator[_Block]:
        """The distance blocks, strip by strip; their tensors live in buffers reused by the next block.
        ``exact=False``: the raw values of the factors' product (squared l2, unclamped) instead of distances.

        Raises:
            NonFiniteDistanceError: a distance is not finite in the search's dtype (checked block by block
                unless the rows' statistics rule it out).
        """
        x_gallery, kind, dtype = self.x_gallery, self.kind, self.dtype
        stats_gallery = self._gallery_stats()
        gallery_bounded = self._bounded(stats_gallery)
        buffer = x_gallery.new_empty(self.max_block_elements(), dtype=dtype)
        factors_buffer: Tensor | None = None
        for rows in tqdm(self.strips(), desc="kNN", disable=not verbose):
            x_rows = self._query_rows(rows)
            stats_rows = kind.stats(x_rows)
            check = not (gallery_bounded and self._bounded(stats_rows))
            factors_rows = kind.factors(x_rows, True, stats_rows)
            if factors_buffer is None:
                factors_buffer = x_gallery.new_empty(
                    min(self.tile_columns, self.n_gallery), factors_rows.shape[1], dtype=dtype
                )
            local, positions = _expand(self.ignored_groups, rows)
            positions, order = torch.sort(positions)
            local = local[order]
            for cols, mirrored in self.tiles(rows):
                n_cols = cols.stop - cols.start
                factors_cols = kind.factors(
                    x_gallery[cols].to(dtype), False, stats_gallery[cols], out=factors_buffer[:n_cols]
                )
                dist = torch.mm(
                    factors_rows, factors_cols.T, out=buffer[: len(x_rows) * n_cols].view(len(x_rows), n_cols)
                )
                bounds = torch.tensor([cols.start, cols.stop], device=positions.device)
                lo, hi = torch.searchsorted(positions, bounds).tolist()
                ignored = (local[lo:hi], positions[lo:hi] - cols.start)
                if check:
                    self._check_finite(dist, rows, cols, ignored)
                if exact:
                    kind.to_distance(dist)
                yield _Block(rows, cols, dist, mirrored, ignored)


def _search_from_ids(
    embeddings: Tensor,
    ids_query: Tensor,
    ids_gallery: Tensor,
    distance: str,
    sequence_ids: Tensor | None,
    chunk_size: int | None,
    memory_budget: int | None,
    symmetric: bool | None,
) -> tuple[_Search, Tensor, Tensor]:
    """The search of ``embeddings[ids_query]`` among ``embeddings[ids_gallery]``, with the validated ids."""
    embeddings = _check_embeddings(embeddings, "embeddings")
    n_items, device = len(embeddings), embeddings.device
    ids_query = check_indices(
        ids_query, "ids_query", n_items, expected="hold integer dataset indices", device=device
    )
    ids_gallery = check_indices(
        ids_gallery, "ids_gallery", n_items, expected="hold integer dataset indices", device=device
    )
    sequence = _per_item(sequence_ids, "sequence_ids", n_items, device)
    identical = len(ids_query) == len(ids_gallery) and torch.equal(ids_query, ids_gallery)
    if symmetric is None:
        symmetric = identical
    elif symmetric and not identical:
        raise ValueError(
            "symmetric=True needs ids_query and ids_gallery to be the same items in the same order"
        )
    keys = torch.arange(n_items, device=device) if sequence is None else sequence
    query_span = _contiguous_range(ids_query)
    search = _Search(
        x_query=embeddings[query_span] if query_span is not None else embeddings,
        ids_query=None if query_span is not None else ids_query,
        x_gallery=_rows_of(embeddings, ids_gallery),
        keys_query=keys[ids_query],
        keys_gallery=keys[ids_gallery],
        distance=distance,
        chunk_size=chunk_size,
        memory_budget=memory_budget,
        symmetric=symmetric,
        names=_RowNames(ids_query, ids_gallery, "embeddings", "embeddings"),
    )
    return search, ids_query, ids_gallery


# ---------------------------------------------------------------------------------- distance blocks
@dataclass(frozen=True)
class DistanceBlock:
    """One block of the query x gallery distance matrix (see :func:`iter_distance_blocks`).

    Attributes:
        query_positions: Rows: positions within ``ids_query``.
        gallery_positions: Columns: positions within ``ids_gallery``.
        distances: ``[rows, cols]`` distances (``l2`` or ``cosine``), in :func:`compute_dtype` of the
            embeddings' dtype (float32 for float16 embeddings).
        ignore: ``[rows, cols]`` bool, ``True`` for the pairs that never count: the same dataset item, or the same
            sequence.
        mirrored: ``True`` when the block ALSO stands for its transpose (the symmetric "1 vs rest" case: rows
            as gallery items, columns as queries, ``distances.T`` / ``ignore.T``); never for diagonal blocks.
    """

    query_positions: slice
    gallery_positions: slice
    distances: Tensor
    ignore: Tensor
    mirrored: bool


def iter_distance_blocks(
    embeddings: Tensor,
    ids_query: Tensor,
    ids_gallery: Tensor,
    distance: str = "l2",
    sequence_ids: Tensor | None = None,
    chunk_size: int | None = None,
    symmetric: bool | None = None,
    memory_budget: int | None = None,
    verbose: bool = False,
) -> Iterator[DistanceBlock]:
    """All the query x gallery distances, one block at a time, each pair exactly once.

    The rows are cut into strips of ``chunk_size`` queries, the columns of a strip into tiles of as many
    gallery items as ``memory_budget`` allows; a block is a strip's tile. General case: the tiles cover the
    whole gallery. Symmetric case (``ids_query`` and ``ids_gallery`` identical: "1 vs rest"): strip ``[a, b)``
    covers the columns from ``a`` on, its tiles of columns ``[a, b)`` form the diagonal block and those right
    of ``b`` are ``mirrored``; nothing left of the diagonal is computed. Every ordered pair ``(query, gallery
    item)`` is covered once: by a block, or by the transpose of a mirrored one. For any query, its gallery
    columns come in increasing order from one block to the next.

    Memory: the embeddings (plus a copy of the gallery's when ``ids_gallery`` is not one contiguous range) and
    one block, ``BLOCK_BYTES_PER_ELEMENT * rows * columns <= memory_budget`` bytes (unless one column of a strip
    exceeds it), plus the factors of one strip and one tile (``[rows + columns, dim + 2]``). The tensors of a
    block live in buffers that the next block reuses: use them (a consumer may modify them in place) before
    asking for the next one.

    Args:
        embeddings: ``[n, dim]`` embeddings of the whole dataset.
        ids_query: ``[Q]`` dataset indices of the queries.
        ids_gallery: ``[G]`` dataset indices of the gallery items.
        distance: ``"l2"`` or ``"cosine"`` (see :func:`get_distance_fn`).
        sequence_ids: ``[n]`` integer sequence ids; pairs of one sequence are ignored.
        chunk_size: Queries per strip (``STRIP_ROWS`` by default, fewer for a tiny budget).
        symmetric: ``None``: symmetric exactly when ``ids_query`` and ``ids_gallery`` are identical; ``False``
            forces full strips; ``True`` requires identical ids.
        memory_budget: Bytes of one block (``None``: :func:`default_memory_budget` of the embeddings' device).
        verbose: Set ``True`` to see a progress bar over strips.

    Raises:
        ValueError: ids out of range, per-item values of the wrong length, non-finite embeddings, an unknown
            distance, a non-positive chunk size or budget, or ``symmetric=True`` with different ids.
        NonFiniteDistanceError: (a ``ValueError``, raised while iterating) a distance that is not finite in
            the dtype it is computed in (see the module's docstring); the message names the query and the
            gallery item.
    """
    search, _, _ = _search_from_ids(
        embeddings, ids_query, ids_gallery, distance, sequence_ids, chunk_size, memory_budget, symmetric
    )
    ignore_buffer = torch.empty(search.max_block_elements(), dtype=torch.bool, device=search.x_gallery.device)
    for block in search.blocks(verbose):
        n_rows, n_cols = block.distances.shape
        ignore = ignore_buffer[: n_rows * n_cols].view(n_rows, n_cols).zero_()
        ignore[block.ignored] = True
        yield DistanceBlock(block.rows, block.cols, block.distances, ignore, block.mirrored)


# ---------------------------------------------------------------------------------------------- kNN
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


class _Candidates(NamedTuple):
    queries: Tensor
    positions: Tensor
    values: Tensor


class _RunningTopK:
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

    def candidates(self, dist: Tensor, row_offset: int, col_offset: int, mirrored: bool) -> list[_Candidates]:
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
            _Candidates(i + row_offset, j + col_offset, v)
            for i, j, v in self._cold_candidates(dist, cold_rows)
        ]
        found += [
            _Candidates(j + col_offset, i + row_offset, v)
            for j, i, v in self._cold_candidates(dist.T, cold_cols)
        ]
        if bound_rows is not None or bound_cols is not None:
            group_mins = _group_minima(dist)
            if bound_rows is not None:
                i, j, v = _not_above(dist, group_mins, bound_rows, per_row=True)
                found.append(_Candidates(i + row_offset, j + col_offset, v))
            if bound_cols is not None:
                i, j, v = _not_above(dist, group_mins, bound_cols, per_row=False)
                found.append(_Candidates(j + col_offset, i + row_offset, v))
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

    def merge(self, found: list[_Candidates]) -> None:
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


class KnnResult(NamedTuple):
    """What :func:`search_knn` finds: :class:`~oml_core.utils.ragged.Ragged` sequences of ``Q`` 1-D CPU
    tensors."""

    #: Sorted (ascending) distances to the retrieved items.
    distances: Ragged
    #: Positions of the retrieved items within the gallery (``0..G-1``); ties by the smaller position.
    retrieved_ids: Ragged
    #: Gallery positions of every query's ground truth, ascending (``None`` without labels).
    gt_ids: Ragged | None
    #: ``[Q]`` int64: the number of gallery items every query could retrieve (``G`` minus the ignored ones).
    n_gallery: Tensor


def _run(search: _Search, top_n: int, verbose: bool) -> tuple[Ragged, Ragged]:
    check_int(top_n, "top_n")
    if search.n_gallery == 0 or search.n_query == 0:
        return Ragged.empty(search.n_query), Ragged.empty(search.n_query, torch.long)
    x = search.x_gallery
    k = min(top_n, search.n_gallery)
    top = _RunningTopK(search.n_query, k, search.n_gallery, search.dtype, x.device)
    for block in search.blocks(verbose, exact=False):
        block.distances[block.ignored] = float("inf")
        found = top.candidates(block.distances, block.rows.start, block.cols.start, block.mirrored)
        if found:
            top.merge(found)
    return top.results(search.kind.to_distance)


def search_knn(
    embeddings: Tensor,
    ids_query: Tensor,
    ids_gallery: Tensor,
    top_n: int,
    labels_gt: Tensor | None = None,
    sequence_ids: Tensor | None = None,
    distance: str = "l2",
    chunk_size: int | None = None,
    memory_budget: int | None = None,
    symmetric: bool | None = None,
    verbose: bool = False,
) -> KnnResult:
    """The ``top_n`` closest gallery items of every query, in memory-bounded blocks (see
    :func:`iter_distance_blocks` for the block layout, the symmetric case and the memory).

    A gallery item is ignored for a query (neither retrieved nor counted as ground truth) when it is the same
    dataset item (``ids_query[i] == ids_gallery[j]``) or, given ``sequence_ids``, when it shares the query's
    sequence, so a query may retrieve fewer than ``top_n`` items. Items at equal distances are ordered by
    gallery position, so the result depends neither on ``chunk_size`` nor on the symmetric shortcut (up to
    float rounding of the distances). The ground truth of query ``q`` (the gallery items of its label minus the
    ignored ones) comes from the gallery positions grouped by label once, never from a ``Q x G`` comparison.

    Args:
        embeddings: ``[n, dim]`` embeddings of the whole dataset.
        ids_query: ``[Q]`` dataset indices of the queries.
        ids_gallery: ``[G]`` dataset indices of the gallery items (may overlap with ``ids_query``).
        top_n: Number of neighbours to keep per query (clipped by the number of available gallery items).
        labels_gt: ``[n]`` integer labels; items of the query's label are its ground truth.
        sequence_ids: ``[n]`` integer sequence ids; items sharing the query's sequence id are ignored.
        distance: ``"l2"`` or ``"cosine"`` (see :func:`get_distance_fn`).
        chunk_size: Queries per strip (see :func:`iter_distance_blocks`).
        memory_budget: Bytes of one block (see :func:`iter_distance_blocks`).
        symmetric: See :func:`iter_distance_blocks` (``None``: automatic).
        verbose: Set ``True`` to see a progress bar over strips.

    Returns:
        The distances in :func:`compute_dtype` of the embeddings' dtype: float32 for float16 or bfloat16
        embeddings (their distances are computed in float32).

    Raises:
        ValueError: see :func:`iter_distance_blocks`; also a ``top_n`` that is not a positive integer.
        NonFiniteDistanceError: (a ``ValueError``) a distance overflows (see the module's docstring); the
            message names the query and the gallery item.
    """
    search, ids_query, ids_gallery = _search_from_ids(
        embeddings, ids_query, ids_gallery, distance, sequence_ids, chunk_size, memory_budget, symmetric
    )
    labels = _per_item(labels_gt, "labels_gt", len(embeddings), search.x_gallery.device)
    distances, retrieved = _run(search, top_n, verbose)
    gt_ids = None if labels is None else search.gt_ids(labels[ids_query], labels[ids_gallery])
    return KnnResult(distances, retrieved, gt_ids, search.n_available().cpu())


def search_knn_qg(
    embeddings_query: Tensor,
    embeddings_gallery: Tensor,
    top_n: int,
    labels_query: Tensor | None = None,
    labels_gallery: Tensor | None = None,
    sequence_query: Tensor | None = None,
    sequence_gallery: Tensor | None = None,
    distance: str = "l2",
    chunk_size: int | None = None,
    memory_budget: int | None = None,
    verbose: bool = False,
) -> KnnResult:
    """:func:`search_knn` for queries and gallery given as two separate sets of embeddings.

    No item is the same as another here; only the pairs sharing a sequence id are ignored (given both
    ``sequence_query`` and ``sequence_gallery``, coded consistently across the two). The ground truth of a
    query is the gallery items of its label (given both label tensors, coded consistently).

    Raises:
        ValueError: labels or sequences given for one side only, or of the wrong length; see
            :func:`search_knn` for the rest.
    """
    x_query = _check_embeddings(embeddings_query, "embeddings_query")
    x_gallery = _check_embeddings(embeddings_gallery, "embeddings_gallery")
    n_query, n_gallery, device = len(x_query), len(x_gallery), x_gallery.device
    if (labels_query is None) != (labels_gallery is None):
        raise ValueError("give both labels_query and labels_gallery, or neither")
    if (sequence_query is None) != (sequence_gallery is None):
        raise ValueError("give both sequence_query and sequence_gallery, or neither")
    if sequence_query is None:  # distinct keys: nothing is ignored
        keys_query = torch.arange(n_query, device=device)
        keys_gallery = torch.arange(n_query, n_query + n_gallery, device=device)
    else:
        assert sequence_gallery is not None  # both or neither, checked above
        keys_query = _per_item(sequence_query, "sequence_query", n_query, device)
        keys_gallery = _per_item(sequence_gallery, "sequence_gallery", n_gallery, device)
    # one dtype for both sides: the wider one (float16 queries of a float32 gallery: float32)
    dtype = torch.promote_types(x_query.dtype, x_gallery.dtype)
    search = _Search(
        x_query.to(device=device, dtype=dtype),
        None,
        x_gallery.to(dtype),
        keys_query,
        keys_gallery,
        distance,
        chunk_size,
        memory_budget,
        False,
        _RowNames(None, None, "embeddings_query", "embeddings_gallery"),
    )
    distances, retrieved = _run(search, top_n, verbose)
    gt_ids = None
    if labels_query is not None:
        assert labels_gallery is not None  # both or neither, checked above
        gt_ids = search.gt_ids(
            _per_item(labels_query, "labels_query", n_query, device),
            _per_item(labels_gallery, "labels_gallery", n_gallery, device),
        )
    return KnnResult(distances, retrieved, gt_ids, search.n_available().cpu())


def _chunk_size_of(bs: int | None, chunk_size: int | None) -> int | None:
    """``chunk_size`` given under OML's name ``bs`` or oml's (not both)."""
    if bs is not None and chunk_size is not None:
        raise TypeError(
            f"give bs (OML's name) or chunk_size, not both: got bs={bs!r}, chunk_size={chunk_size!r}"
        )
    return chunk_size if bs is None else bs


def batched_knn(
    embeddings: Tensor,
    ids_query: Tensor,
    ids_gallery: Tensor,
    top_n: int,
    sequence_ids: Tensor | None = None,
    labels_gt: Tensor | None = None,
    bs: int | None = None,
    verbose: bool = False,
    *,
    distance: str = "l2",
    chunk_size: int | None = None,
    memory_budget: int | None = None,
    symmetric: bool | None = None,
) -> tuple[Ragged, Ragged, Ragged | None]:
    """OML's ``batched_knn``, with OML's positional order (``sequence_ids`` before ``labels_gt``, then ``bs``,
    ``verbose``): ``(distances, retrieved_ids, gt_ids)`` of :func:`search_knn`, whose own order differs
    (``labels_gt`` first). oml's further arguments are keyword-only.

    Args:
        embeddings, ids_query, ids_gallery, top_n, sequence_ids, labels_gt, verbose: As in :func:`search_knn`.
        bs: OML's name of ``chunk_size`` (queries per strip).
        distance, chunk_size, memory_budget, symmetric: As in :func:`search_knn`.

    Raises:
        TypeError: both ``bs`` and ``chunk_size`` are given.
        ValueError: see :func:`search_knn`.
    """
    result = search_knn(
        embeddings,
        ids_query,
        ids_gallery,
        top_n,
        labels_gt=labels_gt,
        sequence_ids=sequence_ids,
        distance=distance,
        chunk_size=_chunk_size_of(bs, chunk_size),
        memory_budget=memory_budget,
        symmetric=symmetric,
        verbose=verbose,
    )
    return result.distances, result.retrieved_ids, result.gt_ids


def _ignore_keys(
    ids: tuple[Tensor | None, Tensor | None], sequences: tuple[Tensor | None, Tensor | None]
) -> tuple[Tensor | None, Tensor | None]:
    """The keys of :func:`batched_knn_qg`'s ignored pairs (equal keys: ignored): the sequence ids when given
    (the ids must then agree with them: one item, one sequence), else the item ids, else none."""
    names = (("ids_query", "ids_gallery"), ("sequence_ids_query", "sequence_ids_gallery"))
    for pair, (name_query, name_gallery) in zip((ids, sequences), names):
        if (pair[0] is None) != (pair[1] is None):
            raise ValueError(f"give both {name_query} and {name_gallery}, or neither")
    if ids[0] is None or sequences[0] is None:
        return sequences if sequences[0] is not None else ids
    item_ids = torch.cat([torch.as_tensor(ids[0]).reshape(-1), torch.as_tensor(ids[1]).reshape(-1)])
    item_sequences = torch.cat([torch.as_tensor(s).reshape(-1) for s in sequences]).to(item_ids.device)
    if len(item_ids) != len(item_sequences):
        raise ValueError("ids_query/ids_gallery and sequence_ids_query/sequence_ids_gallery differ in length")
    order = torch.argsort(item_ids, stable=True)
    same_item = item_ids[order][1:] == item_ids[order][:-1]
    if bool((same_item & (item_sequences[order][1:] != item_sequences[order][:-1])).any()):
        raise ValueError("an item id shared by a query and a gallery item has two different sequence ids")
    return sequences


def batched_knn_qg(
    embeddings_query: Tensor,
    embeddings_gallery: Tensor,
    top_n: int,
    labels_query: Tensor | None = None,
    labels_gallery: Tensor | None = None,
    ids_query: Tensor | None = None,
    ids_gallery: Tensor | None = None,
    sequence_ids_query: Tensor | None = None,
    sequence_ids_gallery: Tensor | None = None,
    bs: int | None = None,
    verbose: bool = False,
    *,
    distance: str = "l2",
    chunk_size: int | None = None,
    memory_budget: int | None = None,
) -> tuple[Ragged, Ragged, Ragged | None]:
    """OML's ``batched_knn_qg``: :func:`search_knn_qg` with OML's arguments and positional order, returning
    ``(distances, retrieved_ids, gt_ids)``.

    A query and a gallery item are ignored for each other when they have the same id (``ids_query[i] ==
    ids_gallery[j]``: the same item on both sides) or the same sequence id.

    Args:
        embeddings_query, embeddings_gallery, top_n, labels_query, labels_gallery, verbose: As in
            :func:`search_knn_qg`.
        ids_query, ids_gallery: Item ids of the two sides (both or neither).
        sequence_ids_query, sequence_ids_gallery: Sequence ids of the two sides (both or neither).
        bs: OML's name of ``chunk_size`` (queries per strip).
        distance, chunk_size, memory_budget: As in :func:`search_knn_qg`.

    Raises:
        TypeError: both ``bs`` and ``chunk_size`` are given.
        ValueError: ids or sequence ids of one side only; one item id with two sequence ids; see
            :func:`search_knn_qg`.
    """
    keys_query, keys_gallery = _ignore_keys(
        (ids_query, ids_gallery), (sequence_ids_query, sequence_ids_gallery)
    )
    result = search_knn_qg(
        embeddings_query,
        embeddings_gallery,
        top_n,
        labels_query=labels_query,
        labels_gallery=labels_gallery,
        sequence_query=keys_query,
        sequence_gallery=keys_gallery,
        distance=distance,
        chunk_size=_chunk_size_of(bs, chunk_size),
        memory_budget=memory_budget,
        verbose=verbose,
    )
    return result.distances, result.retrieved_ids, result.gt_ids


__all__ = [
    "BLOCK_BYTES_PER_ELEMENT",
    "DISTANCES",
    "KNN_MEMORY_BUDGET",
    "DistanceBlock",
    "KnnResult",
    "NonFiniteDistanceError",
    "TDistance",
    "block_shape",
    "compute_dtype",
    "default_memory_budget",
    "batched_knn",
    "batched_knn_qg",
    "get_distance_fn",
    "ground_truth_ids",
    "iter_distance_blocks",
    "search_knn",
    "search_knn_qg",
]
