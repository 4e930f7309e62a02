"""``RetrievalResults``: what was retrieved for every query, ragged, with the ground truth when known."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence, Sized
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch
from torch import Tensor

from oml_core.const import (
    BLACK,
    BLUE,
    GRAY,
    GREEN,
    INPUT_TENSORS_KEY,
    IS_GALLERY_COLUMN,
    IS_QUERY_COLUMN,
    N_GT_SHOW_EMBEDDING_METRICS,
    RED,
    SEQUENCE_COLUMN,
    TColor,
)
from oml_core.functional.ragged_tops import check_unique_retrieved_ids
from oml_core.interfaces.datasets import IBaseDataset, IQueryGalleryDataset, IQueryGalleryLabeledDataset
from oml_core.interfaces.knn import IKnnIndex
from oml_core.knn.search import KnnResult, search_knn, search_knn_qg
from oml_core.utils.checks import check_int
from oml_core.utils.logs import get_logger
from oml_core.utils.ragged import Ragged

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from oml_core.registry import Registry

logger = get_logger(__name__)

# Frame colours of :meth:`RetrievalResults.visualize` and :meth:`RetrievalResults.visualize_as_html`, the
# manual's convention with OML's colours (:mod:`oml_core.const`, RGB 0..255):
#: The query: blue.
QUERY_COLOR: TColor = BLUE
#: A retrieved item relevant to the query: green.
RELEVANT_COLOR: TColor = GREEN
#: A retrieved item not relevant to the query: red.
IRRELEVANT_COLOR: TColor = RED
#: A retrieved item when the ground truth is unknown: black.
UNKNOWN_COLOR: TColor = BLACK
#: A ground-truth item of the query, shown for reference: grey.
GT_COLOR: TColor = GRAY
#: Ground-truth items shown per query by :meth:`RetrievalResults.visualize` by default.
N_GT_TO_SHOW = N_GT_SHOW_EMBEDDING_METRICS


def factorize(values: Any) -> Tensor:
    """Integer codes (a 1-D int64 tensor) of ``values`` (equal values, equal codes); missing values (NaN,
    None) each get their own negative code, so two missing values are never equal.

    Integer and bool arrays are taken as they are; other values are coded with ``pandas.factorize``.
    """
    if isinstance(values, Tensor):
        values = values.detach().cpu().numpy()
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D array of values, got shape {arr.shape}")
    if arr.dtype.kind in "iub":
        return torch.as_tensor(arr.astype(np.int64))
    import pandas as pd

    codes = pd.factorize(arr, use_na_sentinel=True)[0].astype(np.int64)
    missing = codes < 0
    codes[missing] = -1 - np.arange(int(missing.sum()))
    return torch.as_tensor(codes)


def _n_items(dataset: IBaseDataset) -> int:
    """``len(dataset)``: every dataset here has ``__len__``, which :class:`IBaseDataset` (torch's ``Dataset``)
    does not declare."""
    return len(cast(Sized, dataset))


def dataset_column(dataset: Any, names: Sequence[str]) -> np.ndarray | None:
    """The first of ``names`` found in ``dataset.extra_data`` (OML) or in the columns of ``dataset.df``."""
    for source in (getattr(dataset, "extra_data", None), getattr(dataset, "df", None)):
        if source is None:
            continue
        for name in names:
            try:
                found = name in source
            except TypeError:
                found = False
            if found:
                return np.asarray(source[name])
    return None


def get_sequence_ids(dataset: Any) -> Tensor | None:
    """Sequence ids of the dataset's items (1-D int64, from its ``sequence`` column), or ``None`` when it has
    none."""
    values = dataset_column(dataset, (SEQUENCE_COLUMN,))
    if values is None:
        return None
    if len(values) != len(dataset):
        raise ValueError(f"the {SEQUENCE_COLUMN!r} column has {len(values)} values for {len(dataset)} items")
    return factorize(values)


def get_query_gallery_ids(dataset: Any, what: str = "the dataset") -> tuple[Tensor, Tensor]:
    """``(query_ids, gallery_ids)``: the dataset indices of the queries and of the gallery items of a dataset
    with a query/gallery split (``get_query_ids()``, ``get_gallery_ids()``), as 1-D CPU LongTensors.

    Args:
        dataset: A dataset with a query/gallery split.
        what: How the error messages name the dataset (``"the validation split"``).

    Raises:
        ValueError: the dataset has no queries, or no gallery items (nothing could be retrieved or measured);
            the message names ``what`` and what is missing.
    """
    query_ids = torch.as_tensor(dataset.get_query_ids(), dtype=torch.long).reshape(-1).cpu()
    gallery_ids = torch.as_tensor(dataset.get_gallery_ids(), dtype=torch.long).reshape(-1).cpu()
    for ids, items, column in (
        (query_ids, "queries", IS_QUERY_COLUMN),
        (gallery_ids, "gallery items", IS_GALLERY_COLUMN),
    ):
        if not len(ids):
            raise ValueError(f"{what} has no {items} ({column} is False for every row)")
    return query_ids, gallery_ids


def labels_of(dataset: Any) -> np.ndarray | None:
    """The labels of a dataset (``dataset.get_labels()`` as an array), or ``None`` for one without labels."""
    get_labels = getattr(dataset, "get_labels", None)
    return np.asarray(get_labels()) if callable(get_labels) else None


def _factorize_together(first: Any, second: Any) -> tuple[Tensor, Tensor]:
    """Codes of two arrays of values with one coding (equal values across them get equal codes)."""
    first, second = np.asarray(first), np.asarray(second)
    if first.dtype != second.dtype:  # compare as python objects: 1 and "1" stay different
        first, second = first.astype(object), second.astype(object)
    codes = factorize(np.concatenate([first, second]))
    return codes[: len(first)], codes[len(first) :]


def _image_of(dataset: Any, item: int, color: TColor) -> np.ndarray:
    """``dataset.visualize(item, color)`` when the dataset can draw its items, else its input tensor ``[C, H,
    W]`` (or ``[H, W]``) scaled to ``[0, 1]``."""
    draw = getattr(dataset, "visualize", None)
    if callable(draw):
        return np.asarray(draw(item, color))
    image = dataset[item].get(getattr(dataset, "input_tensors_key", INPUT_TENSORS_KEY))
    if not isinstance(image, Tensor) or image.ndim not in (2, 3):
        raise TypeError(
            f"{type(dataset).__name__} can neither visualize its items nor gives image tensors [C, H, W]"
        )
    image = image.detach().float().cpu()
    image = (image - image.min()) / (image.max() - image.min()).clamp(min=1e-12)
    return (image.permute(1, 2, 0) if image.ndim == 3 else image).numpy()


def _ragged(rows: Sequence[Any], dtype: torch.dtype | None, name: str) -> Ragged:
    """``rows`` as a :class:`Ragged` (of ``dtype`` when given); ``ValueError`` naming ``name`` and the query
    whose row is not 1-D."""
    try:
        return Ragged.from_tensors(rows, dtype)
    except ValueError as error:
        raise ValueError(f"{name}: {error}".replace("element", "query")) from None


class RetrievalResultsError(ValueError, RuntimeError):
    """A query's retrieved items break the results' contract: distances not sorted ascending (or NaN), or not as
    many as its retrieved ids. A ``ValueError`` as oml's other bad inputs, and a ``RuntimeError``: OML's type in
    the same cases ("Distances must be sorted", "Number of distances and retrieved items must match"), so that code
    catching either works."""


class RetrievalResults:
    """The items retrieved for every query (closest first), their distances and the ground truth.

    Everything is ragged: query ``i`` has ``len(retrieved_ids[i])`` retrieved items, possibly none. Ids are
    positions within the gallery (``0..n_gallery-1``), not dataset indices. The per-query sequences are kept
    as :class:`~oml_core.utils.ragged.Ragged` (one flat tensor and the lengths; ``rr.retrieved_ids[i]`` is a
    1-D tensor, ``tuple(rr.retrieved_ids)`` all of them), so 100k queries cost two tensors, not 100k. The
    results are immutable: post-processors build new ones.

    Args:
        distances: ``n_query`` 1-D tensors of distances to the retrieved items, sorted ascending.
        retrieved_ids: ``n_query`` 1-D integer tensors, of the same lengths as ``distances``.
        gt_ids: ``n_query`` 1-D integer tensors of the gallery items relevant to every query, or ``None`` when
            the ground truth is unknown.
        n_gallery: The number of gallery items every query could retrieve (the gallery size minus the items
            ignored for it: itself, its sequence), one int for all or one per query; ``None`` when unknown.
            Fall-out needs it.

    Raises:
        RetrievedIdsNotUniqueError: a query retrieves an id more than once (a ``RuntimeError``, OML's type, and a
            ``ValueError``); the message starts with OML's "Retrieved ids must be unique" and names the query
            and the id.
        RetrievalResultsError: a query's distances and ids of different lengths, or its distances unsorted (or
            NaN): a ``ValueError`` and OML's ``RuntimeError``; the message names the query index.
        ValueError: mismatched numbers of queries, a tensor that is not 1-D, or an ``n_gallery`` below a query's
            number of retrieved or relevant items; the message names the query index.

    Warns:
        UserWarning: OML's "Some of the queries don't have available gts." when ``gt_ids`` has an empty entry.
    """

    def __init__(
        self,
        distances: Sequence[Tensor],
        retrieved_ids: Sequence[Tensor],
        gt_ids: Sequence[Tensor] | None = None,
        n_gallery: int | Sequence[int] | Tensor | None = None,
    ) -> None:
        n = len(distances)
        if len(retrieved_ids) != n:
            raise ValueError(
                f"distances are given for {n} queries but retrieved_ids for {len(retrieved_ids)}"
            )
        if gt_ids is not None and len(gt_ids) != n:
            raise ValueError(f"distances are given for {n} queries but gt_ids for {len(gt_ids)}")
        self._distances = _ragged(distances, None, "distances")
        self._retrieved_ids = _ragged(retrieved_ids, torch.long, "retrieved_ids")
        self._gt_ids = None if gt_ids is None else _ragged(gt_ids, torch.long, "gt_ids")
        self._validate()
        self._n_gallery = None if n_gallery is None else self._checked_n_gallery(n_gallery)
        if self._gt_ids is not None and bool((self._gt_ids.lengths == 0).any()):
            warnings.warn("Some of the queries don't have available gts.", stacklevel=2)

    def _checked_n_gallery(self, n_gallery: int | Sequence[int] | Tensor) -> Tensor:
        values = torch.as_tensor(n_gallery).detach().cpu()
        if values.dtype.is_floating_point or values.dtype == torch.bool or values.ndim > 1:
            raise ValueError(
                f"n_gallery must be an int or one int per query, got {values.dtype} {tuple(values.shape)}"
            )
        values = values.long().expand(self.n_queries) if values.ndim == 0 else values.long()
        if len(values) != self.n_queries:
            raise ValueError(f"n_gallery has {len(values)} values for {self.n_queries} queries")
        n_retrieved = self._retrieved_ids.lengths
        n_gts = self._gt_ids.lengths if self._gt_ids is not None else torch.zeros_like(n_retrieved)
        bad = (values < n_retrieved) | (values < n_gts)
        if bad.any():
            i = int(bad.nonzero()[0, 0])
            raise ValueError(
                f"query {i}: n_gallery={int(values[i])} is below its {int(n_retrieved[i])} retrieved or "
                f"{int(n_gts[i])} relevant items"
            )
        return values.clone()

    def _validate(self) -> None:
        """Checks on the flat values, vectorised over the queries."""
        lengths, n_retrieved = self._distances.lengths, self._retrieved_ids.lengths
        if not torch.equal(lengths, n_retrieved):
            i = int((lengths != n_retrieved).nonzero()[0, 0])
            raise RetrievalResultsError(
                f"query {i}: {int(lengths[i])} distances for {int(n_retrieved[i])} retrieved ids"
            )
        check_unique_retrieved_ids(self._retrieved_ids)
        flat = self._distances.values
        if flat.numel() == 0:
            return
        if flat.dtype.is_floating_point:
            nan = torch.isnan(flat)
            if nan.any():
                query = int(self._distances.row_ids()[nan.nonzero()[0, 0]])
                raise RetrievalResultsError(
                    f"query {query}: distances contain NaN: {self._distances[query][:10]}"
                )
        # entry j: flat[j + 1] < flat[j] within one query
        decreasing = (flat[1:] < flat[:-1]) & (
            self._distances.row_ids()[1:] == self._distances.row_ids()[:-1]
        )
        if decreasing.any():
            query = int(self._distances.row_ids()[int(decreasing.nonzero()[0, 0])])
            raise RetrievalResultsError(
                f"query {query}: distances must be sorted ascending, got {self._distances[query][:10]}"
            )

    # ----------------------------------------------------------------------------------------- access
    @property
    def distances(self) -> Ragged:
        """Sorted distances from every query to its retrieved items (``n_query`` 1-D tensors)."""
        return self._distances

    @property
    def retrieved_ids(self) -> Ragged:
        """Gallery positions (``0..n_gallery-1``) retrieved for every query, closest first."""
        return self._retrieved_ids

    @property
    def gt_ids(self) -> Ragged | None:
        """Gallery positions relevant to every query, or ``None`` when the ground truth is unknown."""
        return self._gt_ids

    @property
    def n_gallery(self) -> Tensor | None:
        """``[n_query]`` int64: the gallery items every query could retrieve (``None`` when unknown)."""
        return self._n_gallery

    @property
    def n_gts(self) -> list[int]:
        """Number of relevant gallery items of every query: ``[len(g) for g in gt_ids]``.

        Raises:
            ValueError: the ground truth is unknown (``gt_ids is None``).
        """
        if self._gt_ids is None:
            raise ValueError("these retrieval results have no ground truth (gt_ids is None)")
        return self._gt_ids.lengths.tolist()

    @property
    def n_queries(self) -> int:
        """Number of queries."""
        return len(self._distances)

    @property
    def n_retrieved_items(self) -> int:
        """The largest number of items retrieved for a query (0 when there are no queries)."""
        return int(self._retrieved_ids.lengths.max()) if self.n_queries else 0

    def __len__(self) -> int:
        """Number of queries."""
        return self.n_queries

    def is_empty(self) -> bool:
        """True when no query has any retrieved item."""
        return self._retrieved_ids.values.numel() == 0

    def deepcopy(self) -> RetrievalResults:
        """An independent copy (postprocessors return new results and leave the input unchanged)."""
        return RetrievalResults(
            self._distances.clone(),
            self._retrieved_ids.clone(),
            None if self._gt_ids is None else self._gt_ids.clone(),
            self._n_gallery,
        )

    def __repr__(self) -> str:
        gt = "unknown" if self._gt_ids is None else f"{sum(self.n_gts)} in total"
        return (
            f"{type(self).__name__}(n_queries={self.n_queries}, n_retrieved_items={self.n_retrieved_items}, "
            f"ground truth: {gt})"
        )

    # -------------------------------------------------------------------------------------- building
    @classmethod
    def _from_knn(cls, result: KnnResult) -> RetrievalResults:
        return cls(result.distances, result.retrieved_ids, result.gt_ids, n_gallery=result.n_gallery)

    @classmethod
    def from_embeddings(
        cls,
        embeddings: Tensor,
        dataset: IQueryGalleryDataset | IQueryGalleryLabeledDataset,
        n_items: int = 100,
        distance: str = "l2",
        chunk_size: int | None = None,
        memory_budget: int | None = None,
        verbose: bool = False,
        knn_backend: IKnnIndex | Mapping[str, Any] | str | None = None,
        registry: Registry | None = None,
    ) -> RetrievalResults:
        """Retrieve the ``n_items`` closest gallery items of every query of ``dataset``.

        Memory-bounded and exact (:func:`~oml_core.knn.search.search_knn`): the distances are computed in
        blocks of at most ``memory_budget`` bytes, never as a whole ``[n_query, n_gallery]`` matrix; when the
        queries and the gallery are the same items ("1 vs rest") only half of the matrix is computed. A query
        never retrieves itself (the same dataset index) nor, when the dataset has a ``sequence`` column
        (``dataset.extra_data`` or ``dataset.df``), an item of its own sequence; such items are not ground
        truth either, so some queries may get fewer than ``n_items``. Equal distances are ordered by gallery
        position.

        Args:
            embeddings: ``[len(dataset), dim]`` embeddings of all the dataset items, in dataset order.
            dataset: Dataset with a query/gallery split; its labels (``get_labels()``), when it has them, give
                the ground truth: the gallery items with the query's label.
            n_items: Number of closest gallery items to retrieve (clipped by the gallery size).
            distance: ``"l2"`` or ``"cosine"`` (``1 - cosine similarity``).
            chunk_size: Queries per block (``None``: ``STRIP_ROWS``).
            memory_budget: Bytes of one block (``None``: 16 MiB on the CPU, where blocks then stay in the cache;
                1 GiB on accelerators). See :func:`~oml_core.knn.blocks.iter_distance_blocks`.
            verbose: Set ``True`` to see a progress bar.
            knn_backend: Search through a registered kNN backend instead (kind ``knn_backend``): its name, a
                ``{name, args}`` spec (``distance`` is filled in) or an empty ``IKnnIndex``; ``None``: the exact
                blockwise search above. The exclusion rules are the same for every backend
                (:func:`~oml_core.knn.backend_search.search_with_index`); ``chunk_size``, ``memory_budget``
                and ``verbose`` are the exact search's and are not passed on.
            registry: Where ``knn_backend`` is looked up (``default_registry()`` when ``None``).

        Float16 and bfloat16 embeddings give the distances that their float32 values give (they are computed
        in float32, block by block).

        Returns:
            Retrieval results with ids as positions within ``dataset.get_gallery_ids()``; ``gt_ids`` is
            ``None`` for a dataset without labels; ``n_gallery`` is filled.

        Raises:
            ValueError: the number of embeddings is not ``len(dataset)``, the dataset has no queries or no
                gallery items (:func:`get_query_gallery_ids`), an embedding is not finite (the message names
                its row), and the errors of :func:`~oml_core.knn.search.search_knn`.
            ~oml_core.knn.distances.NonFiniteDistanceError: (a ``ValueError``) the embeddings are so large
                that a distance overflows float32 (or their own float dtype when wider); the message names the
                query and the gallery item and their rows of ``embeddings``.
        """
        if len(embeddings) != _n_items(dataset):
            raise ValueError(f"got {len(embeddings)} embeddings for a dataset of {_n_items(dataset)} items")
        query_ids, gallery_ids = get_query_gallery_ids(dataset, f"the dataset ({type(dataset).__name__})")
        labels = labels_of(dataset)
        if knn_backend is not None:
            from oml_core.knn.backend_search import make_knn_index, search_with_index

            result = search_with_index(
                make_knn_index(knn_backend, distance, registry),
                embeddings,
                query_ids,
                gallery_ids,
                n_items,
                labels_gt=None if labels is None else factorize(labels),
                sequence_ids=get_sequence_ids(dataset),
            )
            return cls._from_knn(result)
        result = search_knn(
            embeddings=embeddings,
            ids_query=query_ids,
            ids_gallery=gallery_ids,
            top_n=n_items,
            labels_gt=None if labels is None else factorize(labels),
            sequence_ids=get_sequence_ids(dataset),
            distance=distance,
            chunk_size=chunk_size,
            memory_budget=memory_budget,
            verbose=verbose,
        )
        return cls._from_knn(result)

    @classmethod
    def from_embeddings_qg(
        cls,
        embeddings_query: Tensor,
        embeddings_gallery: Tensor,
        dataset_query: IBaseDataset,
        dataset_gallery: IBaseDataset,
        n_items: int = 100,
        distance: str = "l2",
        chunk_size: int | None = None,
        memory_budget: int | None = None,
        verbose: bool = False,
        knn_backend: IKnnIndex | Mapping[str, Any] | str | None = None,
        registry: Registry | None = None,
    ) -> RetrievalResults:
        """Retrieve the ``n_items`` closest items of ``dataset_gallery`` for every item of ``dataset_query``.

        Queries and gallery are separate datasets, so no query is a gallery item: nothing is excluded as
        "itself". Items sharing a ``sequence`` id (both datasets having the column; the values are compared
        across them) are ignored. The ground truth, when both datasets have labels (``get_labels()``), is the
        gallery items with the query's label. Computed as :meth:`from_embeddings` is.

        Args:
            embeddings_query: ``[len(dataset_query), dim]`` embeddings of the queries.
            embeddings_gallery: ``[len(dataset_gallery), dim]`` embeddings of the gallery items.
            dataset_query: Dataset of the queries.
            dataset_gallery: Dataset of the gallery items.
            n_items: Number of closest gallery items to retrieve (clipped by the gallery size).
            distance: ``"l2"`` or ``"cosine"``.
            chunk_size: Queries per block (``None``: ``STRIP_ROWS``).
            memory_budget: Bytes of one block (``None``: as in :meth:`from_embeddings`).
            verbose: Set ``True`` to see a progress bar.
            knn_backend: Search through a registered kNN backend instead, as in :meth:`from_embeddings`
                (:func:`~oml_core.knn.backend_search.search_with_index_qg`).
            registry: Where ``knn_backend`` is looked up (``default_registry()`` when ``None``).

        Returns:
            Retrieval results with ids as indices of ``dataset_gallery``, ``n_gallery`` filled.

        Raises:
            ValueError: numbers of embeddings that are not the datasets' lengths, an empty dataset, and the
                errors of :func:`~oml_core.knn.search.search_knn_qg` (non-finite embeddings, distances
                that overflow: see :meth:`from_embeddings`).
        """
        for name, emb, ds in (
            ("query", embeddings_query, dataset_query),
            ("gallery", embeddings_gallery, dataset_gallery),
        ):
            if len(emb) != _n_items(ds):
                raise ValueError(
                    f"got {len(emb)} {name} embeddings for a {name} dataset of {_n_items(ds)} items"
                )
            if not _n_items(ds):
                items = "queries" if name == "query" else "gallery items"
                raise ValueError(f"dataset_{name} is empty: there are no {items}")
        labels = (labels_of(dataset_query), labels_of(dataset_gallery))
        sequences = (
            dataset_column(dataset_query, (SEQUENCE_COLUMN,)),
            dataset_column(dataset_gallery, (SEQUENCE_COLUMN,)),
        )
        has_labels, has_sequences = all(v is not None for v in labels), all(v is not None for v in sequences)
        labels_query, labels_gallery = _factorize_together(*labels) if has_labels else (None, None)
        seq_query, seq_gallery = _factorize_together(*sequences) if has_sequences else (None, None)
        if knn_backend is not None:
            from oml_core.knn.backend_search import make_knn_index, search_with_index_qg

            result = search_with_index_qg(
                make_knn_index(knn_backend, distance, registry),
                embeddings_query,
                embeddings_gallery,
                n_items,
                labels_query,
                labels_gallery,
                seq_query,
                seq_gallery,
            )
            return cls._from_knn(result)
        result = search_knn_qg(
            embeddings_query=embeddings_query,
            embeddings_gallery=embeddings_gallery,
            top_n=n_items,
            labels_query=labels_query,
            labels_gallery=labels_gallery,
            sequence_query=seq_query,
            sequence_gallery=seq_gallery,
            distance=distance,
            chunk_size=chunk_size,
            memory_budget=memory_budget,
            verbose=verbose,
        )
        return cls._from_knn(result)

    # --------------------------------------------------------------------------------- visualisation
    def visualize(
        self,
        query_ids: Sequence[int],
        dataset: IQueryGalleryDataset,
        n_galleries_to_show: int = 5,
        n_gt_to_show: int = N_GT_TO_SHOW,
        verbose: bool = False,
        show: bool = False,
    ) -> Figure:
        """Draw the queries ``query_ids`` with their closest retrieved items and some of their ground truth.

        One row per query, in the manual's colours (OML's :data:`~oml_core.const.BLUE`, ``GREEN``, ``RED``,
        ``GRAY``, ``BLACK``): the query (blue frame, :data:`QUERY_COLOR`), its first ``n_galleries_to_show``
        retrieved items framed green (relevant, :data:`RELEVANT_COLOR`) or red (not, :data:`IRRELEVANT_COLOR`;
        black, :data:`UNKNOWN_COLOR`, when the ground truth is unknown), titled ``#<gallery position>:
        <distance>``, then its first ``n_gt_to_show`` ground-truth items (grey frame, :data:`GT_COLOR`), titled
        ``GT #<gallery position>``. Images come from ``dataset.visualize(item, color)`` when the dataset can
        draw its items (which draws the item's bounding box in the colour), else from its input tensors.

        Args:
            query_ids: Positions among the queries (``0..n_query-1``).
            dataset: The dataset the results were computed on (query/gallery split).
            n_galleries_to_show: Retrieved items per query (clipped by the most any shown query has).
            n_gt_to_show: Ground-truth items per query (clipped likewise; none when unknown).
            verbose: Set ``True`` to log (``INFO``) what is drawn.
            show: Set ``True`` to show the figure (``pyplot``) as well as return it.

        Raises:
            TypeError: the dataset can neither draw its items nor gives image tensors (checked first, on its first
                query, as OML checks the dataset's type first).
            ValueError: the dataset's number of queries differs, or a query id is out of range.
        """
        query_ids_ds, gallery_ids_ds = self._dataset_query_gallery_ids(dataset)
        if not callable(getattr(dataset, "visualize", None)) and len(query_ids_ds):
            _image_of(dataset, int(query_ids_ds[0]), QUERY_COLOR)  # its TypeError before the query ids' check
        return self.visualize_with_functions(
            query_ids,
            lambda i, color: _image_of(dataset, int(query_ids_ds[i]), color),
            lambda j, color: _image_of(dataset, int(gallery_ids_ds[j]), color),
            n_galleries_to_show=n_galleries_to_show,
            n_gt_to_show=n_gt_to_show,
            verbose=verbose,
            show=show,
        )

    def _dataset_query_gallery_ids(self, dataset: IQueryGalleryDataset) -> tuple[Tensor, Tensor]:
        """The dataset indices of the queries and gallery items; ``ValueError`` when the dataset has another
        number of queries than these results."""
        query_ids_ds = torch.as_tensor(dataset.get_query_ids(), dtype=torch.long)
        gallery_ids_ds = torch.as_tensor(dataset.get_gallery_ids(), dtype=torch.long)
        if len(query_ids_ds) != self.n_queries:
            raise ValueError(
                f"{type(dataset).__name__} has {len(query_ids_ds)} queries, these results {self.n_queries}"
            )
        return query_ids_ds, gallery_ids_ds

    def _shown(
        self, query_ids: Sequence[int], n_galleries_to_show: int, n_gt_to_show: int
    ) -> tuple[list[int], int, int]:
        """``(query_ids, n_shown, n_gt_shown)``: the checked query positions and the numbers of retrieved and
        ground-truth columns, clipped by the most any of those queries has (no ground truth: 0).

        Raises:
            ValueError: a count that is not an int (``n_galleries_to_show >= 1``, ``n_gt_to_show >= 0``), no
                query, or a query position out of range.
        """
        query_ids = [int(i) for i in query_ids]
        for name, value, least in (
            ("n_galleries_to_show", n_galleries_to_show, 1),
            ("n_gt_to_show", n_gt_to_show, 0),
        ):
            check_int(value, name, least, expected=f"an integer >= {least}")
        bad = [i for i in query_ids if not 0 <= i < self.n_queries]
        if not query_ids or bad:
            raise ValueError(
                f"query_ids must be non-empty positions in [0, {self.n_queries - 1}], got {bad or query_ids}"
            )
        n_shown = min(n_galleries_to_show, max(len(self._retrieved_ids[i]) for i in query_ids))
        n_gt_shown = (
            0 if self._gt_ids is None else min(n_gt_to_show, max(len(self._gt_ids[i]) for i in query_ids))
        )
        return query_ids, n_shown, n_gt_shown

    def _relevance(self, query: int, position: int) -> bool | None:
        """Whether gallery ``position`` is relevant to ``query`` (``None``: the ground truth is unknown)."""
        if self._gt_ids is None:
            return None
        return bool((self._gt_ids[query] == position).any())

    def visualize_as_html(
        self,
        query_ids: Sequence[int],
        dataset: IQueryGalleryDataset,
        n_galleries_to_show: int = 3,
        n_gt_to_show: int = N_GT_TO_SHOW,
        show: bool = False,
        save_path: str | Path | None = None,
    ) -> str:
        """The queries ``query_ids``, their closest retrieved items and some of their ground truth as HTML.

        The HTML counterpart of :meth:`visualize` (OML's method of this name), self-contained: every image is
        embedded as a base64 PNG (``<img src="data:image/png;base64,...">``), so the string (or the file) can
        be shown anywhere, e.g. in a notebook with ``show=True``. The images are those of :meth:`visualize`
        (``dataset.visualize(item, color)``, else the input tensors), in blocks framed by a CSS border of the
        same colours: the query blue (:data:`QUERY_COLOR`), a retrieved item green when relevant
        (:data:`RELEVANT_COLOR`), red when not (:data:`IRRELEVANT_COLOR`), black when the ground truth is
        unknown (:data:`UNKNOWN_COLOR`), a ground-truth item grey (:data:`GT_COLOR`). A dataset with OML's
        ``visualize_as_html(item, title, color)`` (``IHTMLVisualizableDataset``: audio) gives its own blocks.

        Layout: ``<div class="oml-retrieval-results">`` holding one ``<div class="oml-row" data-query="i">``
        per query (``display: flex``), whose blocks ``<div class="oml-item" data-kind=...>`` are, in order:

        - the query: ``data-kind="query"``, title ``Query #i``;
        - its first ``n_galleries_to_show`` retrieved items: ``data-kind="retrieved"``, ``data-position`` (the
          gallery position), ``data-distance`` (the distance, full precision), ``data-relevant`` (``true``,
          ``false`` or ``unknown``), title ``#<position>: <distance to 3 decimals>``; then, so that the columns
          line up, ``data-kind="placeholder"`` blocks for a query that retrieved fewer than the others;
        - its first ``n_gt_to_show`` ground-truth items: ``data-kind="gt"``, ``data-position``, title
          ``GT #<position>``.

        Both counts are clipped by the most any of the shown queries has, as in :meth:`visualize`.

        Args:
            query_ids: Positions among the queries (``0..n_query-1``).
            dataset: The dataset the results were computed on (query/gallery split).
            n_galleries_to_show: Retrieved items per query (OML's default: 3).
            n_gt_to_show: Ground-truth items per query (none when unknown).
            show: Set ``True`` to display the HTML in a notebook (needs IPython) as well as return it.
            save_path: Where to also write it as a whole HTML page (UTF-8, written atomically), or ``None``.

        Returns:
            The HTML fragment (without ``<html>``/``<body>``, as OML's).

        Raises:
            ValueError: the dataset's number of queries differs, a query id is out of range, a bad count.
            ImportError: ``show=True`` without IPython installed (checked before any work).
        """
        if show:
            try:
                from IPython.display import HTML, display
            except ImportError as error:
                raise ImportError(
                    "visualize_as_html(show=True) needs IPython (pip install ipython); without it, use the "
                    "returned string or save_path"
                ) from error
        query_ids, n_shown, n_gt_shown = self._shown(query_ids, n_galleries_to_show, n_gt_to_show)
        query_ids_ds, gallery_ids_ds = self._dataset_query_gallery_ids(dataset)

        def block(item: int, color: TColor, title: str, attributes: dict[str, Any]) -> str:
            own_html = getattr(dataset, "visualize_as_html", None)
            inner = (
                str(own_html(item=item, title=title, color=color))
                if callable(own_html)
                else _image_block_html(_image_of(dataset, item, color), color, title)
            )
            return _item_html(inner, attributes)

        rows = []
        for i in query_ids:
            blocks = [block(int(query_ids_ds[i]), QUERY_COLOR, f"Query #{i}", {"kind": "query"})]
            retrieved = self._retrieved_ids[i][:n_shown].tolist()
            for position, dist in zip(retrieved, self._distances[i][:n_shown].tolist()):
                relevant = self._relevance(i, position)
                color = _relevance_color(relevant)
                attributes = {
                    "kind": "retrieved",
                    "position": position,
                    "distance": repr(float(dist)),
                    "relevant": "unknown" if relevant is None else str(relevant).lower(),
                }
                blocks.append(
                    block(int(gallery_ids_ds[position]), color, f"#{position}: {dist:.3f}", attributes)
                )
            blocks += [_placeholder_html()] * (n_shown - len(retrieved))
            gts = [] if self._gt_ids is None else self._gt_ids[i][:n_gt_shown].tolist()
            for position in gts:
                attributes = {"kind": "gt", "position": position}
                blocks.append(block(int(gallery_ids_ds[position]), GT_COLOR, f"GT #{position}", attributes))
            rows.append(
                f'<div class="oml-row" data-query="{i}" style="display: flex; justify-content: left;">'
                + "".join(blocks)
                + "</div>"
            )
        fragment = '<div class="oml-retrieval-results">\n' + "\n".join(rows) + "\n</div>"

        if save_path is not None:
            from oml_core.utils.atomic import atomic_write_bytes

            atomic_write_bytes(Path(save_path), _html_page(fragment).encode("utf-8"))
        if show:
            display(HTML(fragment))
        return fragment

    def visualize_qg(
        self,
        query_ids: Sequence[int],
        dataset_query: IBaseDataset,
        dataset_gallery: IBaseDataset,
        n_galleries_to_show: int = 5,
        n_gt_to_show: int = N_GT_TO_SHOW,
        verbose: bool = False,
        show: bool = False,
    ) -> Figure:
        """:meth:`visualize` for results of :meth:`from_embeddings_qg`: queries are items of
        ``dataset_query``, retrieved ids items of ``dataset_gallery``.

        Raises:
            ValueError: ``dataset_query`` has another number of items than there are queries, or a query id
                is out of range.
        """
        if _n_items(dataset_query) != self.n_queries:
            raise ValueError(
                f"{type(dataset_query).__name__} has {_n_items(dataset_query)} items, these results {self.n_queries} "
                "queries"
            )
        return self.visualize_with_functions(
            query_ids,
            lambda i, color: _image_of(dataset_query, i, color),
            lambda j, color: _image_of(dataset_gallery, j, color),
            n_galleries_to_show=n_galleries_to_show,
            n_gt_to_show=n_gt_to_show,
            verbose=verbose,
            show=show,
        )

    def visualize_with_functions(
        self,
        query_ids: Sequence[int],
        visualize_query_fn: Callable[[int, TColor], np.ndarray],
        visualize_gallery_fn: Callable[[int, TColor], np.ndarray],
        n_galleries_to_show: int = 5,
        n_gt_to_show: int = N_GT_TO_SHOW,
        verbose: bool = False,
        show: bool = False,
    ) -> Figure:
        """The figure of :meth:`visualize`, with images from ``visualize_query_fn(query position, colour)`` and
        ``visualize_gallery_fn(gallery position, colour)``.

        Axes are created only for the images drawn (``len(fig.axes)`` is their number); every image keeps a
        frame (its axes' spines) in its colour. The layout is computed from the figure's size
        (:func:`~oml_core.retrieval.figure_grid.image_grid`: no two axes overlap, every title stays in the
        figure), not measured by ``tight_layout``.
        """
        query_ids, n_shown, n_gt_shown = self._shown(query_ids, n_galleries_to_show, n_gt_to_show)
        if verbose:
            logger.info(
                "Visualizing %d retrieved and %d ground-truth items for queries %s",
                n_shown,
                n_gt_shown,
                query_ids,
            )
        from oml_core.retrieval.figure_grid import draw_framed_image, image_grid

        n_cols = 1 + n_shown + n_gt_shown
        fig, grid = image_grid(len(query_ids), n_cols, show=show)
        for row, i in enumerate(query_ids):
            draw_framed_image(
                fig, grid[row, 0], visualize_query_fn(i, QUERY_COLOR), QUERY_COLOR, f"Query #{i}"
            )
            for j, (position, dist) in enumerate(
                zip(self._retrieved_ids[i][:n_shown].tolist(), self._distances[i].tolist())
            ):
                color = _relevance_color(self._relevance(i, position))
                image = visualize_gallery_fn(position, color)
                draw_framed_image(fig, grid[row, 1 + j], image, color, f"#{position}: {dist:.3f}")
            gts = [] if self._gt_ids is None else self._gt_ids[i][:n_gt_shown].tolist()
            for j, position in enumerate(gts):
                image = visualize_gallery_fn(position, GT_COLOR)
                draw_framed_image(fig, grid[row, 1 + n_shown + j], image, GT_COLOR, f"GT #{position}")
        if show:
            import matplotlib.pyplot as plt

            plt.show()
        return fig


def _relevance_color(relevant: bool | None) -> TColor:
    """:data:`RELEVANT_COLOR`, :data:`IRRELEVANT_COLOR`, or :data:`UNKNOWN_COLOR` for ``None``."""
    if relevant is None:
        return UNKNOWN_COLOR
    return RELEVANT_COLOR if relevant else IRRELEVANT_COLOR


#: Side of the square (CSS pixels) in which :meth:`RetrievalResults.visualize_as_html` shows every image.
HTML_IMAGE_SIZE = 128
#: Width of the coloured frame of every block of :meth:`RetrievalResults.visualize_as_html` (CSS pixels).
HTML_FRAME_WIDTH = 5
_BLOCK_STYLE = "margin: 10px; display: inline-block;"


def css_color(color: TColor) -> str:
    """``rgb(r, g, b)``: an RGB colour (``0..255``) as CSS."""
    r, g, b = (int(c) for c in color)
    return f"rgb({r}, {g}, {b})"


def image_to_png_base64(image: np.ndarray) -> str:
    """The base64 text of a PNG of ``image``: ``HxWx3`` / ``HxWx4`` / ``HxW``, uint8, or float in ``[0, 1]``
    (scaled by 255, rounded, clipped)."""
    import base64
    import io

    from PIL import Image

    array = np.asarray(image)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[..., 0]
    if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[2] not in (3, 4)):
        raise ValueError(f"expected an image HxW, HxWx3 or HxWx4, got shape {array.shape}")
    if array.dtype != np.uint8:
        array = np.asarray(array, dtype=np.float64)
        array = np.clip(np.rint(array * 255.0), 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(array)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def framed_block_html(inner: str, color: TColor, title: str) -> str:
    """The content of a block of :meth:`RetrievalResults.visualize_as_html` (the layout of OML's blocks): ``title``
    (escaped) above ``inner`` (HTML, as it is) in a frame (``class="oml-frame"``) of ``color``,
    :data:`HTML_FRAME_WIDTH` pixels wide. A dataset's own ``visualize_as_html`` puts its items in it to look like
    the image blocks."""
    return (
        f'<div style="text-align: center; font-weight: bold; margin-bottom: 5px;">{escape(title)}</div>'
        f'<div class="oml-frame" style="border: {HTML_FRAME_WIDTH}px solid {css_color(color)}; padding: 3px;">'
        f"{inner}</div>"
    )


def _image_block_html(image: np.ndarray, color: TColor, title: str) -> str:
    """A titled image in a frame of ``color`` (:func:`framed_block_html`)."""
    size = HTML_IMAGE_SIZE
    image_html = (
        f'<img src="data:image/png;base64,{image_to_png_base64(image)}" alt="{escape(title)}" '
        f'style="width: {size}px; height: {size}px; object-fit: contain; display: block;"/>'
    )
    return framed_block_html(image_html, color, title)


def _item_html(inner: str, attributes: dict[str, Any]) -> str:
    """``inner`` in an ``oml-item`` block with ``data-<key>`` attributes."""
    data = "".join(f' data-{key}="{escape(str(value))}"' for key, value in attributes.items())
    return f'<div class="oml-item"{data} style="{_BLOCK_STYLE}">{inner}</div>'


def _placeholder_html() -> str:
    """An empty block as wide as an image block: the missing retrieved items of a query."""
    width = HTML_IMAGE_SIZE + 2 * (HTML_FRAME_WIDTH + 3)
    return (
        f'<div class="oml-item" data-kind="placeholder" style="{_BLOCK_STYLE}">'
        f'<div style="width: {width}px; height: 0;"></div></div>'
    )


def _html_page(fragment: str) -> str:
    """A whole HTML page around the fragment of :meth:`RetrievalResults.visualize_as_html`, with a legend."""
    legend = " &middot; ".join(
        f'<span style="color: {css_color(color)}; font-weight: bold;">&#9632;</span> {name}'
        for name, color in (
            ("query", QUERY_COLOR),
            ("relevant", RELEVANT_COLOR),
            ("not relevant", IRRELEVANT_COLOR),
            ("relevance unknown", UNKNOWN_COLOR),
            ("ground truth", GT_COLOR),
        )
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>Retrieval results</title>\n'
        f'</head>\n<body style="font-family: sans-serif;">\n<p class="oml-legend">{legend}</p>\n{fragment}\n'
        "</body>\n</html>\n"
    )


__all__ = [
    "GT_COLOR",
    "HTML_FRAME_WIDTH",
    "HTML_IMAGE_SIZE",
    "IRRELEVANT_COLOR",
    "N_GT_TO_SHOW",
    "QUERY_COLOR",
    "RELEVANT_COLOR",
    "SEQUENCE_COLUMN",
    "UNKNOWN_COLOR",
    "RetrievalResults",
    "RetrievalResultsError",
    "TColor",
    "css_color",
    "dataset_column",
    "factorize",
    "framed_block_html",
    "get_query_gallery_ids",
    "get_sequence_ids",
    "image_to_png_base64",
    "labels_of",
]
