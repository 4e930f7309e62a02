"""Query/gallery datasets of embeddings already computed: retrieval metrics and post-processors without images.

``EmbeddingMetrics(dataset=EmbeddingsQueryGalleryLabeledDataset(embeddings, labels, is_query, is_gallery))``
computes the metrics of stored embeddings; no image path, dataframe, PIL or pandas is involved (this module
imports torch and numpy only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from oml_core.interfaces.datasets import IQueryGalleryDataset, IQueryGalleryLabeledDataset

TArray = Tensor | np.ndarray | Sequence[Any]


def _as_column(values: TArray, name: str, n_items: int) -> np.ndarray:
    """``values`` as a 1-D array of ``n_items`` values.

    Raises:
        ValueError: not one value per embedding; the message names ``name``.
    """
    array = values.detach().cpu().numpy() if isinstance(values, Tensor) else np.asarray(values)
    if array.ndim != 1 or len(array) != n_items:
        raise ValueError(f"{name} must hold one value per embedding ({n_items}), got shape {array.shape}")
    return array


def _as_flags(values: TArray, name: str, n_items: int) -> np.ndarray:
    """``values`` as a 1-D bool array of ``n_items`` flags (bools, or the integers 0 and 1).

    Raises:
        ValueError: not one flag per embedding, or a value other than True/False/0/1; the message names ``name``.
    """
    array = _as_column(values, name, n_items)
    if array.dtype != bool:
        if not np.issubdtype(array.dtype, np.integer) or not np.isin(array, (0, 1)).all():
            raise ValueError(f"{name} must hold booleans (or 0 and 1), got {array[:5].tolist()}...")
        array = array.astype(bool)
    return array


class EmbeddingsQueryGalleryDataset(IQueryGalleryDataset):
    """Embeddings with a query/gallery split and no labels (e.g. to retrieve for unlabeled queries).

    ``dataset[i]`` is ``{input_tensors_key: embeddings[i], index_key: i}``; ``extra_data`` holds the optional
    ``category`` and ``sequence`` columns, where the metrics and retrieval look them up.

    Args:
        embeddings: ``[n_items, dim]`` floats.
        is_query: ``[n_items]`` bools: the items that are queries.
        is_gallery: ``[n_items]`` bools: the items in the gallery (an item may be both).
        categories: ``[n_items]`` categories, for metrics per category.
        sequence: ``[n_items]`` sequence ids: a query never retrieves an item of its own sequence.
        input_tensors_key: The key of the embedding in an item.
        index_key: The key of the index in an item.

    Raises:
        ValueError: ``embeddings`` is not a 2-D float tensor with finite values, or a column does not hold one
            value per embedding; the message names the argument.
    """

    def __init__(
        self,
        embeddings: Tensor | np.ndarray,
        is_query: TArray,
        is_gallery: TArray,
        categories: TArray | None = None,
        sequence: TArray | None = None,
        input_tensors_key: str = IQueryGalleryDataset.input_tensors_key,
        index_key: str = IQueryGalleryDataset.index_key,
    ) -> None:
        embeddings = torch.as_tensor(embeddings)
        if embeddings.ndim != 2 or not embeddings.is_floating_point():
            raise ValueError(
                f"embeddings must be a 2-D float tensor [n_items, dim], got {embeddings.dtype} of shape "
                f"{tuple(embeddings.shape)}"
            )
        if not bool(torch.isfinite(embeddings).all()):
            raise ValueError("embeddings must be finite; they hold nan or inf")
        n_items = len(embeddings)
        self.embeddings = embeddings
        self.is_query = _as_flags(is_query, "is_query", n_items)
        self.is_gallery = _as_flags(is_gallery, "is_gallery", n_items)
        self.extra_data: dict[str, np.ndarray] = {}
        if categories is not None:
            self.extra_data["category"] = _as_column(categories, "categories", n_items)
        if sequence is not None:
            self.extra_data["sequence"] = _as_column(sequence, "sequence", n_items)
        self.input_tensors_key = input_tensors_key
        self.index_key = index_key

    def __len__(self) -> int:
        return len(self.embeddings)

    def __getitem__(self, item: int) -> dict[str, Any]:
        """``{input_tensors_key: embeddings[item], index_key: item}``."""
        if not -len(self) <= item < len(self):
            raise IndexError(f"item {item} is out of range for {len(self)} embeddings")
        item = item % len(self)
        return {self.input_tensors_key: self.embeddings[item], self.index_key: item}

    def get_query_ids(self) -> Tensor:
        """Indices of the items with ``is_query`` (``[n_queries]`` int64)."""
        return torch.from_numpy(np.flatnonzero(self.is_query)).long()

    def get_gallery_ids(self) -> Tensor:
        """Indices of the items with ``is_gallery`` (``[n_gallery]`` int64)."""
        return torch.from_numpy(np.flatnonzero(self.is_gallery)).long()


class EmbeddingsQueryGalleryLabeledDataset(EmbeddingsQueryGalleryDataset, IQueryGalleryLabeledDataset):
    """Embeddings with labels and a query/gallery split: what :class:`~oml_core.metrics.EmbeddingMetrics` needs
    to compute retrieval metrics of stored embeddings.

    ``dataset[i]`` also holds ``{labels_key: labels[i]}``. A query's relevant items are the gallery items of its
    label other than itself and the items of its sequence.

    Args:
        embeddings, is_query, is_gallery, categories, sequence, input_tensors_key, index_key: see
            :class:`EmbeddingsQueryGalleryDataset`.
        labels: ``[n_items]`` integer labels.
        labels_key: The key of the label in an item.

    Raises:
        ValueError: as :class:`EmbeddingsQueryGalleryDataset`, or ``labels`` are not one integer per embedding.
    """

    def __init__(
        self,
        embeddings: Tensor | np.ndarray,
        labels: TArray,
        is_query: TArray,
        is_gallery: TArray,
        categories: TArray | None = None,
        sequence: TArray | None = None,
        input_tensors_key: str = IQueryGalleryDataset.input_tensors_key,
        labels_key: str = IQueryGalleryLabeledDataset.labels_key,
        index_key: str = IQueryGalleryDataset.index_key,
    ) -> None:
        super().__init__(embeddings, is_query, is_gallery, categories, sequence, input_tensors_key, index_key)
        self.labels = _as_column(labels, "labels", len(self))
        if not np.issubdtype(self.labels.dtype, np.integer):
            raise ValueError(f"labels must be integers, got dtype {self.labels.dtype}")
        self.labels_key = labels_key

    def __getitem__(self, item: int) -> dict[str, Any]:
        """The item of :class:`EmbeddingsQueryGalleryDataset` with ``labels_key: labels[item]``."""
        data = super().__getitem__(item)
        data[self.labels_key] = int(self.labels[data[self.index_key]])
        return data

    def get_labels(self) -> np.ndarray:
        """The labels of all the items, in dataset order."""
        return self.labels

    def get_label2category(self) -> dict[int, Any] | None:
        """``{label: category}`` from the ``categories`` given (the first category of a label), else ``None``."""
        categories = self.extra_data.get("category")
        if categories is None:
            return None
        return {int(label): category for label, category in reversed(list(zip(self.labels, categories)))}


__all__ = ["EmbeddingsQueryGalleryDataset", "EmbeddingsQueryGalleryLabeledDataset"]
