"""``RetrievalResults``: what was retrieved for every query, ragged, with the ground truth when known."""

from __future__ import annotations

from collections.abc import Sequence
from copy import deepcopy
from typing import Any

import numpy as np
import torch
from torch import FloatTensor, LongTensor, Tensor

from oml_core.functional.knn import batched_knn
from oml_core.interfaces.datasets import IQueryGalleryDataset, IQueryGalleryLabeledDataset

#: Column (or ``extra_data`` key) of a dataset holding sequence ids: items sharing a sequence never match.
SEQUENCE_COLUMN = "sequence"


def factorize(values: Any) -> LongTensor:
    """Integer codes of ``values`` (equal values, equal codes); missing values (NaN, None) each get their own
    negative code, so two missing values are never equal.

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


def get_sequence_ids(dataset: Any) -> LongTensor | None:
    """Sequence ids of the dataset's items (from its ``sequence`` column), or ``None`` when it has none."""
    values = dataset_column(dataset, (SEQUENCE_COLUMN,))
    if values is None:
        return None
    if len(values) != len(dataset):
        raise ValueError(f"the {SEQUENCE_COLUMN!r} column has {len(values)} values for {len(dataset)} items")
    return factorize(values)


class RetrievalResults:
    """The items retrieved for every query (closest first), their distances and the ground truth.

    Everything is ragged: query ``i`` has ``len(retrieved_ids[i])`` retrieved items, possibly none. Ids are
    positions within the gallery (``0..n_gallery-1``), not dataset indices.

    Args:
        distances: ``n_query`` 1-D tensors of distances to the retrieved items, sorted ascending.
        retrieved_ids: ``n_query`` 1-D integer tensors, of the same lengths as ``distances``.
        gt_ids: ``n_query`` 1-D integer tensors of the gallery items relevant to every query, or ``None`` when
            the ground truth is unknown.

    Raises:
        ValueError: mismatched numbers of queries, a tensor that is not 1-D, distances and ids of different
            lengths, or unsorted (or NaN) distances; the message names the query index.
    """

    def __init__(
        self,
        distances: Sequence[FloatTensor],
        retrieved_ids: Sequence[LongTensor],
        gt_ids: Sequence[LongTensor] | None = None,
    ) -> None:
        n = len(distances)
        if len(retrieved_ids) != n:
            raise ValueError(
                f"distances are given for {n} queries but retrieved_ids for {len(retrieved_ids)}"
            )
        if gt_ids is not None and len(gt_ids) != n:
            raise ValueError(f"distances are given for {n} queries but gt_ids for {len(gt_ids)}")
        self._distances = tuple(torch.as_tensor(d) for d in distances)
        self._retrieved_ids = tuple(torch.as_tensor(r, dtype=torch.long) for r in retrieved_ids)
        self._gt_ids = None if gt_ids is None else tuple(torch.as_tensor(g, dtype=torch.long) for g in gt_ids)
        self._validate()

    def _validate(self) -> None:
        lengths = []
        for i, (d, r) in enumerate(zip(self._distances, self._retrieved_ids)):
            if d.ndim != 1 or r.ndim != 1:
                raise ValueError(
                    f"query {i}: distances and retrieved ids must be 1-D, got shapes {tuple(d.shape)}, "
                    f"{tuple(r.shape)}"
                )
            if len(d) != len(r):
                raise ValueError(f"query {i}: {len(d)} distances for {len(r)} retrieved ids")
            lengths.append(len(d))
        if self._gt_ids is not None:
            for i, g in enumerate(self._gt_ids):
                if g.ndim != 1:
                    raise ValueError(f"query {i}: gt_ids must be 1-D, got shape {tuple(g.shape)}")
        if not lengths or sum(lengths) == 0:
            return
        flat = torch.cat([d.float().cpu() for d in self._distances])
        ends = torch.cumsum(torch.tensor(lengths), 0)
        nan = torch.isnan(flat)
        if nan.any():
            query = int(torch.searchsorted(ends, int(nan.nonzero()[0, 0]), right=True))
            raise ValueError(f"query {query}: distances contain NaN: {self._distances[query][:10]}")
        decreasing = flat[1:] < flat[:-1]  # entry j: flat[j + 1] < flat[j]
        starts = ends - torch.tensor(lengths)
        starts = starts[(starts > 0) & (starts < len(flat))]
        decreasing[starts - 1] = False  # a new query starts at j + 1
        if decreasing.any():
            query = int(torch.searchsorted(ends, int(decreasing.nonzero()[0, 0]) + 1, right=True))
            raise ValueError(
                f"query {query}: distances must be sorted ascending, got {self._distances[query][:10]}"
            )

    # ----------------------------------------------------------------------------------------- access
    @property
    def distances(self) -> tuple[FloatTensor, ...]:
        """Sorted distances from every query to its retrieved items (``n_query`` 1-D tensors)."""
        return self._distances

    @property
    def retrieved_ids(self) -> tuple[LongTensor, ...]:
        """Gallery positions (``0..n_gallery-1``) retrieved for every query, closest first."""
        return self._retrieved_ids

    @property
    def gt_ids(self) -> tuple[LongTensor, ...] | None:
        """Gallery positions relevant to every query, or ``None`` when the ground truth is unknown."""
        return self._gt_ids

    @property
    def n_gts(self) -> list[int]:
        """Number of relevant gallery items of every query: ``[len(g) for g in gt_ids]``.

        Raises:
            ValueError: the ground truth is unknown (``gt_ids is None``).
        """
        if self._gt_ids is None:
            raise ValueError("these retrieval results have no ground truth (gt_ids is None)")
        return [len(g) for g in self._gt_ids]

    @property
    def n_queries(self) -> int:
        """Number of queries."""
        return len(self._distances)

    @property
    def n_retrieved_items(self) -> int:
        """The largest number of items retrieved for a query (0 when there are no queries)."""
        return max((len(r) for r in self._retrieved_ids), default=0)

    def __len__(self) -> int:
        """Number of queries."""
        return self.n_queries

    def is_empty(self) -> bool:
        """True when no query has any retrieved item."""
        return all(len(r) == 0 for r in self._retrieved_ids)

    def deepcopy(self) -> RetrievalResults:
        """An independent copy (postprocessors return new results and leave the input unchanged)."""
        return RetrievalResults(
            deepcopy(self._distances), deepcopy(self._retrieved_ids), deepcopy(self._gt_ids)
        )

    def __repr__(self) -> str:
        gt = "unknown" if self._gt_ids is None else f"{sum(self.n_gts)} in total"
        return (
            f"{type(self).__name__}(n_queries={self.n_queries}, n_retrieved_items={self.n_retrieved_items}, "
            f"ground truth: {gt})"
        )

    # -------------------------------------------------------------------------------------- building
    @classmethod
    def from_embeddings(
        cls,
        embeddings: Tensor,
        dataset: IQueryGalleryDataset | IQueryGalleryLabeledDataset,
        n_items: int = 100,
        distance: str = "l2",
        chunk_size: int | None = None,
        verbose: bool = False,
    ) -> RetrievalResults:
        """Retrieve the ``n_items`` closest gallery items of every query of ``dataset``.

        Computed in chunks of ``chunk_size`` queries with ``torch.topk``: memory is
        ``O(chunk_size * n_gallery)``, never ``O(n_query * n_gallery)``. A query never retrieves itself (the
        same dataset index) nor, when the dataset has a ``sequence`` column (``dataset.extra_data`` or
        ``dataset.df``), an item of its own sequence; such items are not ground truth either. So some queries
        may get fewer than ``n_items``.

        Args:
            embeddings: ``[len(dataset), dim]`` embeddings of all the dataset items, in dataset order.
            dataset: Dataset with a query/gallery split; its labels (``get_labels()``), when it has them, give
                the ground truth: the gallery items with the query's label.
            n_items: Number of closest gallery items to retrieve (clipped by the gallery size).
            distance: ``"l2"`` or ``"cosine"`` (``1 - cosine similarity``).
            chunk_size: Queries per chunk; ``None`` picks one for a ~16M-element distance block.
            verbose: Set ``True`` to see a progress bar.

        Returns:
            Retrieval results with ids as positions within ``dataset.get_gallery_ids()``; ``gt_ids`` is
            ``None`` for a dataset without labels.
        """
        if len(embeddings) != len(dataset):
            raise ValueError(f"got {len(embeddings)} embeddings for a dataset of {len(dataset)} items")
        get_labels = getattr(dataset, "get_labels", None)
        labels = factorize(get_labels()) if callable(get_labels) else None
        distances, retrieved_ids, gt_ids = batched_knn(
            embeddings=embeddings,
            ids_query=torch.as_tensor(dataset.get_query_ids(), dtype=torch.long),
            ids_gallery=torch.as_tensor(dataset.get_gallery_ids(), dtype=torch.long),
            top_n=n_items,
            labels_gt=labels,
            sequence_ids=get_sequence_ids(dataset),
            distance=distance,
            chunk_size=chunk_size,
            verbose=verbose,
        )
        return cls(distances=distances, retrieved_ids=retrieved_ids, gt_ids=gt_ids)


__all__ = ["SEQUENCE_COLUMN", "RetrievalResults", "dataset_column", "factorize", "get_sequence_ids"]
