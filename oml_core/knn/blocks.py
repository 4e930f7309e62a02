"""The query x gallery distance matrix in memory-bounded blocks (:func:`iter_distance_blocks`), on which the
kNN search (:mod:`oml_core.knn.search`) and the FNMR over all the pairs stand.

The distance matrix ``[Q, G]`` is never held whole. It is computed block by block: strips of ``chunk_size``
queries, each cut into tiles of columns sized from a memory budget (small enough to stay in the CPU cache),
every block by one matrix multiply of "factors" that give the distances directly
(:func:`~oml_core.utils.misc_torch.l2_factors`) into a reused buffer. Every consumer (the top-k of
:func:`~oml_core.knn.search.search_knn`, the FNMR over all the pairs) looks at one block at a time.

When the queries and the gallery are the same items (the "1 vs rest" protocol), the matrix is symmetric and
only its upper-triangular part is computed: strip ``[a, b)`` covers the columns from ``a`` on; its blocks
right of the diagonal stand for their transposes too (*mirrored* blocks), so the multiply is halved.

A gallery item is *ignored* for a query (never retrieved, never a ground truth, never a pair) when it is the
same dataset item or, given sequence ids, when it shares the query's sequence.

The distances are computed in :func:`~oml_core.knn.distances.compute_dtype` of the embeddings, strip by strip
and tile by tile; the blocks are checked for overflow whenever the rows' statistics do not rule it out, which
costs nothing for embeddings of ordinary magnitude (:class:`~oml_core.knn.distances.NonFiniteDistanceError`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor
from tqdm.auto import tqdm

from oml_core.knn.distances import NonFiniteDistanceError, compute_dtype, distance_kind, dtype_name
from oml_core.knn.groups import expand_groups, ground_truth_ids, group_by_key
from oml_core.knn.inputs import check_embeddings, per_item
from oml_core.utils.checks import check_indices, check_int
from oml_core.utils.misc_torch import ROWS_CHUNK, iter_chunks
from oml_core.utils.ragged import Ragged

#: Default memory budget of one block (its distances and ignore flags), in bytes, on the CPU: a block that
#: stays in the cache is faster to compute and to scan, and no fresh memory is touched block after block.
KNN_MEMORY_BUDGET = 2**24  # 16 MiB
#: Default memory budget of one block on other devices (GPUs), where bigger blocks mean fewer launches.
KNN_MEMORY_BUDGET_ACCELERATOR = 2**30
#: Bytes per element of a block: a float32 distance and a bool ignore flag.
BLOCK_BYTES_PER_ELEMENT = 5
#: Default queries per strip (the rows of the matrix multiplies).
STRIP_ROWS = 1024
#: Rows of the first strip of an automatic symmetric search; the next ones double up to ``STRIP_ROWS``: the
#: first strip's columns have no threshold yet (all taken by ``torch.topk``), and a strip as high as all the
#: strips above it lets about ``k`` entries per column pass the thresholds.
SYMMETRIC_FIRST_ROWS = 512


def default_memory_budget(device: torch.device) -> int:
    """Bytes of one block by default: :data:`KNN_MEMORY_BUDGET` on the CPU, else
    :data:`KNN_MEMORY_BUDGET_ACCELERATOR`."""
    return KNN_MEMORY_BUDGET if torch.device(device).type == "cpu" else KNN_MEMORY_BUDGET_ACCELERATOR


def block_shape(memory_budget: int, chunk_size: int | None = None) -> tuple[int, int]:
    """``(rows, columns)`` of the blocks: ``chunk_size`` rows (``STRIP_ROWS`` by default, fewer when the budget
    cannot hold a column of them) and as many columns as ``memory_budget`` bytes hold (at least one)."""
    rows = chunk_size or max(1, min(STRIP_ROWS, memory_budget // BLOCK_BYTES_PER_ELEMENT))
    return rows, max(1, memory_budget // (BLOCK_BYTES_PER_ELEMENT * rows))


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


class _Block(NamedTuple):
    rows: slice
    cols: slice
    distances: Tensor
    mirrored: bool
    ignored: tuple[Tensor, Tensor]  # (row, column) pairs within the block that are ignored


def _spans(start: int, stop: int, size: int) -> list[slice]:
    return [slice(a, min(a + size, stop)) for a in range(start, stop, size)]


class RowNames(NamedTuple):
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


class BlockwiseSearch:
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
        names: RowNames,
    ) -> None:
        check_int(chunk_size, "chunk_size", allow_none=True)
        check_int(memory_budget, "memory_budget", allow_none=True)
        if x_query.shape[1] != x_gallery.shape[1]:
            raise ValueError(
                f"queries and gallery embeddings differ in dimension: {x_query.shape[1]} != {x_gallery.shape[1]}"
            )
        self.kind = distance_kind(distance)
        self.distance = distance
        self.dtype = compute_dtype(x_gallery.dtype)
        self.names = names
        self.x_query, self.ids_query, self.x_gallery = x_query, ids_query, x_gallery
        self.keys_query, self.keys_gallery = keys_query, keys_gallery
        self.symmetric = symmetric
        self.n_query = len(x_query) if ids_query is None else len(ids_query)
        self.n_gallery = len(x_gallery)
        self.ignored_groups = group_by_key(keys_gallery, keys_query)
        budget = default_memory_budget(x_gallery.device) if memory_budget is None else memory_budget
        self.strip_rows, self.tile_columns = block_shape(budget, chunk_size)
        self.grow = symmetric and chunk_size is None

    def strips(self) -> list[slice]:
        """Strips of ``strip_rows``; automatic symmetric ones grow from ``SYMMETRIC_FIRST_ROWS``, each as high
        as all the strips above it (see :class:`~oml_core.knn.top_k.RunningTopK`)."""
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
            f"{self.names.gallery(cols.start + j)} is not finite in {dtype_name(self.dtype)} ({value}): the "
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
            local, positions = expand_groups(self.ignored_groups, rows)
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


def search_from_ids(
    embeddings: Tensor,
    ids_query: Tensor,
    ids_gallery: Tensor,
    distance: str,
    sequence_ids: Tensor | None,
    chunk_size: int | None,
    memory_budget: int | None,
    symmetric: bool | None,
) -> tuple[BlockwiseSearch, Tensor, Tensor]:
    """The search of ``embeddings[ids_query]`` among ``embeddings[ids_gallery]``, with the validated ids."""
    embeddings = check_embeddings(embeddings, "embeddings")
    n_items, device = len(embeddings), embeddings.device
    ids_query = check_indices(
        ids_query, "ids_query", n_items, expected="hold integer dataset indices", device=device
    )
    ids_gallery = check_indices(
        ids_gallery, "ids_gallery", n_items, expected="hold integer dataset indices", device=device
    )
    sequence = per_item(sequence_ids, "sequence_ids", n_items, device)
    identical = len(ids_query) == len(ids_gallery) and torch.equal(ids_query, ids_gallery)
    if symmetric is None:
        symmetric = identical
    elif symmetric and not identical:
        raise ValueError(
            "symmetric=True needs ids_query and ids_gallery to be the same items in the same order"
        )
    keys = torch.arange(n_items, device=device) if sequence is None else sequence
    query_span = _contiguous_range(ids_query)
    search = BlockwiseSearch(
        x_query=embeddings[query_span] if query_span is not None else embeddings,
        ids_query=None if query_span is not None else ids_query,
        x_gallery=_rows_of(embeddings, ids_gallery),
        keys_query=keys[ids_query],
        keys_gallery=keys[ids_gallery],
        distance=distance,
        chunk_size=chunk_size,
        memory_budget=memory_budget,
        symmetric=symmetric,
        names=RowNames(ids_query, ids_gallery, "embeddings", "embeddings"),
    )
    return search, ids_query, ids_gallery


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
        distance: ``"l2"`` or ``"cosine"`` (see :func:`~oml_core.knn.distances.get_distance_fn`).
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
    search, _, _ = search_from_ids(
        embeddings, ids_query, ids_gallery, distance, sequence_ids, chunk_size, memory_budget, symmetric
    )
    ignore_buffer = torch.empty(search.max_block_elements(), dtype=torch.bool, device=search.x_gallery.device)
    for block in search.blocks(verbose):
        n_rows, n_cols = block.distances.shape
        ignore = ignore_buffer[: n_rows * n_cols].view(n_rows, n_cols).zero_()
        ignore[block.ignored] = True
        yield DistanceBlock(block.rows, block.cols, block.distances, ignore, block.mirrored)


__all__ = [
    "BLOCK_BYTES_PER_ELEMENT",
    "KNN_MEMORY_BUDGET",
    "KNN_MEMORY_BUDGET_ACCELERATOR",
    "STRIP_ROWS",
    "SYMMETRIC_FIRST_ROWS",
    "BlockwiseSearch",
    "DistanceBlock",
    "RowNames",
    "block_shape",
    "default_memory_budget",
    "iter_distance_blocks",
    "search_from_ids",
]
