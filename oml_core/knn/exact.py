"""The core's exact knn backend, registered as ``exact``: the blockwise search of :mod:`oml_core.knn.search`
over the added embeddings, with the exclusion inside the search (no over-fetch).

Its save (version 2) is ``exact_index.pt`` (its distance, search settings, ids, groups, and the shape and sha256
of its embeddings) beside ``embeddings.npy`` (the embeddings, float32), which a load opens memory-mapped
(:mod:`oml_core.utils.mapped_rows`): an index larger than the machine's memory opens and searches, block by
block. A save of version 1 (the embeddings inside ``exact_index.pt``) loads as before, into memory."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor

from oml_core.interfaces.knn import IKnnIndex, KnnSearchResult
from oml_core.knn.appended_rows import AppendedItems, AppendedRows
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
from oml_core.utils.mapped_rows import open_rows, write_rows

#: The file an index saved by :class:`ExactKnnIndex` keeps everything in.
EXACT_INDEX_FILE = "exact_index.pt"
#: The format tag of that file.
EXACT_INDEX_FORMAT = "oml-knn-exact"
#: The file beside it that holds the embeddings (version 2).
EXACT_EMBEDDINGS_FILE = "embeddings.npy"
#: The version of the save this code writes (1: the embeddings inside :data:`EXACT_INDEX_FILE`).
EXACT_INDEX_VERSION = 2


class ExactKnnIndex(AppendedItems, IKnnIndex):
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

    @property
    def embeddings(self) -> Tensor:
        """``[n, dim]``: every embedding added, in add order."""
        return self._embeddings.rows

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
        """Write :data:`EXACT_INDEX_FILE` and :data:`EXACT_EMBEDDINGS_FILE` into ``folder`` (created if needed)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        embeddings = self.embeddings
        state = {
            "format": EXACT_INDEX_FORMAT,
            "version": EXACT_INDEX_VERSION,
            "distance": self.distance,
            "chunk_size": self.chunk_size,
            "memory_budget": self.memory_budget,
            "shape": list(embeddings.shape),
            "embeddings_sha256": write_rows(folder / EXACT_EMBEDDINGS_FILE, embeddings),
            "ids": self.ids,
            "groups": self.groups,
        }
        atomic_torch_save(state, folder / EXACT_INDEX_FILE)

    @classmethod
    def load(cls, folder: str | Path) -> ExactKnnIndex:
        """Read an index written by :meth:`save`: its embeddings memory-mapped, read-only (a change of the
        index works on a copy; the files are never written).

        Raises:
            FileNotFoundError: no :data:`EXACT_INDEX_FILE` in ``folder``.
            ValueError: a file that is not what :meth:`save` writes (another format, corrupt, embeddings of
                another digest or shape than the state records); the message names the file.
        """
        path = Path(folder) / EXACT_INDEX_FILE
        state = load_index_state(path, EXACT_INDEX_FORMAT)
        index = cls(state["distance"], state["chunk_size"], state["memory_budget"])
        if state.get("version", 1) == 1:
            if len(state["ids"]):
                index.add(state["embeddings"], state["ids"], state["groups"])
            return index
        n, dim = state["shape"]
        if not len(state["ids"]) == len(state["groups"]) == n:
            raise ValueError(
                f"{path}: {len(state['ids'])} ids and {len(state['groups'])} groups for {n} embeddings"
            )
        if n:  # checked finite when added; the digest binds the file to what was saved
            mapped = open_rows(path.with_name(EXACT_EMBEDDINGS_FILE), state["embeddings_sha256"], (n, dim))
            for rows, part in zip(
                (index._embeddings, index._ids, index._groups),
                (mapped, state["ids"], state["groups"]),
                strict=True,
            ):
                rows.append(part)
        return index


def _codes_together(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` as non-negative codes of one coding (equal values, equal codes)."""
    _, codes = torch.unique(torch.cat([a, b]), return_inverse=True)
    return codes[: len(a)], codes[len(a) :]


__all__ = [
    "EXACT_EMBEDDINGS_FILE",
    "EXACT_INDEX_FILE",
    "EXACT_INDEX_FORMAT",
    "EXACT_INDEX_VERSION",
    "ExactKnnIndex",
]
