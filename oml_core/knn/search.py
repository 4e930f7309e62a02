"""The exact kNN search: the ``top_n`` nearest gallery items of every query, over the memory-bounded blocks of
:mod:`oml_core.knn.blocks`, with every query's ground truth (:func:`search_knn`, :func:`search_knn_qg`)."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from oml_core.knn.blocks import BlockwiseSearch, RowNames, search_from_ids
from oml_core.knn.inputs import check_embeddings, per_item
from oml_core.knn.top_k import RunningTopK
from oml_core.utils.checks import check_int
from oml_core.utils.ragged import Ragged


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


def _run(search: BlockwiseSearch, top_n: int, verbose: bool) -> tuple[Ragged, Ragged]:
    check_int(top_n, "top_n")
    if search.n_gallery == 0 or search.n_query == 0:
        return Ragged.empty(search.n_query), Ragged.empty(search.n_query, torch.long)
    x = search.x_gallery
    k = min(top_n, search.n_gallery)
    top = RunningTopK(search.n_query, k, search.n_gallery, search.dtype, x.device)
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
    :func:`~oml_core.knn.blocks.iter_distance_blocks` for the block layout, the symmetric case and the memory).

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
        distance: ``"l2"`` or ``"cosine"`` (see :func:`~oml_core.knn.distances.get_distance_fn`).
        chunk_size: Queries per strip (see :func:`~oml_core.knn.blocks.iter_distance_blocks`).
        memory_budget: Bytes of one block (see :func:`~oml_core.knn.blocks.iter_distance_blocks`).
        symmetric: See :func:`~oml_core.knn.blocks.iter_distance_blocks` (``None``: automatic).
        verbose: Set ``True`` to see a progress bar over strips.

    Returns:
        The distances in :func:`~oml_core.knn.distances.compute_dtype` of the embeddings' dtype: float32 for
        float16 or bfloat16 embeddings (their distances are computed in float32).

    Raises:
        ValueError: see :func:`~oml_core.knn.blocks.iter_distance_blocks`; also a ``top_n`` that is not a
            positive integer.
        ~oml_core.knn.distances.NonFiniteDistanceError: (a ``ValueError``) a distance overflows (see
            :mod:`oml_core.knn.distances`); the message names the query and the gallery item.
    """
    search, ids_query, ids_gallery = search_from_ids(
        embeddings, ids_query, ids_gallery, distance, sequence_ids, chunk_size, memory_budget, symmetric
    )
    labels = per_item(labels_gt, "labels_gt", len(embeddings), search.x_gallery.device)
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
    x_query = check_embeddings(embeddings_query, "embeddings_query")
    x_gallery = check_embeddings(embeddings_gallery, "embeddings_gallery")
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
        keys_query = per_item(sequence_query, "sequence_query", n_query, device)
        keys_gallery = per_item(sequence_gallery, "sequence_gallery", n_gallery, device)
    # one dtype for both sides: the wider one (float16 queries of a float32 gallery: float32)
    dtype = torch.promote_types(x_query.dtype, x_gallery.dtype)
    search = BlockwiseSearch(
        x_query.to(device=device, dtype=dtype),
        None,
        x_gallery.to(dtype),
        keys_query,
        keys_gallery,
        distance,
        chunk_size,
        memory_budget,
        False,
        RowNames(None, None, "embeddings_query", "embeddings_gallery"),
    )
    distances, retrieved = _run(search, top_n, verbose)
    gt_ids = None
    if labels_query is not None:
        assert labels_gallery is not None  # both or neither, checked above
        gt_ids = search.gt_ids(
            per_item(labels_query, "labels_query", n_query, device),
            per_item(labels_gallery, "labels_gallery", n_gallery, device),
        )
    return KnnResult(distances, retrieved, gt_ids, search.n_available().cpu())


__all__ = ["KnnResult", "search_knn", "search_knn_qg"]
