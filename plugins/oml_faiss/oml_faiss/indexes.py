"""kNN backends on faiss: exact (``faiss_flat``) and approximate (``faiss_ivf``, ``faiss_hnsw``, ``faiss_ivfpq``)
implementations of :class:`~oml_core.interfaces.knn.IKnnIndex`.

Common to every backend here:

- **Distances.** ``"l2"``: an L2 faiss index; faiss gives squared distances ``s``, returned as ``sqrt(max(s, 0))``
  (the Euclidean distance). ``"cosine"``: embeddings and queries are L2-normalised (``x / max(|x|, eps)``, as
  the core's exact search does; a zero row stays zero) into an inner-product index; faiss gives similarities
  ``s``, returned as ``clamp(1 - s, 0, 2)``. Embeddings are searched in float32 (float64 inputs are cast).
- **Ids and groups** are kept by position (the order items were added) as int64 tensors; faiss holds the vectors
  under their positions. Faiss cannot mask by group, so exclusion goes through the core's over-fetch-and-filter
  :func:`~oml_core.knn.exclusion.search_excluding`.
- **Order.** Every row is sorted by ``(distance, position)``: equal distances come in the order the items were
  added, like the core's exact backend, and ties at the ``k``-th place are completed (faiss's heaps keep either
  end of a tie cut by ``k``; an inner-product heap keeps the highest positions): the search goes past ``k``
  until the last distance fetched is larger than the ``k``-th. So an exact structure (``faiss_flat``, an IVF
  index that fell back to flat or scans all its lists) returns the exact backend's neighbours whenever both
  compute equal distances for equal ones: always for duplicated rows and for small-integer embeddings; distinct
  items whose distances differ by less than float32 rounding (about 1e-7 relative) may come in either order.
- **Training** (IVF and PQ): the items added are buffered (float32, normalised for cosine) until the index is
  first needed: the first :meth:`~FaissKnnIndex.search` or :meth:`~FaissKnnIndex.save`, or as soon as
  ``train_size`` items are buffered when that is set. faiss's k-means is then trained on all the buffered items
  (it samples at most 256 per centroid itself) with the clustering seed ``seed``, they are indexed, and every
  later :meth:`~FaissKnnIndex.add` goes straight into the trained index (its lists and codebooks stay as
  trained). Too few items to train (fewer than ``nlist``; for IVF-PQ, fewer than ``max(nlist, 2 ** nbits)``)
  build an exact flat index instead (logged); fewer than 39 per centroid (faiss's recommendation) train with a
  logged warning.
- **Determinism.** A seed gives identical results: faiss's k-means (coarse quantizer and PQ codebooks) is seeded
  with ``seed`` and its result does not depend on the number of OpenMP threads (checked with faiss 1.15 on 1, 2,
  4 and 8 threads); HNSW's levels are drawn from a generator seeded by ``seed`` and the number of items already
  in the graph. faiss 1.15's HNSW build is deterministic on any number of threads (it has a lock-free
  deterministic build, ``hnsw_add_vertices_deterministic``); with an older faiss, whose parallel build depends on
  thread scheduling, the graph is built on one OpenMP thread (the thread count is restored after each add).
- **Device.** ``device="cuda"`` (or ``"cuda:<n>"``) moves the index to a GPU with faiss's GPU indexes (trained on
  the CPU first, so that training stays seeded); it needs a faiss built with GPU support and a CUDA device, else
  a ``ValueError`` at construction. faiss has no GPU HNSW nor GPU ``IndexRefine``: those raise too. GPU search
  takes ``k`` (with the over-fetch of exclusion) and ``nprobe`` up to 2048. **Untested**: no GPU faiss was
  available where this was written.
- **Removal** (:meth:`~FaissKnnIndex.remove`): ``faiss_flat`` and ``faiss_ivf`` remove items by id on the CPU
  (faiss's ``remove_ids``; items not yet trained on leave the buffer); the others keep their order. faiss labels
  the vectors of an IVF index with the labels given (``add_with_ids``), increasing in add order, and a flat one
  by position (it closes the gaps), so a search maps faiss's labels back to positions. HNSW graphs, IVF-PQ
  indexes and GPU indexes cannot remove: :class:`~oml_core.interfaces.knn.CannotRemoveError`, before any change.
- **Saving** writes two files into a folder: ``faiss.index`` (faiss's own format, written atomically: temporary
  file, fsync, ``os.replace``) and ``faiss_index.pt`` (a ``torch.load(weights_only=True)`` dict: format tag,
  version, backend, parameters, ids, groups, structure and the SHA-256 of ``faiss.index``, which :meth:`load`
  checks). A GPU index is saved from its CPU copy.
- **Loading memory-mapped.** On the CPU, :meth:`~FaissKnnIndex.load` reads ``faiss.index`` with faiss's
  ``IO_FLAG_MMAP_IFC`` (faiss >= 1.10): the index's vectors and codes (a flat index's; an IVF or IVF-PQ index's
  inverted lists, ids included, and the codes of its refine stage; an HNSW graph's vectors and links: faiss
  >= 1.11) are the file's pages, read as a search touches them, so an index larger than the memory opens and
  searches. faiss aborts the process on a change of a mapped index, so the first :meth:`~FaissKnnIndex.add` or
  :meth:`~FaissKnnIndex.remove` after a load reads the index into memory first, from the file it was loaded
  from (kept open: its path may have been replaced or removed since); the file is never written.
  ``mapped=False`` reads the index into memory at once. faiss 1.11 to 1.14.1 allocate an IVF index's lists
  whole while mapping them (a peak of their size), 1.10 reads them into memory.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import weakref
from abc import abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

import faiss
import numpy as np
import torch
from torch import LongTensor, Tensor

from oml_core.interfaces.knn import CannotRemoveError, IKnnIndex, KnnSearchResult
from oml_core.knn.appended_rows import AppendedItems, AppendedRows
from oml_core.knn.backend_checks import (
    check_added,
    check_distance,
    check_k,
    check_queries,
    kept_after_removal,
    load_index_state,
)
from oml_core.knn.exclusion import search_excluding
from oml_core.knn.ties import search_completing_ties, sorted_by_distance_then_position
from oml_core.utils.atomic import atomic_torch_save, atomic_write
from oml_core.utils.checks import is_int
from oml_core.utils.misc_torch import inverse_norms

LOGGER = logging.getLogger(__name__)

#: The faiss file of a saved index (faiss's own format).
FAISS_INDEX_FILE = "faiss.index"
#: The torch file of a saved index (format tag, version, parameters, ids, groups).
FAISS_STATE_FILE = "faiss_index.pt"
#: The format tag of :data:`FAISS_STATE_FILE`.
FAISS_INDEX_FORMAT = "oml-knn-faiss"
#: The version of :data:`FAISS_STATE_FILE` that this code writes (and the newest it reads; 1: no faiss labels,
#: which were then the positions).
FAISS_STATE_VERSION = 2
#: Training items per k-means centroid under which faiss warns that the centroids are poorly estimated.
MIN_POINTS_PER_CENTROID = 39
#: Whether this faiss builds HNSW graphs deterministically on several threads (faiss >= 1.15).
HNSW_DETERMINISTIC_BUILD = hasattr(faiss, "hnsw_add_vertices_deterministic")
#: The most sub-quantizers ``faiss_ivfpq`` takes by default (48 bytes a code; more train much more slowly).
MAX_DEFAULT_M = 48
#: The structure of an exact flat index, the fallback of a training index with too few items.
FLAT = "flat"
#: The structures whose items can be removed (on the CPU): faiss's ``remove_ids`` of a flat and an IVF index.
REMOVABLE = frozenset({FLAT, "ivf"})

_DEVICE = re.compile(r"cpu|cuda(:\d+)?")
_READ_CHUNK = 1 << 20
#: faiss's flag to read an index memory-mapped (faiss >= 1.10; None before: read into memory): its flat codes
#: (faiss >= 1.10), inverted lists and HNSW links (faiss >= 1.11) are views of the file's pages.
MMAP_IFC: int | None = getattr(faiss, "IO_FLAG_MMAP_IFC", None)


class FaissKnnIndex(AppendedItems, IKnnIndex):
    """What the faiss backends share (see the module's docstring): buffering, training, exclusion, ordering,
    devices, save and load. Subclasses say which faiss index they build (:meth:`_new_index`).

    Args:
        distance: ``"l2"`` or ``"cosine"``.
        seed: Seed of everything random in the build (k-means, HNSW levels); a non-negative 31-bit integer.
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:<n>"`` (needs faiss with GPU support; untested).

    Raises:
        ValueError: a bad argument, named.
    """

    #: The name the backend is registered under.
    name: ClassVar[str] = ""
    #: Whether the index learns from the items (IVF, PQ): items are then buffered until it is built.
    trains: ClassVar[bool] = False
    #: Train as soon as this many items are buffered (``None``: at the first search or save).
    train_size: int | None = None

    def __init__(self, distance: str = "l2", seed: int = 0, device: str = "cpu") -> None:
        self.distance = check_distance(distance)
        self.seed = _int_arg(seed, "seed", minimum=0, maximum=2**31 - 1)
        self.device = _check_device(device, self._gpu_unsupported())
        self._index: Any = None  # the faiss index, once built
        self._source: _SavedFile | None = None  # the file of an index loaded mapped, until a change
        self._structure: str | None = None
        self._dim: int | None = None
        self._pending: list[np.ndarray] = []  # prepared vectors waiting for the build
        self._n_pending = 0
        self._ids = AppendedRows(torch.empty(0, dtype=torch.long))
        self._groups = AppendedRows(torch.empty(0, dtype=torch.long))
        #: The faiss label of every item, increasing in add order (the positions but in an IVF index that
        #: removed items), and the label of the next item added.
        self._labels = AppendedRows(torch.empty(0, dtype=torch.long))
        self._next_label = 0
        self._gpu_resources: Any = None

    # ------------------------------------------------------------------------------------- what subclasses say
    def _params(self) -> dict[str, Any]:
        """The constructor's arguments (saved, and given back to the constructor by :meth:`load`)."""
        return {"distance": self.distance, "seed": self.seed, "device": self.device}

    def _gpu_unsupported(self) -> str | None:
        """Why this configuration cannot run on a GPU (``None``: it can)."""
        return None

    def _check_dim(self, dim: int) -> None:
        """Raise a ``ValueError`` when the arguments do not fit embeddings of dimension ``dim``."""

    @abstractmethod
    def _new_index(self, dim: int, n_train: int) -> tuple[Any, str]:
        """A new CPU faiss index for ``dim`` and ``n_train`` training items, and its structure's name."""

    def _configure(self, index: Any) -> None:
        """Set the search-time parameters (``nprobe``, ``k_factor``) of a built or loaded ``index``."""

    def _add_vectors(self, x: np.ndarray, labels: Tensor) -> None:
        """Index the prepared vectors ``x`` under their faiss ``labels`` (the next positions, but in an IVF)."""
        self._index.add(x)

    def _faiss_search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return self._index.search(x, k)

    # ------------------------------------------------------------------------------------------ the interface
    @property
    def structure(self) -> str | None:
        """The structure built: the backend's own (``"ivf"``, ``"hnsw"``, ``"ivfpq"``), ``"flat"`` (exact: the
        flat backend, or the fallback of a training index given too few items), or ``None`` before the build."""
        return self._structure

    def add(
        self, embeddings: Tensor, ids: LongTensor | None = None, groups: LongTensor | None = None
    ) -> None:
        """Add ``[n, dim]`` ``embeddings`` with ``ids`` (default: positions, ``len(self)`` on) and ``groups``
        (default: the ids). A training index buffers them until it is built (see the module's docstring).

        Raises:
            ValueError: bad embeddings, ids or groups (:func:`~oml_core.knn.backend_checks.check_added`), or
                a dimension that the arguments do not fit (``m`` must divide it).
        """
        embeddings, ids, groups = check_added(embeddings, ids, groups, len(self), self._dim)
        self._own_index()
        if self._dim is None:
            self._check_dim(embeddings.shape[1])
            self._dim = embeddings.shape[1]
        x = self._prepare(embeddings)
        labels = torch.arange(self._next_label, self._next_label + len(x))
        self._next_label += len(x)
        self._ids.append(ids)
        self._groups.append(groups)
        self._labels.append(labels)
        if self._index is not None:
            self._add_vectors(x, labels)
            return
        self._pending.append(x)
        self._n_pending += len(x)
        if not self.trains or (self.train_size is not None and self._n_pending >= self.train_size):
            self._build()

    def search(self, queries: Tensor, k: int, exclude: LongTensor | None = None) -> KnnSearchResult:
        """The ``k`` nearest items of every query, none of group ``exclude[q]`` for query ``q``; rows sorted by
        ``(distance, position)``, padded with ``inf`` and ``-1``. Builds a training index first if needed."""
        check_k(k)
        queries = check_queries(queries, self._dim, exclude)
        if exclude is not None:
            exclude = torch.as_tensor(exclude).reshape(-1).long().cpu().contiguous()
        if not len(queries) or not len(self):
            empty = torch.empty(len(queries), k)
            return KnnSearchResult(
                empty.fill_(float("inf")), torch.full((len(queries), k), -1, dtype=torch.long)
            )
        self._ensure_built()
        distances, positions = search_excluding(self._raw_search_ties, queries, k, self.groups, exclude)
        ids = torch.where(positions >= 0, self.ids[positions.clamp(min=0)], positions)
        return KnnSearchResult(distances.float(), ids)

    def remove(self, ids: Tensor) -> None:
        """Remove the items of ``ids`` (see :meth:`IKnnIndex.remove <oml_core.interfaces.knn.IKnnIndex.remove>`):
        from the training buffer, or by faiss's ``remove_ids`` from a flat or IVF index on the CPU.

        Raises:
            CannotRemoveError: an HNSW graph, an IVF-PQ index or a GPU index (nothing changed).
            ValueError: an id that no item has.
        """
        if self._index is not None and (self.device != "cpu" or self._structure not in REMOVABLE):
            where = "on a GPU" if self.device != "cpu" else f"of structure {self._structure!r}"
            raise CannotRemoveError(f"{self.name}: faiss cannot remove items from an index {where}")
        kept = kept_after_removal(self.ids, ids)
        if self._index is None and self._pending:
            x = np.concatenate(self._pending)[kept.numpy()]
            self._pending, self._n_pending = ([x] if len(x) else []), len(x)
        elif self._index is not None:
            self._own_index()
            self._index.remove_ids(faiss.IDSelectorBatch(self._labels.rows[~kept].numpy()))
        for rows in (self._ids, self._groups, self._labels):
            rows.keep(kept)
        if self._index is None or self._structure == FLAT:  # faiss closed the gaps: the labels are positions
            self._next_label = len(self)
            self._labels = AppendedRows(torch.empty(0, dtype=torch.long))
            self._labels.append(torch.arange(len(self)))

    def save(self, folder: str | Path) -> None:
        """Write ``faiss.index`` and ``faiss_index.pt`` into ``folder`` (created if needed); a training index is
        built first."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self._ensure_built()
        digest = None
        if self._index is not None:
            cpu_index = self._index if self.device == "cpu" else faiss.index_gpu_to_cpu(self._index)
            digest = _write_faiss_index(cpu_index, folder / FAISS_INDEX_FILE)
        state = {
            "format": FAISS_INDEX_FORMAT,
            "version": FAISS_STATE_VERSION,
            "backend": self.name,
            "params": self._params(),
            "dim": self._dim,
            "structure": self._structure,
            "faiss_version": faiss.__version__,
            "index_sha256": digest,
            "ids": self.ids,
            "groups": self.groups,
            "labels": self._labels.rows,
            "next_label": self._next_label,
        }
        atomic_torch_save(state, folder / FAISS_STATE_FILE)

    @classmethod
    def load(cls, folder: str | Path, device: str | None = None, mapped: bool = True) -> FaissKnnIndex:
        """Read an index written by :meth:`save`; ``device`` replaces the saved one when given. Called on
        :class:`FaissKnnIndex` it loads any faiss backend; on a subclass, only that backend. ``mapped``: on the
        CPU, open the index memory-mapped (see the module's docstring); ``False``: read it into memory.

        Raises:
            FileNotFoundError: no such folder.
            ValueError: a folder without ``faiss_index.pt`` (another backend's, say), or a file that is not what
                :meth:`save` writes (another format, corrupt, inconsistent with the other file, another backend
                than ``cls``); the message names the file.
        """
        folder = Path(folder)
        state_path = folder / FAISS_STATE_FILE
        if folder.is_dir() and not state_path.exists():
            found = sorted(p.name for p in folder.iterdir())[:5]
            raise ValueError(
                f"{state_path}: no such file; {folder} is not a saved {FAISS_INDEX_FORMAT} index (it holds {found})"
            )
        state = load_index_state(state_path, FAISS_INDEX_FORMAT)
        try:
            version, backend, params = state["version"], state["backend"], dict(state["params"])
            dim, structure, digest = state["dim"], state["structure"], state["index_sha256"]
            ids, groups = state["ids"], state["groups"]
            labels = state["labels"] if version >= 2 else torch.arange(len(ids))
            next_label = int(state["next_label"]) if version >= 2 else len(ids)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{state_path}: not a complete {FAISS_INDEX_FORMAT} index (missing {e})") from e
        if not isinstance(version, int) or version > FAISS_STATE_VERSION:
            raise ValueError(
                f"{state_path}: version {version!r} of {FAISS_INDEX_FORMAT}; this oml-faiss reads up to "
                f"{FAISS_STATE_VERSION}"
            )
        backend_cls = BACKENDS.get(backend)
        if backend_cls is None or not issubclass(backend_cls, cls):
            expected = sorted(BACKENDS) if cls is FaissKnnIndex else cls.name
            raise ValueError(f"{state_path}: holds a {backend!r} index, not {expected}")
        if device is not None:
            params["device"] = device
        try:
            index = backend_cls(**params)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{state_path}: cannot make the {backend} index of its parameters: {e}") from e
        if not all(isinstance(t, Tensor) and t.ndim == 1 for t in (ids, groups, labels)):
            raise ValueError(f"{state_path}: ids, groups and labels must be 1-d tensors")
        if len(labels) != len(ids) or (len(labels) and int(labels[-1]) >= next_label):
            raise ValueError(
                f"{state_path}: {len(labels)} labels for {len(ids)} ids, next label {next_label}"
            )
        if len(ids) != len(groups) or (dim is None and len(ids)):
            raise ValueError(f"{state_path}: {len(ids)} ids, {len(groups)} groups for an index of dim {dim}")
        if dim is not None:
            faiss_path = folder / FAISS_INDEX_FILE
            faiss_index, source = _read_faiss_index(
                faiss_path, digest, mapped=mapped and index.device == "cpu"
            )
            if faiss_index.d != dim or faiss_index.ntotal != len(ids):
                raise ValueError(
                    f"{faiss_path}: holds {faiss_index.ntotal} vectors of dimension {faiss_index.d}, "
                    f"{state_path} {len(ids)} of dimension {dim}"
                )
            index._dim, index._structure = int(dim), structure
            index._index, index._source = index._to_device(faiss_index), source
            index._configure(index._index)
        index._ids.append(ids.long())
        index._groups.append(groups.long())
        index._labels.append(labels.long())
        index._next_label = next_label
        return index

    # -------------------------------------------------------------------------------------------- the build
    def _prepare(self, x: Tensor) -> np.ndarray:
        """float32, C-contiguous numpy rows; L2-normalised for ``"cosine"``."""
        x = x.detach().cpu().float()
        if self.distance == "cosine":
            x = x * inverse_norms(x)[:, None]
        return np.ascontiguousarray(x.numpy(), dtype=np.float32)

    def _own_index(self) -> None:
        """Before the first change of an index loaded memory-mapped (faiss aborts the process on a change of a
        mapped one): read it into memory from the file it was loaded from (see the module's docstring)."""
        if self._source is None:
            return
        self._index, self._source = self._source.read_owned(), None
        self._configure(self._index)

    def _ensure_built(self) -> None:
        if self._index is None and self._dim is not None:
            self._build()

    def _build(self) -> None:
        """Make the faiss index, train it on the buffered items (when it trains), move it to the device, index
        the buffered items."""
        assert self._dim is not None
        x = np.concatenate(self._pending) if self._pending else np.empty((0, self._dim), dtype=np.float32)
        index, structure = self._new_index(self._dim, len(x))
        if not index.is_trained:
            index.train(x)
        self._index, self._structure = self._to_device(index), structure
        self._configure(self._index)
        self._pending, self._n_pending = [], 0
        if len(x):
            self._add_vectors(x, self._labels.rows)

    def _flat(self, dim: int) -> Any:
        """An exact flat index of the distance's metric."""
        return faiss.IndexFlatIP(dim) if self.distance == "cosine" else faiss.IndexFlatL2(dim)

    @property
    def _metric(self) -> int:
        return faiss.METRIC_INNER_PRODUCT if self.distance == "cosine" else faiss.METRIC_L2

    def _to_device(self, index: Any) -> Any:
        if self.device == "cpu":
            return index
        if self._gpu_resources is None:
            self._gpu_resources = faiss.StandardGpuResources()
        return faiss.index_cpu_to_gpu(self._gpu_resources, int(self.device.partition(":")[2] or 0), index)

    def _set_nprobe(self, index: Any, nprobe: int) -> None:
        if self.device == "cpu":
            faiss.extract_index_ivf(index).nprobe = nprobe
        else:
            faiss.GpuParameterSpace().set_index_parameter(index, "nprobe", nprobe)

    # ------------------------------------------------------------------------------------------- the search
    def _raw_search(self, queries: Tensor, k: int) -> tuple[Tensor, LongTensor]:
        """faiss's ``k`` nearest (positions, ``-1`` for nothing found) as distances of :attr:`distance`, rows
        sorted by ``(distance, position)``."""
        found_d, found_p = self._faiss_search(self._prepare(queries), k)
        positions = self._positions(torch.from_numpy(np.asarray(found_p, dtype=np.int64)))
        raw = torch.from_numpy(np.asarray(found_d, dtype=np.float32))
        if self.distance == "l2":
            distances = raw.clamp(min=0).sqrt()
        else:
            distances = (1 - raw).clamp(0, 2)
        distances = distances.masked_fill(positions < 0, float("inf"))
        return sorted_by_distance_then_position(distances, positions)

    def _positions(self, labels: LongTensor) -> LongTensor:
        """The positions of the items of faiss ``labels`` (``-1`` stays ``-1``): the labels themselves unless
        items were removed from an IVF index."""
        if self._next_label == len(self):
            return labels
        found = torch.searchsorted(self._labels.rows, labels.clamp(min=0).contiguous())
        return torch.where(labels >= 0, found, labels)

    def _raw_search_ties(self, queries: Tensor, k: int) -> tuple[Tensor, LongTensor]:
        """:meth:`_raw_search` with the ties at the ``k``-th place completed
        (:func:`~oml_core.knn.ties.search_completing_ties`): faiss's heaps keep either end of a tie cut by ``k``
        (an inner-product heap keeps the highest positions). An approximate structure keeps the lowest positions
        of the tied items that it finds."""
        return search_completing_ties(
            lambda rows, fetch: self._raw_search(queries[rows], fetch), len(queries), k, self._index.ntotal
        )


class FaissFlatIndex(FaissKnnIndex):
    """``faiss_flat``: exact search by faiss's brute force (``IndexFlatL2`` / ``IndexFlatIP``, BLAS for 20 queries
    or more), the same neighbours as the core's ``exact`` backend (ties by add order; see the module's docstring).
    Memory: ``4 * dim`` bytes per item. ``seed`` is accepted for a uniform config (nothing is random here).

    Args:
        distance: ``"l2"`` or ``"cosine"``.
        seed: Unused.
        device: ``"cpu"`` or ``"cuda[:n]"`` (``GpuIndexFlat``; untested).
    """

    name = "faiss_flat"

    def _new_index(self, dim: int, n_train: int) -> tuple[Any, str]:
        return self._flat(dim), FLAT


class FaissIVFIndex(FaissKnnIndex):
    """``faiss_ivf``: an inverted file of full vectors (``IndexIVFFlat``). k-means splits the items into
    ``nlist`` lists (cells of their nearest centroid); a query scans the ``nprobe`` lists of its nearest
    centroids, computing exact distances there: about ``nprobe / nlist`` of the gallery per query. Recall grows
    with ``nprobe`` (``nprobe == nlist`` is exact). Rule of thumb: ``nlist`` about ``4 * sqrt(n)`` to
    ``16 * sqrt(n)``, ``nprobe`` about ``nlist / 8``. Memory: ``4 * dim + 8`` bytes per item. For cosine the
    k-means is spherical (unit centroids).

    Training: see the module's docstring; fewer than ``nlist`` items to train on give an exact flat index.

    Args:
        distance: ``"l2"`` or ``"cosine"``.
        nlist: Number of lists (k-means centroids), at least 1.
        nprobe: Lists scanned per query, ``1 <= nprobe <= nlist``.
        train_size: Train as soon as this many items are buffered (at least ``nlist``), bounding the buffer;
            ``None``: train on everything added before the first search or save.
        seed: The k-means seed (faiss's ``ClusteringParameters.seed``).
        device: ``"cpu"`` or ``"cuda[:n]"`` (``GpuIndexIVFFlat``, trained on the CPU; untested).
    """

    name = "faiss_ivf"
    trains = True

    def __init__(
        self,
        distance: str = "l2",
        nlist: int = 100,
        nprobe: int = 16,
        train_size: int | None = None,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        self.nlist = _int_arg(nlist, "nlist", minimum=1)
        self.nprobe = _int_arg(nprobe, "nprobe", minimum=1, maximum=self.nlist, maximum_name="nlist")
        self.train_size = _train_size(train_size, self.nlist, "nlist")
        super().__init__(distance, seed, device)

    def _params(self) -> dict[str, Any]:
        return {
            **super()._params(),
            "nlist": self.nlist,
            "nprobe": self.nprobe,
            "train_size": self.train_size,
        }

    def _new_index(self, dim: int, n_train: int) -> tuple[Any, str]:
        if n_train < self.nlist:
            _log_fallback(self.name, n_train, f"nlist={self.nlist}")
            return self._flat(dim), FLAT
        _log_few_points(self.name, n_train, self.nlist, "nlist")
        index = faiss.IndexIVFFlat(self._flat(dim), dim, self.nlist, self._metric)
        _seed_clustering(index.cp, self.seed, spherical=self.distance == "cosine")
        return index, "ivf"

    def _configure(self, index: Any) -> None:
        if self._structure != FLAT:
            self._set_nprobe(index, self.nprobe)

    def _add_vectors(self, x: np.ndarray, labels: Tensor) -> None:
        if self._structure == FLAT:
            self._index.add(x)
        else:
            self._index.add_with_ids(x, np.ascontiguousarray(labels.numpy(), dtype=np.int64))


class FaissHNSWIndex(FaissKnnIndex):
    """``faiss_hnsw``: a hierarchical navigable small-world graph of full vectors (``IndexHNSWFlat``). Each item
    is linked to up to ``M`` neighbours per level (``2 * M`` on the bottom one), found by a search of breadth
    ``efConstruction`` when it is inserted; a query descends the levels greedily and searches the bottom one with
    a candidate list of ``max(efSearch, k)`` (``k`` including the over-fetch of exclusion). No training; items
    are searchable as soon as added. Memory: ``4 * dim + 8 * M`` bytes per item, roughly.

    Determinism: levels are drawn from faiss's generator seeded by ``seed`` and the number of items already in
    the graph, and the build is deterministic for any thread count (see the module's docstring), so the same
    adds in the same order give the same graph.

    Args:
        distance: ``"l2"`` or ``"cosine"``.
        M: Neighbours per item and level (at least 2).
        efConstruction: Breadth of the insertion search (at least 1).
        efSearch: Breadth of the query search (at least 1; raised to ``k`` when smaller).
        seed: Seed of the levels.
        device: ``"cpu"`` only: faiss has no GPU HNSW (``"cuda"`` is a ``ValueError``).
    """

    name = "faiss_hnsw"

    def __init__(
        self,
        distance: str = "l2",
        M: int = 32,
        efConstruction: int = 40,
        efSearch: int = 64,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        self.M = _int_arg(M, "M", minimum=2)
        self.efConstruction = _int_arg(efConstruction, "efConstruction", minimum=1)
        self.efSearch = _int_arg(efSearch, "efSearch", minimum=1)
        super().__init__(distance, seed, device)

    def _params(self) -> dict[str, Any]:
        return {
            **super()._params(),
            "M": self.M,
            "efConstruction": self.efConstruction,
            "efSearch": self.efSearch,
        }

    def _gpu_unsupported(self) -> str | None:
        return "faiss has no GPU implementation of HNSW (IndexHNSWFlat)"

    def _new_index(self, dim: int, n_train: int) -> tuple[Any, str]:
        index = faiss.IndexHNSWFlat(dim, self.M, self._metric)
        index.hnsw.efConstruction = self.efConstruction
        index.hnsw.efSearch = self.efSearch
        return index, "hnsw"

    def _add_vectors(self, x: np.ndarray, labels: Tensor) -> None:
        self._index.hnsw.rng = faiss.RandomGenerator(_mix_seed(self.seed, self._index.ntotal))
        with contextlib.nullcontext() if HNSW_DETERMINISTIC_BUILD else _one_openmp_thread():
            self._index.add(x)

    def _faiss_search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        params = faiss.SearchParametersHNSW(efSearch=max(self.efSearch, k))
        return self._index.search(x, k, params=params)


class FaissIVFPQIndex(FaissKnnIndex):
    """``faiss_ivfpq``: an inverted file of product-quantised vectors (``IndexIVFPQ``), for galleries whose
    float vectors do not fit in memory. Each item is stored as ``m`` codes of ``nbits`` bits: its residual to its
    list's centroid is cut into ``m`` sub-vectors of ``dim / m`` entries, each replaced by the nearest of
    ``2 ** nbits`` centroids learnt by k-means; a query's distances are estimated from the codes (asymmetric
    distance computation), scanning ``nprobe`` of ``nlist`` lists as :class:`FaissIVFIndex` does.

    The estimates blur the order of close neighbours (recall@10 of about 0.75 with ``m = dim / 4`` on clustered
    data), so by default the ``k_factor * k`` best candidates are re-ranked by a finer code (``refine``,
    faiss's ``IndexRefine``): ``"sq8"`` (one byte per entry: recall@10 above 0.95 there), or ``"flat"`` (the float
    vectors: exact distances, no memory saved). Memory per item: ``m * nbits / 8 + 8`` bytes, plus ``dim`` bytes
    with ``"sq8"`` or ``4 * dim`` with ``"flat"`` (float vectors take ``4 * dim``). Returned distances are those
    of the last stage (approximate unless ``refine="flat"``).

    Training: see the module's docstring; fewer than ``max(nlist, 2 ** nbits)`` items to train on give an exact
    flat index.

    Args:
        distance: ``"l2"`` or ``"cosine"``.
        nlist: Number of lists (k-means centroids), at least 1.
        nprobe: Lists scanned per query, ``1 <= nprobe <= nlist``.
        m: Sub-quantizers (bytes per code with 8 bits); must divide ``dim``. ``None``: the largest divisor of
            ``dim`` that is at most ``min(dim / 4, 48)`` (at least 1): 8 at ``dim`` 32, 48 at 384 (whose
            8-dimensional sub-vectors train in 2-3 s on 20k items, where ``m`` 96 takes 65 s).
        nbits: Bits per sub-quantizer code, 1 to 16.
        refine: ``"sq8"``, ``"flat"`` or ``None`` (no re-ranking).
        k_factor: Candidates re-ranked per neighbour asked for (at least 1), with ``refine``.
        train_size: Train as soon as this many items are buffered (at least ``max(nlist, 2 ** nbits)``);
            ``None``: on everything added before the first search or save.
        seed: The seed of both k-means (coarse quantizer and PQ codebooks).
        device: ``"cpu"`` or ``"cuda[:n]"`` with ``refine=None`` (``GpuIndexIVFPQ``; faiss restricts ``m`` and
            ``nbits`` there; untested).
    """

    name = "faiss_ivfpq"
    trains = True
    REFINES: ClassVar[tuple[str, ...]] = ("sq8", "flat")

    def __init__(
        self,
        distance: str = "l2",
        nlist: int = 100,
        nprobe: int = 16,
        m: int | None = None,
        nbits: int = 8,
        refine: str | None = "sq8",
        k_factor: int = 4,
        train_size: int | None = None,
        seed: int = 0,
        device: str = "cpu",
    ) -> None:
        self.nlist = _int_arg(nlist, "nlist", minimum=1)
        self.nprobe = _int_arg(nprobe, "nprobe", minimum=1, maximum=self.nlist, maximum_name="nlist")
        self.m = None if m is None else _int_arg(m, "m", minimum=1)
        self.nbits = _int_arg(nbits, "nbits", minimum=1, maximum=16)
        if refine is not None and refine not in self.REFINES:
            raise ValueError(f"refine must be one of {list(self.REFINES)} or None, got {refine!r}")
        self.refine = refine
        self.k_factor = _int_arg(k_factor, "k_factor", minimum=1)
        self.train_size = _train_size(train_size, max(self.nlist, 2**self.nbits), "max(nlist, 2 ** nbits)")
        super().__init__(distance, seed, device)

    def _params(self) -> dict[str, Any]:
        return {
            **super()._params(),
            "nlist": self.nlist,
            "nprobe": self.nprobe,
            "m": self.m,
            "nbits": self.nbits,
            "refine": self.refine,
            "k_factor": self.k_factor,
            "train_size": self.train_size,
        }

    def _gpu_unsupported(self) -> str | None:
        if self.refine is not None:
            return (
                f"faiss has no GPU implementation of the refine stage (IndexRefine); set refine=None, "
                f"got {self.refine!r}"
            )
        return None

    def sub_quantizers(self, dim: int) -> int:
        """The ``m`` used for embeddings of dimension ``dim``."""
        if self.m is not None:
            return self.m
        return max(d for d in range(1, max(1, min(dim // 4, MAX_DEFAULT_M)) + 1) if dim % d == 0)

    def _check_dim(self, dim: int) -> None:
        if self.m is not None and dim % self.m:
            raise ValueError(f"m={self.m} must divide the embedding dimension {dim}")

    def _new_index(self, dim: int, n_train: int) -> tuple[Any, str]:
        needed = max(self.nlist, 2**self.nbits)
        if n_train < needed:
            _log_fallback(self.name, n_train, f"max(nlist={self.nlist}, 2 ** nbits={2**self.nbits})")
            return self._flat(dim), FLAT
        _log_few_points(self.name, n_train, self.nlist, "nlist")
        _log_few_points(self.name, n_train, 2**self.nbits, "2 ** nbits (PQ centroids)")
        index = faiss.IndexIVFPQ(
            self._flat(dim), dim, self.nlist, self.sub_quantizers(dim), self.nbits, self._metric
        )
        _seed_clustering(index.cp, self.seed, spherical=self.distance == "cosine")
        _seed_clustering(index.pq.cp, self.seed, spherical=False)
        if self.refine is None:
            return index, "ivfpq"
        if self.refine == "sq8":
            fine = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_8bit, self._metric)
        else:
            fine = self._flat(dim)
        return faiss.IndexRefine(index, fine), "ivfpq"

    def _configure(self, index: Any) -> None:
        if self._structure == FLAT:
            return
        self._set_nprobe(index, self.nprobe)
        if self.refine is not None:
            faiss.downcast_index(index).k_factor = float(self.k_factor)


#: The faiss backends by registered name (what :meth:`FaissKnnIndex.load` dispatches on).
BACKENDS: dict[str, type[FaissKnnIndex]] = {
    cls.name: cls for cls in (FaissFlatIndex, FaissIVFIndex, FaissHNSWIndex, FaissIVFPQIndex)
}


# ------------------------------------------------------------------------------------------------------- helpers
def _int_arg(
    value: Any, name: str, minimum: int, maximum: int | None = None, maximum_name: str | None = None
) -> int:
    """``value`` when it is an integer in ``[minimum, maximum]``, else a ``ValueError`` naming ``name``."""
    if not is_int(value):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum_name or maximum}]"
        detail = f" ({maximum_name}={maximum})" if maximum_name else ""
        raise ValueError(f"{name} must be {bound}{detail}, got {value!r}")
    return int(value)


def _train_size(value: int | None, minimum: int, minimum_name: str) -> int | None:
    if value is None:
        return None
    if not is_int(value):
        raise ValueError(f"train_size must be an integer or None, got {value!r}")
    if value < minimum:
        raise ValueError(f"train_size must be at least {minimum_name} = {minimum}, got {value!r}")
    return int(value)


def _check_device(device: Any, gpu_unsupported: str | None) -> str:
    """``device`` when it is usable, else a ``ValueError`` saying why."""
    if not isinstance(device, str) or not _DEVICE.fullmatch(device):
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:<n>', got {device!r}")
    if device == "cpu":
        return device
    if gpu_unsupported is not None:
        raise ValueError(f"device={device!r}: {gpu_unsupported}; use device='cpu'")
    if not hasattr(faiss, "StandardGpuResources"):
        raise ValueError(
            f"device={device!r} needs faiss built with GPU support (a faiss-gpu package); the installed faiss "
            f"{faiss.__version__} is CPU-only: use device='cpu'"
        )
    n_gpus = faiss.get_num_gpus() if torch.cuda.is_available() else 0
    gpu = int(device.partition(":")[2] or 0)
    if gpu >= n_gpus:
        raise ValueError(f"device={device!r}: faiss sees {n_gpus} CUDA device(s)")
    return device


def _seed_clustering(cp: Any, seed: int, spherical: bool) -> None:
    """Seed faiss's k-means (``ClusteringParameters``); its too-few-points warning (printed by C++ on stderr) is
    replaced by :func:`_log_few_points`."""
    cp.seed = seed
    cp.spherical = spherical
    cp.min_points_per_centroid = 1


def _log_fallback(backend: str, n_train: int, needed: str) -> None:
    LOGGER.warning(
        "%s: %d item(s) to train on, fewer than %s: building an exact flat index instead",
        backend,
        n_train,
        needed,
    )


def _log_few_points(backend: str, n_train: int, centroids: int, what: str) -> None:
    if n_train < MIN_POINTS_PER_CENTROID * centroids:
        LOGGER.warning(
            "%s: k-means of %s = %d centroids on %d items; faiss recommends at least %d per centroid (%d)",
            backend,
            what,
            centroids,
            n_train,
            MIN_POINTS_PER_CENTROID,
            MIN_POINTS_PER_CENTROID * centroids,
        )


def _mix_seed(seed: int, n_before: int) -> int:
    """A 62-bit generator seed from ``seed`` and the number of items already indexed."""
    return (seed * 0x9E3779B97F4A7C15 + n_before * 0xBF58476D1CE4E5B9 + 1) % (1 << 62)


@contextlib.contextmanager
def _one_openmp_thread() -> Iterator[None]:
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _write_faiss_index(index: Any, path: Path) -> str:
    """``faiss.write_index`` into ``path`` atomically (temporary file, fsync, ``os.replace``); its SHA-256."""
    digest = hashlib.sha256()
    with atomic_write(path) as file:

        def write(chunk: bytes) -> int:
            digest.update(chunk)
            return file.write(chunk)

        writer = faiss.PyCallbackIOWriter(write)
        faiss.write_index(index, writer)
        del writer  # flushes faiss's buffer into the file
    return digest.hexdigest()


def _read_faiss_index(path: Path, digest: str | None, mapped: bool) -> tuple[Any, _SavedFile | None]:
    """``faiss.read_index(path)`` after checking the file's SHA-256 against ``digest`` (streaming); ``mapped``:
    memory-mapped (:data:`MMAP_IFC`; see the module's docstring), with the open file to read it into memory from
    before its first change (``None`` when it is read into memory now).

    Raises:
        ValueError: no such file, another content than the one saved, or not a faiss index; names the file.
    """
    if not path.is_file():
        raise ValueError(f"{path}: no such file, although {FAISS_STATE_FILE} beside it describes one")
    mapped = mapped and MMAP_IFC is not None
    saved, kept = _SavedFile(path), False
    try:
        if saved.sha256() != digest:
            raise ValueError(
                f"{path}: its content is not the one saved with {FAISS_STATE_FILE} (SHA-256 mismatch: a "
                f"corrupt, partial or foreign file)"
            )
        index = faiss.read_index(str(path), MMAP_IFC) if mapped else saved.read_owned()
        kept = mapped
    except RuntimeError as e:
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise ValueError(f"{path}: not a readable faiss index ({reason})") from e
    finally:
        if not kept:
            saved.close()
    return index, saved if kept else None


class _SavedFile:
    """A saved ``faiss.index``, open for reading until :meth:`read_owned` or :meth:`close` (or until it is
    dropped: closed then, without a ``ResourceWarning``). Read through the open file, the content is the one
    checked, whatever became of the path since (replaced by a new save, or removed)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO = open(path, "rb")  # closed by close(), or when dropped
        self._close = weakref.finalize(self, self._file.close)

    def sha256(self) -> str:
        """The SHA-256 of the whole file, read through one buffer of :data:`_READ_CHUNK` bytes (the memory a
        memory-mapped load allocates beside the index's ids)."""
        sha, buffer = hashlib.sha256(), memoryview(bytearray(_READ_CHUNK))
        self._file.seek(0)
        while read := self._file.readinto(buffer):
            sha.update(buffer[:read])
        return sha.hexdigest()

    def read_owned(self) -> Any:
        """The faiss index of the file, read into memory (faiss's ``read_index`` without flags); closes it."""
        self._file.seek(0)
        try:
            return faiss.read_index(faiss.PyCallbackIOReader(self._file.read), 0)
        finally:
            self.close()

    def close(self) -> None:
        self._close()


__all__ = [
    "BACKENDS",
    "FAISS_INDEX_FILE",
    "FAISS_INDEX_FORMAT",
    "FAISS_STATE_FILE",
    "FAISS_STATE_VERSION",
    "FaissFlatIndex",
    "FaissHNSWIndex",
    "FaissIVFIndex",
    "FaissIVFPQIndex",
    "FaissKnnIndex",
]
