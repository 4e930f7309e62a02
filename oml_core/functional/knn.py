"""Memory-bounded k-nearest-neighbour search of queries among gallery items.

Distances are computed for a chunk of queries at a time, ``[chunk_size, n_gallery]``, never for all the
queries at once, and only the ``top_n`` closest gallery items of every query are kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch
from torch import FloatTensor, LongTensor, Tensor
from tqdm.auto import tqdm

from oml_core.utils.misc_torch import iter_chunks, pairwise_dist

TDistance = Literal["l2", "cosine"]

#: Default memory budget of one chunk, in elements of the ``[chunk_size, n_gallery]`` distance matrix.
KNN_CHUNK_ELEMENTS = 2**24


def _l2(x1: Tensor, x2: Tensor) -> Tensor:
    return pairwise_dist(x1, x2, p=2)


def _cosine(x1: Tensor, x2: Tensor) -> Tensor:
    x1 = torch.nn.functional.normalize(x1, dim=1)
    x2 = torch.nn.functional.normalize(x2, dim=1)
    return (x1 @ x2.T).neg_().add_(1.0).clamp_(min=0.0, max=2.0)


DISTANCES: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"l2": _l2, "cosine": _cosine}


def get_distance_fn(distance: str) -> Callable[[Tensor, Tensor], Tensor]:
    """The pairwise distance ``f(x1 [n, d], x2 [m, d]) -> [n, m]`` called ``distance``.

    ``"l2"``: Euclidean distance (exact, see :func:`~oml_core.utils.misc_torch.pairwise_dist`);
    ``"cosine"``: ``1 - cos(x1_i, x2_j)``, in ``[0, 2]``.
    """
    try:
        return DISTANCES[distance]
    except KeyError:
        raise ValueError(f"Unknown distance {distance!r}; expected one of {sorted(DISTANCES)}") from None


def auto_chunk_size(n_gallery: int, budget: int = KNN_CHUNK_ELEMENTS) -> int:
    """Number of queries per chunk so that a ``[chunk, n_gallery]`` matrix holds about ``budget`` elements."""
    return max(1, budget // max(n_gallery, 1))


def batched_knn(
    embeddings: Tensor,
    ids_query: LongTensor,
    ids_gallery: LongTensor,
    top_n: int,
    labels_gt: LongTensor | None = None,
    sequence_ids: LongTensor | None = None,
    distance: str = "l2",
    chunk_size: int | None = None,
    verbose: bool = False,
) -> tuple[tuple[FloatTensor, ...], tuple[LongTensor, ...], tuple[LongTensor, ...] | None]:
    """The ``top_n`` closest gallery items of every query, computed in chunks of queries.

    A gallery item is ignored for a query (neither retrieved nor counted as ground truth) when it is the same
    dataset item (``ids_query[i] == ids_gallery[j]``) or, given ``sequence_ids``, when it belongs to the
    query's sequence. So a query may retrieve fewer than ``top_n`` items (the results are ragged).

    Args:
        embeddings: ``[n, dim]`` embeddings of the whole dataset.
        ids_query: ``[Q]`` dataset indices of the queries.
        ids_gallery: ``[G]`` dataset indices of the gallery items (may overlap with ``ids_query``).
        top_n: Number of neighbours to keep per query (clipped by the number of available gallery items).
        labels_gt: ``[n]`` integer labels; items of the query's label are its ground truth.
        sequence_ids: ``[n]`` integer sequence ids; items sharing the query's sequence id are ignored.
        distance: ``"l2"`` or ``"cosine"`` (see :func:`get_distance_fn`).
        chunk_size: Queries per chunk; memory is ``O(chunk_size * G)``. ``None``: :func:`auto_chunk_size`.
        verbose: Set ``True`` to see a progress bar over chunks.

    Returns:
        ``(distances, retrieved_ids, gt_ids)``, each a tuple of ``Q`` 1-D CPU tensors: the sorted (ascending)
        distances to the retrieved items, their positions in the gallery (``0..G-1``), and the gallery
        positions of the query's ground truth in increasing order (``None`` without ``labels_gt``).
    """
    if embeddings.ndim != 2:
        raise ValueError(f"embeddings must be [n, dim], got shape {tuple(embeddings.shape)}")
    if top_n < 1:
        raise ValueError(f"top_n must be positive, got {top_n}")
    dist_fn = get_distance_fn(distance)
    n_items = len(embeddings)
    device = embeddings.device
    ids_query = torch.as_tensor(ids_query, dtype=torch.long).reshape(-1).to(device)
    ids_gallery = torch.as_tensor(ids_gallery, dtype=torch.long).reshape(-1).to(device)
    for name, ids in (("ids_query", ids_query), ("ids_gallery", ids_gallery)):
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= n_items):
            raise ValueError(f"{name} must be dataset indices within [0, {n_items - 1}]")
    for name, values in (("labels_gt", labels_gt), ("sequence_ids", sequence_ids)):
        if values is not None and len(values) != n_items:
            raise ValueError(f"{name} must have one entry per embedding ({n_items}), got {len(values)}")

    n_gallery = len(ids_gallery)
    k = min(top_n, n_gallery)
    chunk_size = auto_chunk_size(n_gallery) if chunk_size is None else chunk_size
    emb_g = embeddings[ids_gallery]
    seq = sequence_ids.to(device) if sequence_ids is not None else None
    labels = labels_gt.to(device) if labels_gt is not None else None
    seq_g = seq[ids_gallery] if seq is not None else None
    labels_g = labels[ids_gallery] if labels is not None else None

    distances: list[Tensor] = []
    retrieved: list[Tensor] = []
    gt_ids: list[Tensor] = []
    chunks = list(iter_chunks(len(ids_query), chunk_size))
    for sl in tqdm(chunks, desc="kNN", disable=not verbose):
        q_ids = ids_query[sl]
        dist = dist_fn(embeddings[q_ids], emb_g)
        ignore = q_ids[:, None] == ids_gallery[None, :]
        if seq is not None:
            ignore |= seq[q_ids][:, None] == seq_g[None, :]
        dist.masked_fill_(ignore, float("inf"))
        top_dist, top_ids = torch.topk(dist, k=k, dim=1, largest=False, sorted=True)
        # ignored items (at +inf) are selected only when fewer than k others exist: drop them
        valid = ~torch.gather(ignore, 1, top_ids)
        counts = valid.sum(dim=1).tolist()
        distances.extend(torch.split(top_dist[valid].cpu(), counts))
        retrieved.extend(torch.split(top_ids[valid].cpu(), counts))
        if labels is not None:
            is_gt = labels[q_ids][:, None] == labels_g[None, :]
            is_gt &= ~ignore
            rows, columns = is_gt.nonzero(as_tuple=True)  # row-major: by query, increasing gallery position
            n_gt = torch.bincount(rows, minlength=len(q_ids)).tolist()
            gt_ids.extend(torch.split(columns.cpu(), n_gt))

    return tuple(distances), tuple(retrieved), (tuple(gt_ids) if labels is not None else None)


__all__ = [
    "DISTANCES",
    "KNN_CHUNK_ELEMENTS",
    "TDistance",
    "auto_chunk_size",
    "batched_knn",
    "get_distance_fn",
]
