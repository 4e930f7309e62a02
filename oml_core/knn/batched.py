"""OML's ``batched_knn`` and ``batched_knn_qg`` (``oml.functional.knn``), with OML's arguments and positional
order, over the exact search of :mod:`oml_core.knn.search`. OML's path ``oml_core.functional.knn`` gives them
(:mod:`oml_core.compat.modules`)."""

from __future__ import annotations

import torch
from torch import Tensor

from oml_core.knn.search import search_knn, search_knn_qg
from oml_core.utils.ragged import Ragged


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


__all__ = ["batched_knn", "batched_knn_qg"]
