"""OML's datasets over a dataframe (``oml.datasets.dataframe``): the labels, the query and gallery marks and the
categories of a dataframe in OML's format, on top of a base dataset of the same rows, of any modality.

``DFLabeledDataset(dataset, df)`` is ``dataset`` whose item ``i`` also holds ``df["label"][i]`` under
``labels_key``; ``DFQueryGalleryDataset`` gives the rows where ``is_query`` / ``is_gallery`` are true as its query
and gallery ids; ``DFQueryGalleryLabeledDataset`` does both. As OML's, the dataframe's ``category`` and
``sequence`` columns, when present, and ``extra_data`` become records of the items (under those keys), and the
labels' categories are ``dict(zip(df["label"], df["category"]))``.

Unlike OML's, the base dataset is not changed: the new records are added to the wrapper's items (and its
``extra_data``), not to the base dataset's. A dataframe without the columns a class needs, or of another length
than the base dataset, raises :class:`~oml_core.datasets.dataframe_format.DataFrameFormatError` (also an
``AssertionError``, OML's type) when the dataset is made.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sized
from typing import Any, cast

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from oml_core.const import (
    CATEGORIES_COLUMN,
    IS_GALLERY_COLUMN,
    IS_QUERY_COLUMN,
    LABELS_COLUMN,
    LABELS_KEY,
    SEQUENCE_COLUMN,
)
from oml_core.datasets.dataframe_format import DataFrameFormatError
from oml_core.datasets.extra_data import add_extra_data, checked_extra_data
from oml_core.interfaces.datasets import (
    IBaseDataset,
    ILabeledDataset,
    IQueryGalleryDataset,
    IQueryGalleryLabeledDataset,
)

#: The dataframe's columns that become records of the items when present (OML's ``update_extra_data``).
RECORD_COLUMNS = (CATEGORIES_COLUMN, SEQUENCE_COLUMN)


class _DFRows:
    """A base dataset with the records of a dataframe of the same rows (the part the three classes share)."""

    def _wrap(
        self,
        dataset: IBaseDataset,
        df: pd.DataFrame,
        extra_data: Mapping[str, Collection[Any]] | None,
        columns: tuple[str, ...],
    ) -> None:
        owner = type(self).__name__
        missing = [column for column in columns if column not in df.columns]
        if missing:
            raise DataFrameFormatError(
                f"{owner}: the dataframe has no column {', '.join(map(repr, missing))} (its columns: "
                f"{list(df.columns)})"
            )
        n_items = len(cast(Sized, dataset))  # a map-style dataset has a length; the interface does not say so
        if len(df) != n_items:
            raise DataFrameFormatError(
                f"{owner}: the dataframe has {len(df)} rows and the dataset {n_items} items; they must be the "
                "same rows"
            )
        records = {column: df[column].tolist() for column in RECORD_COLUMNS if column in df.columns}
        self._dataset = dataset
        self._records = checked_extra_data({**records, **(extra_data or {})}, len(df), (), owner, "rows")
        self.df = df
        self.extra_data = {**getattr(dataset, "extra_data", {}), **self._records}
        self.index_key = dataset.index_key
        self.input_tensors_key = dataset.input_tensors_key

    def __len__(self) -> int:
        return len(self.df)

    def _item(self, item: int) -> dict[str, Any]:
        return add_extra_data(dict(self._dataset[item]), self._records, item)


def _labels(df: pd.DataFrame) -> tuple[np.ndarray, dict[Any, Any] | None]:
    """The labels column as an array, and the labels' categories (None: no ``category`` column)."""
    labels = np.array(df[LABELS_COLUMN])
    if CATEGORIES_COLUMN not in df.columns:
        return labels, None
    return labels, dict(zip(df[LABELS_COLUMN].tolist(), df[CATEGORIES_COLUMN].tolist(), strict=True))


def _marked(df: pd.DataFrame, column: str) -> Tensor:
    """The positions of the rows whose ``column`` is true, int64."""
    return torch.as_tensor(np.flatnonzero(df[column].to_numpy(dtype=bool)), dtype=torch.long)


class DFLabeledDataset(_DFRows, ILabeledDataset):
    """``dataset``'s items with the dataframe's ``label`` under ``labels_key`` (OML's ``DFLabeledDataset``).

    Args:
        dataset: The base dataset: item ``i`` is the dataframe's row ``i``.
        df: The dataframe, with a ``label`` column (``category``, ``sequence``: records of the items).
        extra_data: More records of the items, one value per row.
        labels_key: The key of the label in the items.

    Raises:
        DataFrameFormatError: no ``label`` column, or another number of rows than ``dataset`` has items.
        ValueError: a record of ``extra_data`` of another length.
    """

    def __init__(
        self,
        dataset: IBaseDataset,
        df: pd.DataFrame,
        extra_data: Mapping[str, Collection[Any]] | None = None,
        labels_key: str = LABELS_KEY,
    ):
        self._wrap(dataset, df, extra_data, (LABELS_COLUMN,))
        self._labels, self._label2category = _labels(df)
        self.labels_key = labels_key

    def __getitem__(self, item: int) -> dict[str, Any]:
        data = self._item(item)
        data[self.labels_key] = self._labels[item]
        return data

    def get_labels(self) -> np.ndarray:
        return self._labels

    def get_label2category(self) -> dict[Any, Any] | None:
        return self._label2category


class DFQueryGalleryDataset(_DFRows, IQueryGalleryDataset):
    """``dataset`` with the dataframe's ``is_query`` and ``is_gallery`` rows as its queries and gallery (OML's
    ``DFQueryGalleryDataset``; no labels needed).

    Args:
        dataset: The base dataset: item ``i`` is the dataframe's row ``i``.
        df: The dataframe, with bool-like ``is_query`` and ``is_gallery`` columns.
        extra_data: More records of the items, one value per row.

    Raises:
        DataFrameFormatError: a column missing, or another number of rows than ``dataset`` has items.
        ValueError: a record of ``extra_data`` of another length.
    """

    def __init__(
        self,
        dataset: IBaseDataset,
        df: pd.DataFrame,
        extra_data: Mapping[str, Collection[Any]] | None = None,
    ):
        self._wrap(dataset, df, extra_data, (IS_QUERY_COLUMN, IS_GALLERY_COLUMN))
        self._mark_queries_and_gallery(df)

    def _mark_queries_and_gallery(self, df: pd.DataFrame) -> None:
        """The rows flagged ``is_query`` and ``is_gallery``, as the ids of the queries and of the gallery."""
        self._query_ids = _marked(df, IS_QUERY_COLUMN)
        self._gallery_ids = _marked(df, IS_GALLERY_COLUMN)

    def __getitem__(self, item: int) -> dict[str, Any]:
        return self._item(item)

    def get_query_ids(self) -> Tensor:
        return self._query_ids

    def get_gallery_ids(self) -> Tensor:
        return self._gallery_ids


class DFQueryGalleryLabeledDataset(DFLabeledDataset, DFQueryGalleryDataset, IQueryGalleryLabeledDataset):
    """:class:`DFLabeledDataset` and :class:`DFQueryGalleryDataset` at once (OML's
    ``DFQueryGalleryLabeledDataset``): the dataframe needs ``label``, ``is_query`` and ``is_gallery``.

    Raises:
        DataFrameFormatError: a column missing, or another number of rows than ``dataset`` has items.
        ValueError: a record of ``extra_data`` of another length.
    """

    def __init__(
        self,
        dataset: IBaseDataset,
        df: pd.DataFrame,
        extra_data: Mapping[str, Collection[Any]] | None = None,
        labels_key: str = LABELS_KEY,
    ):
        self._wrap(dataset, df, extra_data, (LABELS_COLUMN, IS_QUERY_COLUMN, IS_GALLERY_COLUMN))
        self._labels, self._label2category = _labels(df)
        self.labels_key = labels_key
        self._mark_queries_and_gallery(df)


__all__ = ["RECORD_COLUMNS", "DFLabeledDataset", "DFQueryGalleryDataset", "DFQueryGalleryLabeledDataset"]
