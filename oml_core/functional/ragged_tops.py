"""The relevance of ragged retrieval results and the per-query machinery the retrieval metrics share.

For every query ``i``, ``gt_tops[i]`` is a 1-D bool tensor telling which of the items retrieved for it (closest
first) are relevant (:func:`calc_gt_tops`), and ``n_gts[i]`` is the number of relevant items in the gallery.
:func:`per_query` pads the ragged tops into ``[chunk, max_k]`` bool matrices, :data:`METRICS_CHUNK_SIZE`
queries at a time, and runs a metric's vectorised formula on each chunk. The metrics of
:mod:`oml_core.functional.metrics` (OML's), :mod:`oml_core.functional.ranking_metrics` (the other reference
systems') and :mod:`oml_core.functional.fnmr` build on this module, which imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import Tensor
from tqdm.auto import tqdm

from oml_core.utils.checks import as_int_tensor, check_top_k
from oml_core.utils.misc_torch import iter_chunks
from oml_core.utils.ragged import Ragged

#: A (nested) dictionary of metrics: ``{"cmc": {1: value}, ...}``, per category under ``{"OVERALL": ...}``.
TMetricsDict = dict[Any, Any]
#: Number of queries padded and processed together by the retrieval metrics.
METRICS_CHUNK_SIZE = 2**16


class RetrievedIdsNotUniqueError(RuntimeError, ValueError):
    """A query retrieves the same gallery item more than once. A ``RuntimeError`` as OML's "Retrieved ids must
    be unique." (OML code catching it still does) and a ``ValueError`` as oml's other bad inputs."""


def check_unique_retrieved_ids(retrieved_ids: Ragged) -> None:
    """Refuse retrieved ids with a repeat within a query (vectorised: :meth:`Ragged.first_repeat`): a repeated
    relevant item would count twice (``precision@3 = 3`` for the ids ``[0, 0, 0]`` and the ground truth ``[0]``).

    Raises:
        RetrievedIdsNotUniqueError: one line, starting with OML's message and naming the first such query, the
            id it repeats and its first retrieved ids.
    """
    found = retrieved_ids.first_repeat()
    if found is not None:
        query, repeated_id = found
        first = retrieved_ids[query][:10].tolist()
        more = ", ..." if len(retrieved_ids[query]) > 10 else ""
        raise RetrievedIdsNotUniqueError(
            f"Retrieved ids must be unique: query {query} retrieves the id {repeated_id} more than once "
            f"(its retrieved ids: {str(first)[:-1]}{more}])"
        )


def cat_ragged(seqs: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    """Concatenate 1-D tensors of different lengths: ``(flat, lengths)``, ``lengths`` (int64) on the CPU.

    A :class:`~oml_core.utils.ragged.Ragged` is already flat: its ``(values, lengths)`` are returned as they are.

    Raises:
        ValueError: an element is not 1-D; the message names its index.
    """
    ragged = Ragged.from_tensors(seqs)
    return ragged.values, ragged.lengths


def pad_ragged(seqs: Sequence[Tensor], max_len: int | None = None, fill: float = 0) -> tuple[Tensor, Tensor]:
    """Stack 1-D tensors of different lengths into one ``[n, K]`` matrix, without a Python loop for the copy.

    Row ``i`` is ``seqs[i][:K]`` followed by ``fill``; ``K = max(len(s))``, capped at ``max_len`` when given.

    Returns:
        ``(padded, lengths)``: the ``[n, K]`` matrix (dtype of ``torch.cat(seqs)``) and the ``[n]``
        untruncated lengths (int64, on the CPU).

    Raises:
        ValueError: an element is not 1-D; the message names its index.
    """
    ragged = Ragged.from_tensors(seqs)
    return ragged.padded(max_len=max_len, fill=fill), ragged.lengths


def iter_padded_tops(
    gt_tops: Sequence[Tensor], n_gts: Sequence[int] | Tensor, max_k: int, verbose: bool, desc: str
) -> Iterator[tuple[Tensor, Tensor, Tensor]]:
    """Yield ``(tops [c, K] bool, lengths [c] int64, n_gt [c] int64)`` for every chunk of queries, ``K <= max_k``.

    Raises:
        ValueError: ``gt_tops`` and ``n_gts`` of different lengths, or a query with more relevant items among
            its first ``max_k`` than ``n_gts`` says it has (precision or recall above 1: a relevant item retrieved
            twice); the message names the query.
    """
    n_gts_t = as_int_tensor(n_gts, "n_gts")
    if len(gt_tops) != len(n_gts_t):
        raise ValueError(
            f"gt_tops and n_gts must have one entry per query, got {len(gt_tops)} and {len(n_gts_t)}"
        )
    tops_all = Ragged.from_tensors(gt_tops)
    chunks = list(iter_chunks(len(tops_all), METRICS_CHUNK_SIZE))
    for sl in tqdm(chunks, desc=desc, disable=not verbose or len(chunks) < 2):
        chunk = tops_all[sl]
        tops = chunk.padded(max_len=max_k, fill=False).bool()
        n_gt = n_gts_t[sl].to(tops.device)
        n_relevant = tops.sum(dim=1)
        too_many = n_relevant > n_gt
        if bool(too_many.any()):
            i = int(too_many.nonzero()[0, 0])
            raise ValueError(
                f"query {sl.start + i}: {int(n_relevant[i])} of its first {max_k} retrieved items are relevant but "
                f"n_gts[{sl.start + i}] = {int(n_gt[i])} (is a relevant item retrieved more than once?)"
            )
        yield tops, chunk.lengths.to(tops.device), n_gt


def value_at(cumulative: Tensor, k: int) -> Tensor:
    """``cumulative[:, min(k, K) - 1]`` (zeros when ``K == 0``): the running value after ``k`` items."""
    n_cols = cumulative.shape[1]
    if n_cols == 0:
        return torch.zeros(cumulative.shape[0], dtype=cumulative.dtype, device=cumulative.device)
    return cumulative[:, min(k, n_cols) - 1]


def per_query(
    gt_tops: Sequence[Tensor],
    n_gts: Sequence[int] | Tensor,
    top_k: Sequence[int],
    verbose: bool,
    desc: str,
    chunk_fn: Callable[[Tensor, Tensor, Tensor, tuple[int, ...]], list[Tensor]],
    nothing_to_find_value: float | None = 1.0,
) -> list[Tensor]:
    """Run ``chunk_fn(tops, lengths, n_gt, top_k)`` on every padded chunk of queries and concatenate.

    ``chunk_fn`` returns one ``[chunk]`` tensor per ``k``. The queries with ``n_gt == 0`` and nothing
    retrieved get ``nothing_to_find_value`` (OML's perfect answer, ``1``) unless it is ``None``. The output
    is ``float32`` unless ``chunk_fn`` returns integer counts (kept as ``int64``).
    """
    top_k = check_top_k(top_k)
    parts: list[list[Tensor]] = [[] for _ in top_k]
    for tops, lengths, n_gt in iter_padded_tops(gt_tops, n_gts, max(top_k), verbose, desc):
        for part, values in zip(parts, chunk_fn(tops, lengths, n_gt, top_k)):
            if nothing_to_find_value is not None:
                values = values.masked_fill((lengths == 0) & (n_gt == 0), nothing_to_find_value)
            part.append(values.float().cpu() if values.dtype.is_floating_point else values.cpu())
    return [torch.cat(part) if part else torch.zeros(0) for part in parts]


def hits_at(tops: Tensor, ks: Sequence[int]) -> list[Tensor]:
    """Number of relevant items among the first ``k`` of every padded row, for every ``k`` (``int64``)."""
    hits = torch.cumsum(tops, dim=1)
    return [value_at(hits, k) for k in ks]


def precision_at_hits_cumsum(tops: Tensor) -> Tensor:
    """``[n, K]`` running sums of ``P@j * rel_j`` (``P@j``: the fraction of relevant items among the first
    ``j``), in float64: the numerator of OML's map@k and of TF Similarity's mAP@K."""
    hits = torch.cumsum(tops, dim=1).double()
    positions = torch.arange(1, tops.shape[1] + 1, device=tops.device, dtype=torch.float64)
    return torch.cumsum(hits / positions * tops, dim=1)


def _isin_sorted(elements: Tensor, sorted_test: Tensor) -> Tensor:
    """``torch.isin(elements, sorted_test)`` by binary search in the sorted ``sorted_test`` (fast on CPU)."""
    if sorted_test.numel() == 0:
        return torch.zeros_like(elements, dtype=torch.bool)
    position = torch.searchsorted(sorted_test, elements).clamp_(max=sorted_test.numel() - 1)
    return sorted_test[position] == elements


def calc_gt_tops(
    retrieved_ids: Sequence[Tensor], gt_ids: Sequence[Tensor], max_k: int | None = None
) -> Ragged:
    """Mark every retrieved item as relevant or not: ``gt_tops[i][j] = retrieved_ids[i][j] in gt_ids[i]``.

    Only the first ``max_k`` retrieved items of every query are kept (all when ``None``); they must be distinct
    (:func:`check_unique_retrieved_ids`), and so must every query's ground truth ids (checked on the sorted keys
    the membership test needs anyway). Vectorised per chunk of queries with one membership test (binary search)
    on ``query * base + id`` keys.

    Returns:
        A :class:`~oml_core.utils.ragged.Ragged` of ``n_queries`` 1-D bool tensors of lengths
        ``min(len(retrieved_ids[i]), max_k)``.

    Raises:
        RetrievedIdsNotUniqueError: a query retrieves an id twice among its first ``max_k``; the message names it.
        ValueError: inputs of different lengths, a negative id, or a query whose ground truth lists an id twice
            (its ``n_gt`` would count it twice); the message names the query.
    """
    if len(retrieved_ids) != len(gt_ids):
        raise ValueError(
            f"retrieved_ids and gt_ids must have one entry per query, got {len(retrieved_ids)}, {len(gt_ids)}"
        )
    retrieved_all = Ragged.from_tensors(retrieved_ids, torch.long)
    gt_all = Ragged.from_tensors(gt_ids, torch.long)
    if max_k is not None:
        retrieved_all = retrieved_all.truncate(retrieved_all.lengths.clamp(max=max_k))
    check_unique_retrieved_ids(retrieved_all)
    tops_parts: list[Tensor] = []
    for sl in iter_chunks(len(retrieved_all), METRICS_CHUNK_SIZE):
        retrieved, gt = retrieved_all[sl], gt_all[sl]
        r_flat, g_flat = retrieved.values, gt.values.to(retrieved.values.device)
        if (r_flat.numel() and int(r_flat.min()) < 0) or (g_flat.numel() and int(g_flat.min()) < 0):
            raise ValueError("retrieved_ids and gt_ids must be non-negative gallery positions")
        base = int(max(r_flat.max() if r_flat.numel() else 0, g_flat.max() if g_flat.numel() else 0)) + 1
        r_keys = retrieved.row_ids() * base + r_flat
        g_keys = torch.sort(gt.row_ids().to(g_flat.device) * base + g_flat).values
        repeated = (g_keys[1:] == g_keys[:-1]).nonzero()
        if len(repeated):  # a repeated ground truth id would count twice in n_gts = len(gt_ids[i])
            key = int(g_keys[int(repeated[0, 0])])
            raise ValueError(
                f"Ground truth ids must be unique: query {sl.start + key // base} lists the id {key % base} more "
                f"than once"
            )
        tops_parts.append(_isin_sorted(r_keys, g_keys).cpu())
    flat = torch.cat(tops_parts) if tops_parts else torch.zeros(0, dtype=torch.bool)
    return Ragged(flat, retrieved_all.lengths)


__all__ = [
    "METRICS_CHUNK_SIZE",
    "RetrievedIdsNotUniqueError",
    "TMetricsDict",
    "calc_gt_tops",
    "cat_ragged",
    "check_unique_retrieved_ids",
    "hits_at",
    "iter_padded_tops",
    "pad_ragged",
    "per_query",
    "precision_at_hits_cumsum",
    "value_at",
]
