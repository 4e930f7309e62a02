"""The core's exact knn backend, registered as ``exact``: the blockwise search of :mod:`oml_core.knn.search`
over the added embeddings, with the exclusion inside the search (no over-fetch)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from oml_core.interfaces.knn import IKnnIndex, KnnSearchResult
from oml_core.knn.appended_rows import AppendedRows
from oml_core.knn.backend_checks import (
    check_added,
    check_distance,
    check_k,
    check_queries,
    kept_after_removal,
    load_index_state,
)
from oml_core.knn.exclusion import empty_rows, pad_to, ragged_to_padded
from oml_core.knn.search import search_knn_qg
from oml_core.utils.atomic import atomic_torch_save

#: The file an index saved by :class:`ExactKnnIndex` keeps everything in.
EXACT_INDEX_FILE = "exact_index.pt"
#: The format tag of that file.
EXACT_INDEX_FORMAT = "oml-knn-exact"


class ExactKnnIndex(IKnnIndex):
    """The core's exact backend: the memory-bounded blockwise search of
    :func:`~oml_core.knn.search.search_knn_qg` over the added embeddings, with exclusion inside the search
    (no over-fetch). Neighbours at equal distances are ordered by the order they were added.

    Args:
        distance: ``"l2"`` or ``"cosine"``.
        chunk_size: Queries per block (``None``: ``STRIP_ROWS``).
        memory_budget: Bytes of one block of distances (``None``: 16 MiB on the CPU, 1 GiB on accelerators).
    """

    def __init__(
        self, distance: str = "l2", chunk_size: int | None = None, memory_budget: int | None = None
    ) -> None:
        self.distance = check_distance(distance)
        self.chunk_size, self.memory_budget = chunk_size, memory_budget
        self._embeddings = AppendedRows(torch.empty(0, 0))
        self._ids = AppendedRows(torch.empty(0, dtype=torch.long))
        self._groups = AppendedRows(torch.empty(0, dtype=torch.long))

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def embeddings(self) -> Tensor:
        """``[n, dim]``: every embedding added, in add order."""
        return self._embeddings.rows

    @property
    def ids(self) -> Tensor:
        """``[n]`` int64 ids of the items, in add order."""
        return self._ids.rows

    @property
    def groups(self) -> Tensor:
        """``[n]`` int64 exclusion groups of the items, in add order."""
        return self._groups.rows

    def add(self, embeddings: Tensor, ids: Tensor | None = None, groups: Tensor | None = None) -> None:
        embeddings, ids, groups = check_added(embeddings, ids, groups, len(self), self._dim())
        self._embeddings.append(embeddings)
        self._ids.append(ids)
        self._groups.append(groups)

    def _dim(self) -> int | None:
        return self._embeddings.width

    def remove(self, ids: Tensor) -> None:
        """Remove the items of ``ids`` (see :meth:`IKnnIndex.remove`): the others keep their order."""
        kept = kept_after_removal(self.ids, ids)
        for rows in (self._embeddings, self._ids, self._groups):
            rows.keep(kept)

    def search(self, queries: Tensor, k: int, exclude: Tensor | None = None) -> KnnSearchResult:
        check_k(k)
        queries = check_queries(queries, self._dim(), exclude)
        if not len(self):
            d, p = pad_to(*empty_rows(len(queries)), k)
            return KnnSearchResult(d.float(), p)
        n_query = len(queries)
        if exclude is None:  # keys no gallery item has
            exclude_keys = torch.full((n_query,), -1, dtype=torch.long)
            groups = torch.zeros(len(self), dtype=torch.long)
        else:
            exclude_keys, groups = _codes_together(exclude.long(), self.groups)
        result = search_knn_qg(
            queries,
            self.embeddings,
            top_n=k,
            sequence_query=exclude_keys,
            sequence_gallery=groups,
            distance=self.distance,
            chunk_size=self.chunk_size,
            memory_budget=self.memory_budget,
        )
        distances, positions = ragged_to_padded(result.distances, result.retrieved_ids, k)
        return KnnSearchResult(distances.float(), self.ids_of(positions))

    def ids_of(self, positions: Tensor) -> Tensor:
        """The ids of the items at ``positions`` (``-1`` stays ``-1``)."""
        return torch.where(positions >= 0, self.ids[positions.clamp(min=0)], positions)

    def save(self, folder: str | Path) -> None:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        state = {
            "format": EXACT_INDEX_FORMAT,
            "version": 1,
            "distance": self.distance,
            "chunk_size": self.chunk_size,
            "memory_budget": self.memory_budget,
            "embeddings": self.embeddings,
            "ids": self.ids,
            "groups": self.groups,
        }
        atomic_torch_save(state, folder / EXACT_INDEX_FILE)

    @classmethod
    def load(cls, folder: str | Path) -> ExactKnnIndex:
        path = Path(folder) / EXACT_INDEX_FILE
        state = load_index_state(path, EXACT_INDEX_FORMAT)
        index = cls(state["distance"], state["chunk_size"], state["memory_budget"])
        if len(state["ids"]):
            index.add(state["embeddings"], state["ids"], state["groups"])
        return index


def _codes_together(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` as non-negative codes of one coding (equal values, equal codes)."""
    _, codes = torch.unique(torch.cat([a, b]), return_inverse=True)
    return codes[: len(a)], codes[len(a) :]


__all__ = ["EXACT_INDEX_FILE", "EXACT_INDEX_FORMAT", "ExactKnnIndex"]
