"""Dataset interfaces. Items are dicts; the keys are attributes of the dataset (``labels_key`` ...)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from torch import Tensor
from torch.utils.data import Dataset


class IBaseDataset(Dataset):
    """Base of every oml dataset: ``__getitem__`` returns a dict with at least ``self.index_key``."""

    index_key: str = "idx"
    input_tensors_key: str = "input_tensors"


class ILabeledDataset(IBaseDataset, ABC):
    """An interface for the datasets which provide labels of containing items.

    ``__getitem__(item)`` returns a dict including ``self.labels_key``.
    """

    labels_key: str = "labels"

    @abstractmethod
    def get_labels(self) -> np.ndarray:
        """The labels of all the items, in dataset order."""

    def get_label2category(self) -> dict[int, Any] | None:
        """Mapping from label to category, or ``None`` when the dataset has no categories."""
        return None


class IQueryGalleryDataset(IBaseDataset, ABC):
    """Datasets which hold the information on how to split the data into the query and gallery.

    The query and gallery ids may overlap. It doesn't need ground truth labels, so it can be used for
    prediction on non-annotated data.
    """

    @abstractmethod
    def get_query_ids(self) -> Tensor:
        """Indices of the items that are queries (``[n_queries]`` int64)."""

    @abstractmethod
    def get_gallery_ids(self) -> Tensor:
        """Indices of the items that are in the gallery (``[n_gallery]`` int64)."""


class IQueryGalleryLabeledDataset(IQueryGalleryDataset, ILabeledDataset, ABC):
    """Like :class:`IQueryGalleryDataset`, but with ground truth labels."""


class IPairsDataset(Dataset, ABC):
    """Datasets which return pairs of something.

    ``__getitem__`` returns a dict with ``self.pairs_1st_key``, ``self.pairs_2nd_key`` and ``self.index_key``.
    """

    pairs_1st_key: str = "input_tensors_1"
    pairs_2nd_key: str = "input_tensors_2"
    index_key: str = "idx"

    @abstractmethod
    def __getitem__(self, item: int) -> dict[str, Any]:
        """Return the pair number ``item``."""


class IVisualizableDataset(Dataset, ABC):
    """Base class for the datasets which know how to visualise their items."""

    @abstractmethod
    def visualize(self, item: int, color: tuple[int, int, int]) -> np.ndarray:
        """Return the item as an ``HxWx3`` uint8 image, decorated (a bbox, a frame) with ``color``."""
