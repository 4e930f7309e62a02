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


class IDatasetComponent(ABC):
    """The data of a pipeline, of one modality (images, texts, ...): a component of the kind ``dataset``.

    A pipeline builds it from its config key ``dataset`` (``{name, args}``; absent or null: ``images``), and offers
    its factory the pipeline's data keys (``dataset_root``, ``dataframe_name``, ``dataframe_encoding``,
    ``cache_size``, ``num_workers``, the transforms ``transforms_train``, ``transforms_val`` and
    ``transforms_predict`` built, and the other keys of the pipeline's data settings), each by its name, to a
    factory that names that parameter and whose ``args`` do not set it. The pipeline then asks it for the datasets
    it needs, and calls :meth:`check` on them before any model runs (the process that launched the run only).

    The datasets' items are dicts: ``input_tensors_key`` holds what the extractor takes, ``index_key`` the item's
    index, ``labels_key`` the label (labelled datasets). A validation dataset that is also an
    :class:`IVisualizableDataset` is drawn in the worst-query plots. A component may leave out the datasets its
    data cannot give (a method raises ``NotImplementedError``, and the pipeline that needs it says so).
    """

    @property
    @abstractmethod
    def source(self) -> Any:
        """The file (a ``pathlib.Path``) that describes the data, e.g. its dataframe: named in messages, and its path
        and bytes are the data's identity in a training run's record (a resume with other data is refused)."""

    def train_dataset(self) -> ILabeledDataset:
        """The labelled items to train on."""
        raise NotImplementedError(f"the dataset component {type(self).__name__} gives no training dataset")

    def validation_dataset(self) -> IQueryGalleryLabeledDataset:
        """The labelled queries and gallery to validate on."""
        raise NotImplementedError(f"the dataset component {type(self).__name__} gives no validation dataset")

    def prediction_dataset(self) -> IBaseDataset:
        """The items to embed, without labels (``oml predict``)."""
        raise NotImplementedError(f"the dataset component {type(self).__name__} gives no prediction dataset")

    def item_names(self, dataset: IBaseDataset) -> list[str]:
        """The name of every item of ``dataset`` (one of this component's), in its order: the keys of
        ``predictions.json`` (images: their absolute paths). Names are unique."""
        raise NotImplementedError(f"the dataset component {type(self).__name__} does not name its items")

    def check(self, datasets: list[IBaseDataset], num_workers: int, progress_bar: bool | None) -> list[str]:
        """Check ``datasets`` (this component's) before any model runs: every item can be read into the
        extractor's input (images open and their boxes lie in them; another modality checks its own columns).

        Args:
            datasets: The datasets the run will use.
            num_workers: Processes or threads the check may use (the config key ``num_workers``).
            progress_bar: Show a progress bar; None: only on a terminal.

        Returns:
            Warnings, one line each (the pipeline issues them as ``UserWarning``).

        Raises:
            ConfigError: an item that cannot be read, naming the file and the row.
        """
        return []
