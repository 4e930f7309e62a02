"""kNN backends: the core's exact index, and the over-fetch-and-filter exclusion that other backends share.

A backend is an :class:`~oml_core.interfaces.knn.IKnnIndex` registered under the ``knn_backend`` kind
(``oml_register_knn_backends``); the core registers :class:`ExactKnnIndex` as ``exact``, the oml-faiss plugin
adds faiss's indexes. :meth:`RetrievalResults.from_embeddings
<oml_core.retrieval.RetrievalResults.from_embeddings>` and ``EmbeddingMetrics`` take one by config
(``knn_backend: {name: ..., args: {...}}``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from oml_core.functional.knn import STRIP_ROWS, KnnResult, ground_truth_ids, search_knn_qg
from oml_core.interfaces.knn import IKnnIndex, KnnSearchResult
from oml_core.utils.atomic import atomic_torch_save
from oml_core.utils.checks import as_int_tensor, check_int
from oml_core.utils.digest import verify_checkpoint
from oml_core.utils.misc_torch import iter_chunks
from oml_core.utils.ragged import Ragged

if TYPE_CHECKING:
    from oml_core.registry import Registry

#: The distances a backend can be asked for.
KNN_DISTANCES = ("l2", "cosine")
#: The file an index saved by :class:`ExactKnnIndex` keeps everything in.
EXACT_INDEX_FILE = "exact_index.pt"
#: The format tag of that file.
EXACT_INDEX_FORMAT = "oml-knn-exact"

#: ``raw(queries, k) -> (distances [Q, k'], positions [Q, k'])``: a backend's own search without exclusion,
#: rows by ascending distance, positions (``0..n-1``, in add order) ``-1`` where nothing was found.
RawSearch = Callable[[Tensor, int], tuple[Tensor, Tensor]]


def check_distance(distance: str) -> str:
    """``distance`` when it is one of :data:`KNN_DISTANCES`, else a ``ValueError`` naming them."""
    if distance not in KNN_DISTANCES:
        raise ValueError(f"distance must be one of {list(KNN_DISTANCES)}, got {distance!r}")
    return distance


def check_k(k: int) -> int:
    """``k`` when it is a positive integer (not a ``bool``), else a ``ValueError``
    (:func:`~oml_core.utils.checks.check_int`)."""
    return check_int(k, "k")


def pad_to(distances: Tensor, positions: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Rows padded (``inf``, ``-1``) or cut to ``k`` columns."""
    n, width = positions.shape
    if width >= k:
        return distances[:, :k], positions[:, :k]
    fill_d = torch.full((n, k - width), float("inf"), dtype=distances.dtype)
    fill_p = torch.full((n, k - width), -1, dtype=torch.long)
    return torch.cat([distances, fill_d], 1), torch.cat([positions, fill_p], 1)


def group_sizes(groups: Tensor, exclude: Tensor) -> Tensor:
    """``[Q]`` int64: how many items have the group ``exclude[q]`` (by a sort of ``groups``, no ``Q x n``
    comparison)."""
    sorted_groups = torch.sort(groups).values
    return torch.searchsorted(sorted_groups, exclude, right=True) - torch.searchsorted(sorted_groups, exclude)


def search_excluding(
    raw: RawSearch, queries: Tensor, k: int, groups: Tensor, exclude: Tensor | None
) -> tuple[Tensor, Tensor]:
    """Up to ``k`` nearest items per query, none of whose group is the query's ``exclude``, from a backend
    search that cannot mask: over-fetch, then filter.

    Queries go in chunks of :data:`~oml_core.functional.knn.STRIP_ROWS`. For a chunk, ``k + m`` items are
    fetched, ``m`` being the largest number of items any of its queries must leave out (its group's size), so
    an exact ``raw`` always yields ``k`` retrievable items when there are that many; an approximate one may
    yield fewer (the row is then padded). The kept items keep ``raw``'s order.

    Args:
        raw: The backend's search (see :data:`RawSearch`).
        queries: ``[Q, dim]``.
        k: Items per query.
        groups: ``[n]`` group of every item, by position.
        exclude: ``[Q]`` group left out for every query; ``None``: nothing is left out.

    Returns:
        ``([Q, k] distances, [Q, k] positions)``, padded with ``inf`` and ``-1``.
    """
    n = len(groups)
    if exclude is None:
        return pad_to(*raw(queries, min(k, n)), k) if n else pad_to(*_nothing(len(queries)), k)
    sizes = group_sizes(groups, exclude)
    out_d, out_p = [], []
    for rows in iter_chunks(len(queries), STRIP_ROWS):
        fetch = min(n, k + int(sizes[rows].max())) if n else 0
        if fetch == 0:
            d, p = _nothing(rows.stop - rows.start)
        else:
            d, p = raw(queries[rows], fetch)
            excluded = (p < 0) | (groups[p.clamp(min=0)] == exclude[rows, None])
            order = torch.sort(
                excluded.to(torch.int8), dim=1, stable=True
            ).indices  # kept first, in raw's order
            d, p = torch.gather(d, 1, order), torch.gather(p, 1, order)
            kept = torch.gather(~excluded, 1, order)
            d, p = d.masked_fill(~kept, float("inf")), p.masked_fill(~kept, -1)
        d, p = pad_to(d, p, k)
        out_d.append(d)
        out_p.append(p)
    return torch.cat(out_d), torch.cat(out_p)


def _nothing(n_queries: int) -> tuple[Tensor, Tensor]:
    return torch.empty(n_queries, 0), torch.empty(n_queries, 0, dtype=torch.long)


class AppendedRows:
    """Tensors appended batch by batch along their first dimension and concatenated once, when read: the
    columns of an index's items (embeddings, ids, groups) in add order.

    Args:
        empty: What :attr:`rows` is before anything is appended (e.g. ``torch.empty(0, dtype=torch.long)``).
    """

    def __init__(self, empty: Tensor) -> None:
        self._empty = empty
        self._parts: list[Tensor] = []

    def __len__(self) -> int:
        return sum(len(part) for part in self._parts)

    def append(self, rows: Tensor) -> None:
        """Append a batch of rows."""
        self._parts.append(rows)

    def keep(self, kept: Tensor) -> None:
        """Keep only the rows where the ``[len(self)]`` bool mask ``kept`` is true, in their order."""
        self._parts = [self.rows[kept]]

    @property
    def width(self) -> int | None:
        """The size of the second dimension of the rows (``None`` before any, or for 1-D rows)."""
        return self._parts[0].shape[1] if self._parts and self._parts[0].ndim > 1 else None

    @property
    def rows(self) -> Tensor:
        """Every row appended, in order (the batches are concatenated on the first read after an append)."""
        if len(self._parts) > 1:
            self._parts = [torch.cat(self._parts)]
        return self._parts[0] if self._parts else self._empty


class ExactKnnIndex(IKnnIndex):
    """The core's exact backend: the memory-bounded blockwise search of
    :func:`~oml_core.functional.knn.search_knn_qg` over the added embeddings, with exclusion inside the search
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
            d, p = pad_to(*_nothing(len(queries)), k)
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


def load_index_state(path: Path, expected_format: str) -> dict:
    """``torch.load(path, weights_only=True)`` of a saved index, checked to be a dict of ``expected_format``.

    Raises:
        FileNotFoundError: no such file.
        ValueError: the file is not a torch file, is corrupt (a ``CorruptCheckpointError``: its digest,
            :func:`~oml_core.utils.digest.verify_checkpoint`), or holds something else; the message names it.
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file; is the folder a saved {expected_format} index?")
    verify_checkpoint(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise ValueError(f"{path}: not a readable {expected_format} index ({type(e).__name__}: {e})") from e
    if not isinstance(state, dict) or state.get("format") != expected_format:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"{path}: not a {expected_format} index (found {found!r})")
    return state


def check_added(
    embeddings: Tensor, ids: Tensor | None, groups: Tensor | None, n_before: int, dim: int | None
) -> tuple[Tensor, Tensor, Tensor]:
    """Validate what :meth:`IKnnIndex.add` is given; fill the default ids (positions) and groups (the ids).

    Raises:
        ValueError: not a finite ``[n, dim]`` float tensor, a dimension other than the index's, ``ids`` or
            ``groups`` of another length or not integers.
    """
    if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
        raise ValueError(
            f"embeddings must be a [n, dim] tensor, got {getattr(embeddings, 'shape', embeddings)!r}"
        )
    if dim is not None and embeddings.shape[1] != dim:
        raise ValueError(f"embeddings have dimension {embeddings.shape[1]}, the index has {dim}")
    if not embeddings.dtype.is_floating_point:
        embeddings = embeddings.float()
    if not bool(torch.isfinite(embeddings).all()):
        row = int((~torch.isfinite(embeddings).all(1)).nonzero()[0, 0])
        raise ValueError(f"embeddings must be finite, row {row} is not")
    n = len(embeddings)
    ids = torch.arange(n_before, n_before + n) if ids is None else _integers(ids, "ids", n)
    groups = ids.clone() if groups is None else _integers(groups, "groups", n)
    return embeddings.detach().cpu(), ids, groups


def kept_after_removal(ids: Tensor, removed: Tensor) -> Tensor:
    """The ``[n]`` bool mask of the items (of ``ids``, ``[n]``) that remain when those of ``removed`` go, for
    :meth:`IKnnIndex.remove <oml_core.interfaces.knn.IKnnIndex.remove>`.

    Raises:
        ValueError: ``removed`` is not integers, or holds an id that no item has (the first few named).
    """
    removed = as_int_tensor(removed, "ids", expected="be integers", flatten=True)
    unknown = removed[~torch.isin(removed, ids)]
    if len(unknown):
        raise ValueError(f"no item has the id(s) {unknown[:5].tolist()}: nothing was removed")
    return ~torch.isin(ids, removed)


def check_queries(queries: Tensor, dim: int | None, exclude: Tensor | None) -> Tensor:
    """Validate what :meth:`IKnnIndex.search` is given (``[Q, dim]`` queries, ``[Q]`` integer ``exclude``)."""
    if not isinstance(queries, Tensor) or queries.ndim != 2:
        raise ValueError(f"queries must be a [Q, dim] tensor, got {getattr(queries, 'shape', queries)!r}")
    if dim is not None and queries.shape[1] != dim:
        raise ValueError(f"queries have dimension {queries.shape[1]}, the index has {dim}")
    if exclude is not None:
        _integers(exclude, "exclude", len(queries))
    return queries.detach().cpu() if queries.dtype.is_floating_point else queries.float().cpu()


def _integers(values: Tensor, name: str, n: int) -> Tensor:
    """``values`` as ``[n]`` integers on the CPU (:func:`~oml_core.utils.checks.as_int_tensor`)."""
    return as_int_tensor(values, name, n=n, expected="be integers", flatten=True)


def _codes_together(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` as non-negative codes of one coding (equal values, equal codes)."""
    _, codes = torch.unique(torch.cat([a, b]), return_inverse=True)
    return codes[: len(a)], codes[len(a) :]


def ragged_to_padded(distances: Ragged, positions: Ragged, k: int) -> tuple[Tensor, Tensor]:
    """``[Q, k]`` tensors (distances, int64 positions) of ragged rows of at most ``k``, padded with ``inf``
    and ``-1``."""
    return pad_to(distances.padded(k, fill=float("inf")), positions.padded(k, fill=-1), k)


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
    """:func:`~oml_core.functional.knn.search_knn` through a knn backend: the gallery rows are added to the empty
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
    """:func:`~oml_core.functional.knn.search_knn_qg` through a knn backend: the gallery is added to the empty
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
    """The :class:`~oml_core.functional.knn.KnnResult` of ``[Q, k]`` padded search rows (``inf``/``-1`` after the
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


__all__ = [
    "AppendedRows",
    "EXACT_INDEX_FILE",
    "EXACT_INDEX_FORMAT",
    "KNN_DISTANCES",
    "ExactKnnIndex",
    "RawSearch",
    "check_added",
    "check_distance",
    "check_k",
    "check_queries",
    "group_sizes",
    "kept_after_removal",
    "knn_result",
    "load_index_state",
    "make_knn_index",
    "pad_to",
    "ragged_to_padded",
    "search_excluding",
    "search_with_index",
    "search_with_index_qg",
]
