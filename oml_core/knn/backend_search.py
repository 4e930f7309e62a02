"""kNN search through any knn backend (kind ``knn_backend``): an empty index of a registered name or spec
(:func:`make_knn_index`), and :func:`~oml_core.knn.search.search_knn`'s result computed by it, ground truth and
exclusion included (:func:`search_with_index`, :func:`search_with_index_qg`).

A backend is an :class:`~oml_core.interfaces.knn.IKnnIndex` registered under the ``knn_backend`` kind
(``oml_register_knn_backends``); the core registers :class:`~oml_core.knn.exact.ExactKnnIndex` as ``exact``, the
oml-faiss plugin adds faiss's indexes. :meth:`RetrievalResults.from_embeddings
<oml_core.retrieval.RetrievalResults.from_embeddings>` and ``EmbeddingMetrics`` take one by config
(``knn_backend: {name: ..., args: {...}}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from oml_core.interfaces.knn import IKnnIndex
from oml_core.knn.backend_checks import check_k
from oml_core.knn.groups import ground_truth_ids, group_sizes
from oml_core.knn.search import KnnResult
from oml_core.utils.ragged import Ragged

if TYPE_CHECKING:
    from oml_core.registry import Registry


def make_knn_index(
    backend: IKnnIndex | Mapping[str, Any] | str, distance: str, registry: Registry | None = None
) -> IKnnIndex:
    """An empty index of ``backend``: a registered name, a ``{name, args}`` spec (built by ``registry``,
    ``default_registry()`` if ``None``, with ``distance`` filled in when its args lack it) or an empty
    :class:`IKnnIndex` instance.

    Raises:
        ValueError: an index whose distance is not ``distance``, or an instance that already holds items.
    """
    if isinstance(backend, IKnnIndex):
        index = backend
    else:
        if registry is None:
            from oml_core.registry import default_registry

            registry = default_registry()
        spec: dict[str, Any] = {"name": backend, "args": {}} if isinstance(backend, str) else dict(backend)
        args = dict(spec.get("args") or {})
        args.setdefault("distance", distance)
        index = registry.build("knn_backend", {"name": spec["name"], "args": args})
    if index.distance != distance:
        raise ValueError(
            f"the knn backend searches by {index.distance!r} distance, the retrieval by {distance!r}"
        )
    if len(index):
        raise ValueError(f"the knn backend must be given empty, it holds {len(index)} items")
    return index


def search_with_index(
    index: IKnnIndex,
    embeddings: Tensor,
    ids_query: Tensor,
    ids_gallery: Tensor,
    top_n: int,
    labels_gt: Tensor | None = None,
    sequence_ids: Tensor | None = None,
) -> KnnResult:
    """:func:`~oml_core.knn.search.search_knn` through a knn backend: the gallery rows are added to the empty
    ``index`` (ids: gallery positions; groups: the ignore keys) and the query rows searched with their keys
    excluded. The ignore key of an item is its sequence id when ``sequence_ids`` is given, else its dataset
    index, as in ``search_knn``: a query never retrieves itself nor an item of its sequence, and neither counts
    as its ground truth. An exact backend gives ``search_knn``'s result (up to float rounding of the distances).
    """
    n_gallery = len(ids_gallery)
    keys = (
        torch.arange(len(embeddings)) if sequence_ids is None else torch.as_tensor(sequence_ids).long().cpu()
    )
    index.add(embeddings[ids_gallery], ids=torch.arange(n_gallery), groups=keys[ids_gallery])
    k = min(check_k(top_n), max(n_gallery, 1))
    found = index.search(embeddings[ids_query], k, exclude=keys[ids_query])
    return knn_result(found.distances, found.ids, ids_query, ids_gallery, keys, labels_gt)


def search_with_index_qg(
    index: IKnnIndex,
    embeddings_query: Tensor,
    embeddings_gallery: Tensor,
    top_n: int,
    labels_query: Tensor | None = None,
    labels_gallery: Tensor | None = None,
    sequence_query: Tensor | None = None,
    sequence_gallery: Tensor | None = None,
) -> KnnResult:
    """:func:`~oml_core.knn.search.search_knn_qg` through a knn backend: the gallery is added to the empty
    ``index`` (ids: gallery positions; groups: the sequence ids) and the queries searched with their sequence
    ids excluded. Queries and gallery are separate sets, so without sequences nothing is excluded (every item is
    its own group). Labels and sequence ids are codes comparable across the two sets; the ground truth of a query
    is the gallery items of its label but those of its sequence."""
    n_query, n_gallery = len(embeddings_query), len(embeddings_gallery)
    if sequence_query is None or sequence_gallery is None:
        keys = torch.arange(n_query + n_gallery)
    else:
        keys = torch.cat([torch.as_tensor(sequence_query), torch.as_tensor(sequence_gallery)]).long().cpu()
    labels = None
    if labels_query is not None and labels_gallery is not None:
        labels = torch.cat([torch.as_tensor(labels_query), torch.as_tensor(labels_gallery)]).long().cpu()
    ids_query, ids_gallery = torch.arange(n_query), n_query + torch.arange(n_gallery)
    index.add(embeddings_gallery, ids=torch.arange(n_gallery), groups=keys[ids_gallery])
    found = index.search(embeddings_query, min(check_k(top_n), max(n_gallery, 1)), exclude=keys[ids_query])
    return knn_result(found.distances, found.ids, ids_query, ids_gallery, keys, labels)


def knn_result(
    distances: Tensor,
    ids: Tensor,
    ids_query: Tensor,
    ids_gallery: Tensor,
    keys: Tensor,
    labels_gt: Tensor | None = None,
) -> KnnResult:
    """The :class:`~oml_core.knn.search.KnnResult` of ``[Q, k]`` padded search rows (``inf``/``-1`` after the
    found items; ids: gallery positions): the found items as ragged rows, the ground truth of every query (the
    gallery items of its label in ``labels_gt`` but those of its ignore key, ``None`` without labels) and the
    number of gallery items it could retrieve (``G`` minus those of its key). ``keys[i]`` is the ignore key of
    dataset item ``i`` (its sequence id, or its index)."""
    keys_query, keys_gallery = keys[ids_query], keys[ids_gallery]
    valid = ids >= 0  # a prefix of every row
    counts = valid.sum(dim=1)
    gt_ids = None
    if labels_gt is not None:
        labels = torch.as_tensor(labels_gt).long().cpu()
        gt_ids = ground_truth_ids(labels[ids_query], labels[ids_gallery], keys_query, keys_gallery)
    return KnnResult(
        Ragged(distances[valid], counts),
        Ragged(ids[valid], counts),
        gt_ids,
        len(ids_gallery) - group_sizes(keys_gallery, keys_query),
    )


__all__ = ["knn_result", "make_knn_index", "search_with_index", "search_with_index_qg"]
