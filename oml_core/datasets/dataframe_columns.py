"""The columns every dataframe dataset of OML's format reads the same way, whatever its items (images, texts,
audio): the labels and their categories, and the query/gallery flags. The datasets of each modality mix these in.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from oml_core.const import (
    CATEGORIES_COLUMN,
    IS_GALLERY_COLUMN,
    IS_GALLERY_KEY,
    IS_QUERY_COLUMN,
    IS_QUERY_KEY,
    LABELS_COLUMN,
)
from oml_core.datasets.dataframe_format import parse_bool_column


class LabelsColumn:
    """``get_labels``, ``get_label2category`` and an item's label (under ``labels_key``) of a labelled dataset of
    the dataframe ``df``, read from its ``label`` and ``category`` columns (:meth:`_init_labels`, once ``df`` is
    set)."""

    df: pd.DataFrame
    labels_key: str
    _labels: np.ndarray

    def _init_labels(self) -> None:
        self._labels = self.df[LABELS_COLUMN].to_numpy()

    def _add_label(self, data: dict[str, Any], item: int) -> dict[str, Any]:
        """``data`` (the item ``item``) with its label, a Python scalar, under ``labels_key``."""
        label = self._labels[item]
        data[self.labels_key] = label.item() if isinstance(label, np.generic) else label
        return data

    def get_labels(self) -> np.ndarray:
        """The labels of all the items (the ``label`` column), in dataset order."""
        return self._labels.copy()

    def get_label2category(self) -> dict[Any, Any] | None:
        """Mapping from label (a Python scalar) to category (the ``category`` column), or ``None`` without that
        column."""
        if CATEGORIES_COLUMN not in self.df.columns:
            return None
        return dict(zip(self._labels.tolist(), self.df[CATEGORIES_COLUMN].tolist()))


class QueryGalleryColumns:
    """The ``is_query`` / ``is_gallery`` columns of a query/gallery dataset of a dataframe: the ids of queries and
    gallery items, and the flags of an item under ``is_query_key`` / ``is_gallery_key``."""

    _is_query: np.ndarray
    _is_gallery: np.ndarray
    is_query_key: str
    is_gallery_key: str

    def _init_query_gallery(
        self, df: pd.DataFrame, is_query_key: str = IS_QUERY_KEY, is_gallery_key: str = IS_GALLERY_KEY
    ) -> None:
        """Read the flags of ``df`` (booleans, or what :func:`parse_bool_column` takes for them).

        Raises:
            ValueError: a value that is no boolean, naming the dataset's class, the column and the row.
        """
        owner = type(self).__name__
        self.is_query_key = is_query_key
        self.is_gallery_key = is_gallery_key
        self._is_query = parse_bool_column(df, IS_QUERY_COLUMN, owner)
        self._is_gallery = parse_bool_column(df, IS_GALLERY_COLUMN, owner)

    def get_query_ids(self) -> Tensor:
        """Indices (a 1-d LongTensor, ascending) of the items with ``is_query`` true."""
        return torch.from_numpy(np.flatnonzero(self._is_query).astype(np.int64))

    def get_gallery_ids(self) -> Tensor:
        """Indices (a 1-d LongTensor, ascending) of the items with ``is_gallery`` true."""
        return torch.from_numpy(np.flatnonzero(self._is_gallery).astype(np.int64))

    def _add_query_gallery(self, data: dict[str, Any], item: int) -> dict[str, Any]:
        """``data`` (the item ``item``) with its flags added."""
        data[self.is_query_key] = bool(self._is_query[item])
        data[self.is_gallery_key] = bool(self._is_gallery[item])
        return data


__all__ = ["LabelsColumn", "QueryGalleryColumns"]
