"""Dataset interfaces. Items are dicts; the keys are attributes of the dataset (``labels_key`` ...)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from torch import Tensor
from torch.utils.data import Dataset

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    from torch.nn import Module


class IIndexedDataset(Dataset):
    """A dataset whose items are dicts holding their index under ``self.index_key`` (OML's base of the item
    datasets and the pairs datasets)."""

    index_key: str = "idx"


class IBaseDataset(IIndexedDataset):
    """Base of every oml dataset: ``__getitem__`` returns a dict with at least ``self.index_key``, and what the
    extractor takes under ``self.input_tensors_key``."""

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


class IPairsDataset(IIndexedDataset, ABC):
    """Datasets which return pairs of something.

    ``__getitem__`` returns a dict with ``self.pairs_1st_key``, ``self.pairs_2nd_key`` and ``self.index_key``.
    """

    pairs_1st_key: str = "input_tensors_1"
    pairs_2nd_key: str = "input_tensors_2"

    @abstractmethod
    def __getitem__(self, item: int) -> dict[str, Any]:
        """Return the pair number ``item``."""


class IPairDataset(IPairsDataset, ABC):
    """OML's interface of the pairs datasets (``oml.interfaces.datasets.IPairDataset``): an :class:`IPairsDataset`
    whose keys are also read and set under OML's names ``input_tensors_key_1`` and ``input_tensors_key_2`` (the
    same attributes as ``pairs_1st_key`` and ``pairs_2nd_key``)."""

    @property
    def input_tensors_key_1(self) -> str:
        """OML's name of :attr:`pairs_1st_key`."""
        return self.pairs_1st_key

    @input_tensors_key_1.setter
    def input_tensors_key_1(self, key: str) -> None:
        self.pairs_1st_key = key

    @property
    def input_tensors_key_2(self) -> str:
        """OML's name of :attr:`pairs_2nd_key`."""
        return self.pairs_2nd_key

    @input_tensors_key_2.setter
    def input_tensors_key_2(self, key: str) -> None:
        self.pairs_2nd_key = key


class IVisualizableDataset(Dataset, ABC):
    """Base class for the datasets which know how to visualise their items."""

    @abstractmethod
    def visualize(self, item: int, color: tuple[int, int, int]) -> np.ndarray:
        """Return the item as an ``HxWx3`` uint8 image, decorated (a bbox, a frame) with ``color``."""


class IHTMLVisualizableDataset(Dataset, ABC):
    """Base class for the datasets which know how to show their items as HTML (OML's; audio: a player)."""

    @abstractmethod
    def visualize_as_html(self, item: int, title: str, color: tuple[int, int, int]) -> str:
        """Return the item as an HTML block titled ``title``, framed with ``color``."""


class IDatasetComponent(ABC):
    """The data of a pipeline, of one modality (images, texts, ...): a component of the kind ``dataset``.

    A pipeline builds it from its config key ``dataset`` (``{name, args}``; absent or null: ``images``), and offers
    its factory the pipeline's data keys (``dataset_root``, ``dataframe_name``, ``dataframe_encoding``,
    ``cache_size``, ``num_workers``, the transforms ``transforms_train``, ``transforms_val`` and
    ``transforms_predict`` built, and the other keys of the pipeline's data settings), each by its name, to a
    factory that names that parameter and whose ``args`` do not set it. The pipeline then asks it for the datasets
    it needs, and calls :meth:`check` on them before any model runs (the process that launched the run only), then
    checks the first item of each (:func:`~oml_core.datasets.items.first_item_problem`) and, once it has built the
    extractor, calls :meth:`check_extractor`.

    The datasets' items are dicts: ``input_tensors_key`` holds what the extractor takes, ``index_key`` the item's
    index, ``labels_key`` the label (labelled datasets). A validation dataset that is also an
    :class:`IVisualizableDataset` is drawn in the worst-query plots. A component may leave out the datasets its
    data cannot give (a method raises ``NotImplementedError``, and the pipeline that needs it says so).

    A gallery index (``oml index build``, ``oml search``, :class:`~oml_core.index.GalleryIndex`) builds it the same
    way from its config (its ``transforms`` offered as ``transforms_predict`` and ``transforms_val``), records its
    spec and the data keys its factory takes, and asks it for its gallery (:meth:`gallery_dataset`, with
    :meth:`item_ids` and :meth:`item_names`), its validation split to calibrate on (where it has one), the queries
    of ``oml search`` (:meth:`query_dataset`; its ``--text`` queries: :meth:`text_query_dataset`) and, optionally,
    a probe query (:meth:`probe_query`).
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
        ``predictions.json``, the ``path`` of a gallery index's items and the names of ``oml search``'s queries
        (images: their paths). Names are unique."""
        raise NotImplementedError(f"the dataset component {type(self).__name__} does not name its items")

    # ------------------------------------------------------------------ a gallery index (oml index build, search)
    def gallery_dataset(self, rows: str = "all") -> IBaseDataset:
        """The items of a gallery index (``oml index build``), labelled (an :class:`ILabeledDataset`) where the
        data has labels. A gallery index also asks :meth:`validation_dataset`, where the data has one, to calibrate
        its match threshold on.

        Args:
            rows: ``"all"``: every item of the data (e.g. every row of the dataframe, both splits); ``"gallery"``:
                only the items marked as gallery items (e.g. the rows whose ``is_gallery`` is true). Data without
                such marks (e.g. a folder) gives all its items either way.

        Raises:
            ConfigError: data that cannot be read, naming the file, the column and the rows.
        """
        raise NotImplementedError(f"the dataset component {type(self).__name__} gives no gallery dataset")

    def item_ids(self, dataset: IBaseDataset) -> list[int]:
        """The id of every item of ``dataset`` (one of this component's), in its order: its position among all the
        component's items (images: the dataframe's row), so that an item has the same id in every dataset the
        component gives. A gallery index's items are known by these ids, and the index embeds once an item that
        is both in its gallery and in the validation split it calibrates on. Not implemented: the gallery's items
        are numbered ``0, 1, ...`` and the validation split is embedded on its own."""
        raise NotImplementedError(f"the dataset component {type(self).__name__} gives no item ids")

    def query_dataset(self, queries: Sequence[str], root: Path | None = None) -> IBaseDataset:
        """What ``oml search`` was given, as the items to embed, in that order and named by :meth:`item_names`
        (images: image files, every image of a folder, the rows of CSVs of queries with their boxes).

        Args:
            queries: The queries as the user wrote them (paths).
            root: The folder that the relative paths inside a list of queries are joined to (``oml search
                --dataset-root``); None: the list's own folder.

        Raises:
            ConfigError: a query that cannot be read or does not exist, naming it (the file, the row, the column),
                raised before any model runs.
        """
        raise NotImplementedError(f"the dataset component {type(self).__name__} takes no queries")

    def text_query_dataset(self, texts: Sequence[str]) -> IBaseDataset:
        """The query texts of ``oml search --text``, as the items to embed, in that order and named by
        :meth:`item_names` (a modality of texts: the texts themselves).

        Args:
            texts: The texts as the user wrote them.

        Raises:
            ConfigError: an empty text, naming it, raised before any model runs.
        """
        raise NotImplementedError(f"the dataset component {type(self).__name__} takes no query texts")

    def probe_query(self, folder: Path) -> str:
        """Write into ``folder`` a fixed query of this modality (the same bytes at every call, e.g. a picture) and
        return its file name. A gallery index keeps the file and its embedding (through :meth:`query_dataset` and
        the extractor) at build time, and refuses, before its first query, an extractor or processing that embeds
        it otherwise. Not implemented: the index keeps the input tensor of its first gallery item and its
        embedding instead, which catches another model but not a change of this component's processing."""
        raise NotImplementedError(f"the dataset component {type(self).__name__} writes no probe query")

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

    def check_extractor(self, extractor: Module) -> None:
        """Check, before any model runs, that ``extractor`` (the run's, built) takes this component's items: e.g.
        texts refuse a model whose vocabulary is smaller than their tokenizer's. Called by the pipelines and a
        gallery index once both are built; nothing to check by default.

        Raises:
            ConfigError: the extractor cannot take the items, naming both (the argument, the model's folder).
        """
        return None
