"""A kNN backend on Qdrant (``qdrant``): an :class:`~oml_core.interfaces.knn.IKnnIndex` whose items are the
points of a Qdrant collection, through ``qdrant-client``.

- **Where the collection lives.** In-process (``location=":memory:"``, the default), on a local ``path`` (Qdrant's
  local mode, on disk; one client at a time holds a path) or on a server given by ``url`` (its API key read from
  the environment variable ``api_key_env`` when the server is first asked, never saved). A server is asked for
  its collections when the backend is made: one that does not answer is a ``ValueError`` naming it. In-process and
  on a path, Qdrant scans every point (exact); on a server it searches its HNSW graph (approximate) unless
  ``exact: true``.
- **Points.** Every item is a point whose id is a *label*: ``0, 1, 2, ...`` in add order (never reused, so the
  labels increase with the positions, removals included), its vector the embedding (float32) and its payload
  ``{"group": <its exclusion group>}``. The oml ids and groups are kept here too, by position.
- **Distances.** Collections are made with Qdrant's ``Euclid`` distance for ``"l2"`` (its score is the
  Euclidean distance, returned as it is) and ``Cosine`` for ``"cosine"`` (its score is the cosine similarity
  ``s`` of the normalised vectors, returned as ``clamp(1 - s, 0, 2)``, the core's cosine distance).
- **Exclusion.** On a server it is inside Qdrant's search, no over-fetch: every query carries the filter
  ``must_not: group == exclude[q]``, so up to ``k`` retrievable items come back. The local modes evaluate such a
  filter in Python point by point (13 times slower than the search itself on 10k items, ``benchmarks/RESULTS.md``);
  there the search goes unfiltered through the core's over-fetch and filter
  (:func:`~oml_core.knn.exclusion.search_excluding`).
- **Order.** Rows are sorted by ``(distance, position)`` and the ties at the ``k``-th place are completed
  (:func:`~oml_core.knn.ties.search_completing_ties`: Qdrant keeps either end of a tie cut by ``k``), so the
  exact search of the local modes returns the exact backend's neighbours whenever both compute equal distances
  for equal ones (duplicated rows, small-integer embeddings); distinct items whose distances differ by less than
  float32 rounding may come in either order.
- **Removal** by id deletes the points of the ids' labels (:meth:`QdrantKnnIndex.remove`).
- **Saving** writes ``qdrant_index.pt`` (a ``torch.load(weights_only=True)`` dict: format tag, version,
  parameters, the collection's name, ids, groups, labels). In-process, the collection lives only as long as the
  client, so its vectors are saved too, and :meth:`~QdrantKnnIndex.load` makes the collection again. On a path
  or a server the collection is the one copy of the vectors: the file keeps the SHA-256 of what it holds (every
  point's label, group and vector, by label), which :meth:`~QdrantKnnIndex.load` reads back and checks; a
  collection changed since (an index that changed it without being saved, another writer) is refused, naming it.
  A gallery index on such a collection commits whole generations (:attr:`holds_items_outside
  <oml_core.interfaces.knn.IKnnIndex.holds_items_outside>`), never a segment of its log, which would be replayed on
  the base generation's backend, whose collection has changed since.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from qdrant_client import QdrantClient, models
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
from oml_core.knn.exclusion import empty_rows, pad_to, search_excluding
from oml_core.knn.ties import search_completing_ties, sorted_by_distance_then_position
from oml_core.utils.atomic import atomic_torch_save
from oml_core.utils.checks import is_int

#: The torch file of a saved index.
QDRANT_STATE_FILE = "qdrant_index.pt"
#: The format tag of :data:`QDRANT_STATE_FILE`.
QDRANT_INDEX_FORMAT = "oml-knn-qdrant"
#: The version of :data:`QDRANT_STATE_FILE` that this code writes (and the newest it reads).
QDRANT_STATE_VERSION = 1
#: The in-process location.
MEMORY = ":memory:"
#: The payload key of an item's exclusion group.
GROUP_KEY = "group"
#: Points sent to Qdrant in one upsert, read in one scroll, and queries sent in one batch.
BATCH = 1024

_DISTANCES = {"l2": models.Distance.EUCLID, "cosine": models.Distance.COSINE}


class QdrantKnnIndex(AppendedItems, IKnnIndex):
    """``qdrant``: the items in a Qdrant collection (see the module's docstring).

    Args:
        distance: ``"l2"`` or ``"cosine"``.
        location: ``":memory:"`` (in-process), unless ``path`` or ``url`` is given.
        path: A folder of Qdrant's local mode (made if needed).
        url: A Qdrant server (``http://host:6333``).
        collection: The collection's name; ``None``: a new name (``oml-`` and 16 hex digits). It must not exist
            when the first items are added.
        api_key_env: The environment variable that holds the server's API key (unset: none).
        timeout: Seconds a request to the server may take (at least 1).
        exact: On a server, scan every point instead of searching the HNSW graph (the local modes always do).

    Raises:
        ValueError: a bad argument (named), both ``path`` and ``url``, or a server that does not answer.
    """

    name = "qdrant"

    def __init__(
        self,
        distance: str = "l2",
        location: str = MEMORY,
        path: str | None = None,
        url: str | None = None,
        collection: str | None = None,
        api_key_env: str = "QDRANT_API_KEY",
        timeout: int = 5,
        exact: bool = False,
    ) -> None:
        self.distance = check_distance(distance)
        if location != MEMORY:
            raise ValueError(
                f"location must be {MEMORY!r} (give path or url for the others), got {location!r}"
            )
        if path is not None and url is not None:
            raise ValueError(f"give path or url, not both (path={path!r}, url={url!r})")
        for value, what in ((path, "path"), (url, "url"), (collection, "collection")):
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{what} must be a non-empty string or None, got {value!r}")
        if not is_int(timeout) or timeout < 1:
            raise ValueError(f"timeout must be an integer >= 1 (seconds), got {timeout!r}")
        if not isinstance(exact, bool):
            raise ValueError(f"exact must be true or false, got {exact!r}")
        self.location, self.url, self.api_key_env = location, url, api_key_env
        self.path = None if path is None else str(Path(path).expanduser().resolve())
        self.collection = collection or f"oml-{uuid.uuid4().hex[:16]}"
        self.timeout, self.exact = int(timeout), exact
        self.holds_items_outside = path is not None or url is not None
        self._client: QdrantClient | None = None
        self._dim: int | None = None
        self._ids = AppendedRows(torch.empty(0, dtype=torch.long))
        self._groups = AppendedRows(torch.empty(0, dtype=torch.long))
        self._labels = AppendedRows(torch.empty(0, dtype=torch.long))
        self._next_label = 0
        if url is not None:
            self._connect()

    # ------------------------------------------------------------------------------------------ the interface
    @property
    def where(self) -> str:
        """Where the collection lives, in words: ``"Qdrant in-process"``, ``"Qdrant at <path>"`` or
        ``"the Qdrant server at <url>"``."""
        if self.url is not None:
            return f"the Qdrant server at {self.url}"
        return f"Qdrant at {self.path}" if self.path is not None else "Qdrant in-process"

    def add(self, embeddings: Tensor, ids: Tensor | None = None, groups: Tensor | None = None) -> None:
        """Add ``[n, dim]`` ``embeddings`` as points with ``ids`` (default: positions, ``len(self)`` on) and
        ``groups`` (default: the ids); the first add makes the collection.

        Raises:
            ValueError: bad embeddings, ids or groups (:func:`~oml_core.knn.backend_checks.check_added`), or a
                collection of that name that exists already.
        """
        embeddings, ids, groups = check_added(embeddings, ids, groups, len(self), self._dim)
        if self._dim is None:
            self._create_collection(embeddings.shape[1])
        labels = torch.arange(self._next_label, self._next_label + len(ids))
        self._upsert(embeddings.float().numpy(), labels, groups)
        self._next_label += len(ids)
        self._ids.append(ids)
        self._groups.append(groups)
        self._labels.append(labels)

    def search(self, queries: Tensor, k: int, exclude: Tensor | None = None) -> KnnSearchResult:
        """The ``k`` nearest items of every query, none of group ``exclude[q]`` for query ``q`` (a Qdrant filter
        on a server, an over-fetch in the local modes); rows sorted by ``(distance, position)``, padded with
        ``inf`` and ``-1``."""
        check_k(k)
        queries = check_queries(queries, self._dim, exclude)
        if not len(queries) or not len(self):
            distances, positions = pad_to(*empty_rows(len(queries)), k)
            return KnnSearchResult(distances, positions)
        if exclude is not None:
            exclude = torch.as_tensor(exclude).reshape(-1).long()
        if self.url is None:
            distances, positions = search_excluding(self._search_ties, queries, k, self.groups, exclude)
        else:
            distances, positions = pad_to(*self._search_ties(queries, k, exclude), k)
        ids = torch.where(positions >= 0, self.ids[positions.clamp(min=0)], positions)
        return KnnSearchResult(distances.float(), ids)

    def remove(self, ids: Tensor) -> None:
        """Remove the items of ``ids`` (see :meth:`IKnnIndex.remove <oml_core.interfaces.knn.IKnnIndex.remove>`):
        their points are deleted.

        Raises:
            ValueError: an id that no item has (nothing changed).
        """
        kept = kept_after_removal(self.ids, ids)
        removed = self._labels.rows[~kept].tolist()
        if removed:
            self._open().delete(self.collection, models.PointIdsList(points=removed), wait=True)
        for rows in (self._ids, self._groups, self._labels):
            rows.keep(kept)

    def save(self, folder: str | Path) -> None:
        """Write ``qdrant_index.pt`` into ``folder`` (created if needed): with the vectors in-process, with the
        digest of the collection on a path or a server."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        in_process = self.path is None and self.url is None
        vectors, digest = None, None
        if self._dim is not None:
            if in_process:
                vectors = torch.from_numpy(
                    np.concatenate([v for _, _, v in self._points()] or [_no_rows(self._dim)])
                )
            else:
                digest = self._digest()
        state = {
            "format": QDRANT_INDEX_FORMAT,
            "version": QDRANT_STATE_VERSION,
            "params": self._params(),
            "dim": self._dim,
            "ids": self.ids,
            "groups": self.groups,
            "labels": self._labels.rows,
            "next_label": self._next_label,
            "vectors": vectors,
            "sha256": digest,
        }
        atomic_torch_save(state, folder / QDRANT_STATE_FILE)

    @classmethod
    def load(cls, folder: str | Path) -> QdrantKnnIndex:
        """Read an index written by :meth:`save`: in-process, its collection made again from the saved vectors;
        on a path or a server, its collection opened and checked against the saved digest.

        Raises:
            FileNotFoundError: no ``qdrant_index.pt`` in ``folder``.
            ValueError: a file that is not what :meth:`save` writes; a server that does not answer; a collection
                that is missing, or holds other points than the index saved (named, with where it lives).
        """
        path = Path(folder) / QDRANT_STATE_FILE
        state = load_index_state(path, QDRANT_INDEX_FORMAT)
        try:
            version, params, dim = state["version"], dict(state["params"]), state["dim"]
            ids, groups, labels = state["ids"].long(), state["groups"].long(), state["labels"].long()
            next_label, vectors, digest = int(state["next_label"]), state["vectors"], state["sha256"]
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{path}: not a complete {QDRANT_INDEX_FORMAT} index (missing {e})") from e
        if not isinstance(version, int) or version > QDRANT_STATE_VERSION:
            raise ValueError(
                f"{path}: version {version!r} of {QDRANT_INDEX_FORMAT}; this oml-qdrant reads up to "
                f"{QDRANT_STATE_VERSION}"
            )
        if not len(ids) == len(groups) == len(labels):
            raise ValueError(f"{path}: {len(ids)} ids, {len(groups)} groups and {len(labels)} labels")
        index = cls(**params)
        if dim is not None:
            index._dim = int(dim)
            if vectors is not None:
                index._create_collection(int(dim))
                index._upsert(vectors.float().numpy(), labels, groups)
            else:
                try:
                    index._check_collection(len(ids), digest)
                except ValueError:
                    index.close()  # frees a path for the next client
                    raise
        index._ids.append(ids)
        index._groups.append(groups)
        index._labels.append(labels)
        index._next_label = next_label
        return index

    def close(self) -> None:
        """Close the client (on a path, this frees the folder for another client); the next use opens it
        again."""
        if self._client is not None:
            self._client.close()
            self._client = None

    # ------------------------------------------------------------------------------------------- the client
    def _params(self) -> dict[str, Any]:
        """The constructor's arguments (saved, and given back to the constructor by :meth:`load`)."""
        return {
            "distance": self.distance,
            "location": self.location,
            "path": self.path,
            "url": self.url,
            "collection": self.collection,
            "api_key_env": self.api_key_env,
            "timeout": self.timeout,
            "exact": self.exact,
        }

    def _open(self) -> QdrantClient:
        """The client, opened on first use (a path is locked by the client that opens it)."""
        if self._client is None:
            if self.url is not None:
                self._connect()
            elif self.path is not None:
                self._client = QdrantClient(path=self.path)
            else:
                self._client = QdrantClient(location=MEMORY)
        assert self._client is not None
        return self._client

    def _connect(self) -> None:
        """Open the client of the server and ask it for its collections.

        Raises:
            ValueError: the server does not answer (named, with the reason).
        """
        client = QdrantClient(
            url=self.url,
            api_key=os.environ.get(self.api_key_env) or None,
            timeout=self.timeout,
            check_compatibility=False,  # its own request, and a warning when the server does not answer
        )
        try:
            client.get_collections()
        except Exception as e:  # the client wraps the transport's errors (refused, timeout, TLS, HTTP)
            client.close()
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ValueError(f"the Qdrant server at {self.url} does not answer ({reason})") from e
        self._client = client

    def _create_collection(self, dim: int) -> None:
        """Make the empty collection of ``dim``-dimensional vectors.

        Raises:
            ValueError: a collection of that name exists already.
        """
        client = self._open()
        if client.collection_exists(self.collection):
            raise ValueError(
                f"the collection {self.collection!r} exists already in {self.where}: give another collection "
                f"name (a saved index on it loads with its load())"
            )
        params = models.VectorParams(size=dim, distance=_DISTANCES[self.distance])
        client.create_collection(self.collection, vectors_config=params)
        if self.url is not None:  # the local modes have no payload index (they scan)
            client.create_payload_index(self.collection, GROUP_KEY, models.PayloadSchemaType.INTEGER)
        self._dim = dim

    def _upsert(self, vectors: np.ndarray, labels: Tensor, groups: Tensor) -> None:
        client = self._open()
        for start in range(0, len(labels), BATCH):
            part = slice(start, start + BATCH)
            batch = models.Batch(
                ids=labels[part].tolist(),
                vectors=vectors[part].tolist(),
                payloads=[{GROUP_KEY: group} for group in groups[part].tolist()],
            )
            client.upsert(self.collection, batch, wait=True)

    def _points(self) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Every point of the collection by label, in batches: ``(labels, groups, float32 vectors)``."""
        client, offset = self._open(), None
        while True:
            points, offset = client.scroll(
                self.collection, limit=BATCH, offset=offset, with_payload=True, with_vectors=True
            )
            if points:
                yield (
                    np.array([p.id for p in points], dtype=np.int64),
                    np.array([(p.payload or {}).get(GROUP_KEY) for p in points], dtype=np.int64),
                    np.array([p.vector for p in points], dtype=np.float32),
                )
            if offset is None:
                return

    def _digest(self) -> str:
        """The SHA-256 of every point of the collection: its label, group and vector, by label."""
        sha = hashlib.sha256()
        for labels, groups, vectors in self._points():
            for part in (labels, groups, vectors):
                sha.update(np.ascontiguousarray(part).tobytes())
        return sha.hexdigest()

    def _check_collection(self, n: int, digest: str | None) -> None:
        """Check that the collection holds the ``n`` points of SHA-256 ``digest`` that the index saved.

        Raises:
            ValueError: no such collection, or other points (named, with where it lives).
        """
        client = self._open()
        what = f"the collection {self.collection!r} of {self.where}"
        if not client.collection_exists(self.collection):
            raise ValueError(f"{what} does not exist (the index saved {n} points in it)")
        count = client.count(self.collection, exact=True).count
        if count != n or self._digest() != digest:
            raise ValueError(
                f"{what} holds {count} points, not the {n} the index saved (or not their vectors: the SHA-256 of "
                f"its points differs); it was changed since the index was saved"
            )

    # ------------------------------------------------------------------------------------------- the search
    def _search_ties(self, queries: Tensor, k: int, exclude: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Qdrant's ``k`` nearest of every query (``exclude[q]``'s group filtered out by Qdrant) as
        :meth:`_raw_search` gives them, the ties at the ``k``-th place completed."""
        vectors = queries.float().numpy()
        excluded = None if exclude is None else exclude.tolist()

        def raw(rows: Tensor, fetch: int) -> tuple[Tensor, Tensor]:
            return self._raw_search(vectors, excluded, rows.tolist(), fetch)

        return search_completing_ties(raw, len(queries), k, len(self))

    def _raw_search(
        self, vectors: np.ndarray, exclude: list[int] | None, rows: list[int], fetch: int
    ) -> tuple[Tensor, Tensor]:
        """Qdrant's ``fetch`` nearest of the queries of ``rows`` (``exclude[q]``'s group filtered out) as
        distances of :attr:`distance` and positions, rows sorted by ``(distance, position)``, padded to
        ``fetch`` with ``inf`` and ``-1``."""
        params = models.SearchParams(exact=self.exact) if self.url is not None else None
        requests = [
            models.QueryRequest(
                query=vectors[row].tolist(),
                limit=fetch,
                filter=None if exclude is None else _not_in_group(exclude[row]),
                params=params,
            )
            for row in rows
        ]
        scores = torch.full((len(rows), fetch), float("nan"), dtype=torch.float64)
        labels = torch.full((len(rows), fetch), -1, dtype=torch.long)
        for start in range(0, len(requests), BATCH):
            answers = self._open().query_batch_points(self.collection, requests[start : start + BATCH])
            for i, answer in enumerate(answers, start):
                found = answer.points[:fetch]
                scores[i, : len(found)] = torch.tensor([p.score for p in found], dtype=torch.float64)
                labels[i, : len(found)] = torch.tensor([int(p.id) for p in found], dtype=torch.long)
        distances = scores if self.distance == "l2" else (1 - scores).clamp(0, 2)
        distances = distances.float().masked_fill(labels < 0, float("inf"))
        return sorted_by_distance_then_position(distances, self._positions(labels))

    def _positions(self, labels: Tensor) -> Tensor:
        """The positions of the items of Qdrant ``labels`` (``-1`` stays ``-1``)."""
        found = torch.searchsorted(self._labels.rows, labels.clamp(min=0).contiguous())
        return torch.where(labels >= 0, found, labels)


def _not_in_group(group: int) -> models.Filter:
    """The filter that leaves out the points of ``group``."""
    return models.Filter(
        must_not=[models.FieldCondition(key=GROUP_KEY, match=models.MatchValue(value=group))]
    )


def _no_rows(dim: int) -> np.ndarray:
    return np.empty((0, dim), dtype=np.float32)


__all__ = ["QDRANT_INDEX_FORMAT", "QDRANT_STATE_FILE", "QDRANT_STATE_VERSION", "QdrantKnnIndex"]
