"""Exact kNN over a gallery sharded across the processes of a ``torch.distributed`` group.

Each process keeps only its shard of the gallery. Queries travel in chunks: for every chunk of every process's
queries, the owner broadcasts it, every process searches its shard (the core's exact blockwise search, with the
exclusion of :class:`~oml_core.interfaces.knn.IKnnIndex`), and the owner gathers the ``world_size`` local top-k
lists and keeps the ``k`` best by ``(distance, id)``. No process ever holds the whole gallery or a ``Q x G`` block:
memory per process is about ``gallery / world_size`` embeddings plus ``chunk x k x world_size`` candidates.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor

from oml_core.ddp.utils import comm_device, get_rank_safe, get_world_size_safe
from oml_core.interfaces.knn import IKnnIndex, KnnSearchResult
from oml_core.knn.backend_checks import check_k, check_queries
from oml_core.knn.backend_search import knn_result
from oml_core.knn.blocks import STRIP_ROWS
from oml_core.knn.exact import ExactKnnIndex
from oml_core.knn.search import KnnResult
from oml_core.utils.misc_torch import iter_chunks

#: The folder :meth:`ShardedExactKnnIndex.save` writes the shard of process ``rank`` into.
SHARD_FOLDER = "shard_{rank}"


def merge_top_k(distances: Tensor, ids: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` best of every row of candidates by ``(distance, id)``: ascending distance, equal distances by
    the smaller id, padding (``inf``, ``-1``) last. ``distances`` (float) and ``ids`` (int64) are ``[n, m]``; the
    result is ``[n, min(k, m)]``."""
    padding = ids < 0
    by_id = torch.sort(torch.where(padding, torch.iinfo(torch.long).max, ids), dim=1, stable=True).indices
    distances, ids = torch.gather(distances, 1, by_id), torch.gather(ids, 1, by_id)
    by_distance = torch.sort(distances, dim=1, stable=True).indices[:, :k]
    return torch.gather(distances, 1, by_distance), torch.gather(ids, 1, by_distance)


class ShardedExactKnnIndex(IKnnIndex):
    """An exact index whose items are spread over the processes of the default ``torch.distributed`` group:
    every process :meth:`add`-s its own shard, and :meth:`search` is a collective that every process calls with
    its own queries (possibly none) and that returns the exact ``k`` nearest over all the shards.

    The result equals :class:`~oml_core.knn.exact.ExactKnnIndex`'s over the union of the shards
    (ties: the smaller id first, which is the add order when the ids are positions), up to float rounding of
    the distances. Without a process group it is an ``ExactKnnIndex`` of its one shard.

    Args:
        distance: ``"l2"`` or ``"cosine"``.
        chunk_size: Queries per exchanged chunk (``None``: ``STRIP_ROWS``).
        memory_budget: Bytes of one block of the local search (see ``ExactKnnIndex``).
    """

    def __init__(
        self, distance: str = "l2", chunk_size: int | None = None, memory_budget: int | None = None
    ) -> None:
        self.local = ExactKnnIndex(distance, chunk_size, memory_budget)
        self.distance = self.local.distance
        self.chunk_size = chunk_size or STRIP_ROWS

    def __len__(self) -> int:
        """The number of items of this process's shard."""
        return len(self.local)

    def add(self, embeddings: Tensor, ids: Tensor | None = None, groups: Tensor | None = None) -> None:
        """Add items to this process's shard. Give ``ids`` unique across the processes (the default, positions,
        are only unique within the shard)."""
        self.local.add(embeddings, ids, groups)

    def search(self, queries: Tensor, k: int, exclude: Tensor | None = None) -> KnnSearchResult:
        """The ``k`` nearest items over all the shards for this process's ``queries``. Every process of the
        group must call it, each with its own queries (``[Q_r, dim]``, ``Q_r`` may be 0), all with or all
        without ``exclude``.

        Raises:
            ValueError: the processes disagree on ``k``, on the dimension or on giving ``exclude``.
        """
        check_k(k)
        queries = check_queries(queries, None, exclude)
        rank, world_size = get_rank_safe(), get_world_size_safe()
        if world_size == 1:
            return self.local.search(queries, k, exclude)
        device = comm_device()
        mine = torch.tensor([len(queries), queries.shape[1], k, exclude is not None], device=device)
        everyone = [torch.empty_like(mine) for _ in range(world_size)]
        dist.all_gather(everyone, mine)
        shapes = torch.stack(everyone).cpu()
        for column, name in ((1, "dimension"), (2, "k"), (3, "use of exclude")):
            if len(set(shapes[:, column].tolist())) > 1:
                raise ValueError(
                    f"the processes disagree on the {name} of the search: {shapes[:, column].tolist()}"
                )
        dim, with_exclude = int(shapes[0, 1]), bool(shapes[0, 3])
        out_d, out_i = [], []
        for source in range(world_size):
            for rows in iter_chunks(int(shapes[source, 0]), self.chunk_size):
                n = rows.stop - rows.start
                chunk = torch.empty(n, dim, device=device)
                if rank == source:
                    chunk.copy_(queries[rows])
                dist.broadcast(chunk, source)
                keys = None
                if with_exclude:
                    keys = torch.empty(n, dtype=torch.long, device=device)
                    if rank == source:
                        keys.copy_(torch.as_tensor(exclude)[rows])
                    dist.broadcast(keys, source)
                found = self.local.search(chunk.cpu(), k, None if keys is None else keys.cpu())
                merged = self._gather(found, source, rank, world_size, device)
                if merged is not None:
                    out_d.append(merged[0])
                    out_i.append(merged[1])
        if not out_d:
            return KnnSearchResult(torch.empty(0, k), torch.empty(0, k, dtype=torch.long))
        return KnnSearchResult(torch.cat(out_d), torch.cat(out_i))

    def _gather(
        self, found: KnnSearchResult, owner: int, rank: int, world_size: int, device: torch.device
    ) -> tuple[Tensor, Tensor] | None:
        """Gather every process's local top-k of a chunk in its ``owner``, which merges them (others: None)."""
        distances, ids = found.distances.to(device), found.ids.to(device)
        lists_d = [torch.empty_like(distances) for _ in range(world_size)] if rank == owner else None
        lists_i = [torch.empty_like(ids) for _ in range(world_size)] if rank == owner else None
        dist.gather(distances, lists_d, dst=owner)
        dist.gather(ids, lists_i, dst=owner)
        if rank != owner:
            return None
        assert lists_d is not None and lists_i is not None
        k = distances.shape[1]
        return merge_top_k(torch.cat(lists_d, 1).cpu(), torch.cat(lists_i, 1).cpu(), k)

    def save(self, folder: str | Path) -> None:
        """Write this process's shard into ``folder/shard_<rank>`` (an ``ExactKnnIndex``)."""
        self.local.save(Path(folder) / SHARD_FOLDER.format(rank=get_rank_safe()))

    @classmethod
    def load(cls, folder: str | Path) -> ShardedExactKnnIndex:
        """Read this process's shard from ``folder/shard_<rank>``."""
        local = ExactKnnIndex.load(Path(folder) / SHARD_FOLDER.format(rank=get_rank_safe()))
        index = cls(local.distance, local.chunk_size, local.memory_budget)
        index.local = local
        return index


def search_sharded(
    local_ids: Tensor,
    local_embeddings: Tensor,
    ids_query: Tensor,
    ids_gallery: Tensor,
    top_n: int,
    labels_gt: Tensor | None = None,
    sequence_ids: Tensor | None = None,
    distance: str = "l2",
    chunk_size: int | None = None,
) -> KnnResult:
    """:func:`~oml_core.knn.search.search_knn` over embeddings spread across the processes, in every process.

    Every process gives the dataset indices ``local_ids`` it holds and their ``local_embeddings``; the processes'
    indices are disjoint and together cover the queries and the gallery. The gallery stays sharded
    (:class:`ShardedExactKnnIndex`); each process searches for its own queries, and the ``[Q, k]`` results (not the
    embeddings) are all-gathered, so every process returns the same result, that of ``search_knn`` on the whole
    set: a query never retrieves itself or an item of its sequence, ties by gallery position. ``ids_query``,
    ``ids_gallery``, ``labels_gt`` and ``sequence_ids`` are over the whole dataset, as in ``search_knn``.
    """
    n_items = int(max(ids_query.max(), ids_gallery.max())) + 1
    if labels_gt is not None:
        n_items = max(n_items, len(labels_gt))
    keys = torch.arange(n_items) if sequence_ids is None else torch.as_tensor(sequence_ids).long().cpu()
    gallery_position = torch.full((len(keys),), -1, dtype=torch.long)
    gallery_position[ids_gallery] = torch.arange(len(ids_gallery))
    query_position = torch.full((len(keys),), -1, dtype=torch.long)
    query_position[ids_query] = torch.arange(len(ids_query))
    local_ids = torch.as_tensor(local_ids).long().cpu()
    local_embeddings = local_embeddings.detach().float().cpu()

    index = ShardedExactKnnIndex(distance, chunk_size)
    in_gallery = gallery_position[local_ids] >= 0
    index.add(
        local_embeddings[in_gallery], gallery_position[local_ids[in_gallery]], keys[local_ids[in_gallery]]
    )
    k = min(check_k(top_n), max(len(ids_gallery), 1))
    is_query = query_position[local_ids] >= 0
    found = index.search(local_embeddings[is_query], k, exclude=keys[local_ids[is_query]])
    positions, distances, ids = _all_gathered(query_position[local_ids[is_query]], found)
    order = torch.argsort(positions)
    if not torch.equal(positions[order], torch.arange(len(ids_query))):
        raise ValueError(
            f"the processes hold {len(positions)} query rows for {len(ids_query)} queries: every query must be "
            f"held by exactly one process"
        )
    return knn_result(distances[order], ids[order], ids_query, ids_gallery, keys, labels_gt)


def _all_gathered(positions: Tensor, found: KnnSearchResult) -> tuple[Tensor, Tensor, Tensor]:
    """Every process's ``(query positions, distances, ids)`` rows, concatenated in rank order, in every process."""
    world_size = get_world_size_safe()
    if world_size == 1:
        return positions, found.distances, found.ids
    device = comm_device()
    counts = [torch.zeros(1, dtype=torch.long, device=device) for _ in range(world_size)]
    dist.all_gather(counts, torch.tensor([len(positions)], device=device))
    longest = max(int(c) for c in counts)
    k = found.ids.shape[1]

    def gather(x: Tensor, fill: float) -> list[Tensor]:
        padded = torch.full((longest, *x.shape[1:]), fill, dtype=x.dtype, device=device)
        padded[: len(x)] = x.to(device)
        parts = [torch.empty_like(padded) for _ in range(world_size)]
        dist.all_gather(parts, padded)
        return [part[: int(count)].cpu() for part, count in zip(parts, counts)]

    found_d = found.distances.reshape(-1, k)
    return (
        torch.cat(gather(positions, -1)),
        torch.cat(gather(found_d, float("inf"))),
        torch.cat(gather(found.ids.reshape(-1, k), -1)),
    )


__all__ = ["SHARD_FOLDER", "ShardedExactKnnIndex", "merge_top_k", "search_sharded"]
