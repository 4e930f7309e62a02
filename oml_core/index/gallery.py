"""``GalleryIndex``: a gallery to serve, of the items of a dataset component (images by default: a dataframe or a
folder of pictures; any modality's plugin) or of embeddings: build it, search it by queries or embeddings,
calibrate a match threshold, save it to a folder and load it back.

Example::

    from oml_core.index import GalleryIndex

    index = GalleryIndex.from_dataframe(
        df, dataset_root="my_dataset",
        extractor={"name": "resnet", "args": {"weights": "best.ckpt", "arch": "resnet18", "gem_p": None,
                                              "remove_fc": True, "normalise_features": True}},
        transforms={"name": "norm_resize", "args": {"im_size": 64}},
        knn_backend="exact", calibration={"target": "precision", "value": 0.9},
    )
    index.save("my_index")
    hits = GalleryIndex.load("my_index").search(["query.jpg"], top_k=5)  # [[SearchHit(...), ...]]

An index that changes, by id, as a new generation of its folder (:mod:`oml_core.index.generations`: a segment
of its log of changes, or a whole generation when the log grew past :attr:`GalleryIndex.compact_fraction`)::

    index = GalleryIndex.load("my_index")
    index.upsert(["new.jpg", "better.jpg"], ids=[1000, 7])  # Upserted(added=1, updated=1)
    index.remove([3, 4])
    index.commit()  # durable when it returns; another process sees it after its refresh()
    index.item(1000)  # GalleryItem(id=1000, path='new.jpg', label=None)

An index of another dataset component, a plugin's (``oml index build dataset.name=...``)::

    index = GalleryIndex(extractor=..., dataset={"name": "my_modality", "args": {}},
                         data={"dataset_root": "my_data", "dataframe_name": "df.csv"})
    index.add_dataset(calibration={"target": "f1"})  # its items, calibrated on its validation split
    queries = collect_queries(index.data, ["queries.csv"])  # oml_core.index.queries
    hits = index.search(queries.dataset, top_k=5)
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import os
import shutil
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd
import torch
from torch import Tensor, nn
from torch.utils.data import Dataset

from oml_core.config.data import DATA_KEYS, build_dataset_component, check_datasets, dataset_entry
from oml_core.const import SPLIT_COLUMN, TBBox
from oml_core.datasets.image_data import ImageData
from oml_core.index.calibration import Calibration, CalibrationError, calibrate_rr, check_target
from oml_core.index.changes import Change, Recalibration, Removal, Upsert, Upserted, net_change
from oml_core.index.errors import GalleryIndexError, UnknownItemError
from oml_core.index.generations import (
    GENERATION_FILE,
    Layout,
    Segment,
    current_generation,
    generation_folder,
    generation_info,
    generation_names,
    pointer,
    read_layout,
    remove_generations,
    segment_path,
    writer_lock,
)
from oml_core.index.integrity import check_model, check_probe, model_json, rebuilt_spec
from oml_core.index.item_table import ITEMS_TABLE_FILE, ItemTable, RowsById
from oml_core.index.items import ItemInput, OneInput, Probe, SomeItems, is_item_input, size_of
from oml_core.index.manifest import (
    MANIFEST_KEY,
    UID_KEY,
    Manifest,
    check_files,
    check_uid,
    content_uid,
    manifest_of,
)
from oml_core.index.segments import LoggedChange, log_items, read_segment, write_segment
from oml_core.index.storage import (
    BACKEND_FOLDER,
    CALIBRATION_FILE,
    CALIBRATION_PLOT,
    EMBEDDINGS_FILE,
    INDEX_FILE,
    INDEX_FORMAT,
    INDEX_VERSION,
    ITEMS_FILE,
    OWN_FILES,
    WEIGHTS_FILE,
    WHOLE_FILES_VERSION,
    StoredEmbeddings,
    new_folder,
    read_embeddings,
    read_json,
    read_weights,
    write_embeddings,
    write_json,
    write_weights,
)
from oml_core.inference.flat import inference
from oml_core.interfaces.datasets import (
    IBaseDataset,
    IDatasetComponent,
    ILabeledDataset,
    IQueryGalleryLabeledDataset,
)
from oml_core.interfaces.knn import CannotRemoveError, IKnnIndex
from oml_core.knn.appended_rows import AppendedRows
from oml_core.knn.backend_checks import check_added, check_distance, check_k
from oml_core.knn.backend_search import make_knn_index, search_with_index
from oml_core.registry import ConfigError, Registry, RegistryError, default_registry, to_plain
from oml_core.registry.entry import Entry
from oml_core.retrieval.retrieval_results import RetrievalResults, factorize, get_sequence_ids
from oml_core.utils.atomic import fsync_directory
from oml_core.utils.precision import without_tf32

logger = logging.getLogger(__name__)

#: Which items of its dataset component :meth:`GalleryIndex.add_dataset` puts in the gallery.
GALLERY_ROWS = ("all", "gallery")

#: The keyword arguments of :meth:`GalleryIndex.calibrate` that ``add_dataset(calibration=...)`` takes.
CALIBRATE_ARGS = frozenset({"target", "value", "top_n"})
#: A component given by its spec (``{name, args}`` or a name), built by the registry.
Spec = Mapping[str, Any] | str
#: How the index names itself to its dataset component (in the component's messages).
INDEX_PIPELINE = "gallery index"
#: What names a probe that is a gallery item's input, after the file that keeps it.
INPUT_PROBE = "(its probe: a gallery item)"
#: The key of ``index.json`` that keeps :attr:`GalleryIndex.next_id` (an id is never given twice).
NEXT_ID_KEY = "next_id"
#: How long :meth:`GalleryIndex.commit` waits for another writer's lock by default, in seconds.
LOCK_TIMEOUT = 10.0
#: The ``top_n`` of a calibration made again whose arguments were not kept (:meth:`GalleryIndex.calibrate`'s).
DEFAULT_TOP_N = 5
#: The default of :attr:`GalleryIndex.compact_fraction`: a commit writes a whole generation once the log of
#: changes of its base generation would hold more items than this fraction of the base's.
COMPACT_FRACTION = 0.1
#: The default of :attr:`GalleryIndex.max_segments`: the most segments the log of a base generation holds.
MAX_SEGMENTS = 100


@dataclass(frozen=True)
class SearchHit:
    """One gallery item found for a query.

    Attributes:
        rank: 1 for the nearest item.
        id: The item's id.
        path: Its name: an image's path, or the item's name by its dataset component (None for an item added as an
            embedding without one).
        label: Its label (None when unknown).
        distance: Its distance to the query.
        match: ``distance < threshold`` of the index's calibration; None when the index is not calibrated.
    """

    rank: int
    id: int
    path: str | None
    label: int | None
    distance: float
    match: bool | None

    def to_dict(self) -> dict[str, Any]:
        """The hit as a JSON-able dict."""
        return asdict(self)


@dataclass(frozen=True)
class GalleryItem:
    """A gallery item as the index keeps it (:meth:`GalleryIndex.item`).

    Attributes:
        id: Its id.
        path: Its name: an image's path, a text, or its name by its dataset component (None: none).
        label: Its label (None when unknown).
    """

    id: int
    path: str | None
    label: int | None

    def to_dict(self) -> dict[str, Any]:
        """The item as a JSON-able dict."""
        return asdict(self)


class GalleryIndex:
    """Gallery items (their embeddings, ids, names and labels) in a knn backend, with the extractor, transforms
    and dataset component that embed queries, and optionally a calibrated match threshold.

    Args:
        extractor: The extractor that embeds items: a ``{name, args}`` spec (or a name) built by ``registry``
            (``args.weights``: a checkpoint path, a zoo key or null for random weights, seeded by ``seed``), or a
            model object. None: the index takes embeddings only. A spec is built on first use and saved with the
            index (a relative ``args.weights`` naming an existing file is made absolute); an object is not saved.
        transforms: Applied to every image before the extractor (offered to the dataset component as
            ``transforms_predict`` and ``transforms_val``): a spec (saved) or a callable (not saved); None: images
            are only normalised and made tensors.
        knn_backend: The registered ``knn_backend`` that searches the embeddings: a name or ``{name, args}``
            (``args.distance``, if given, must be ``distance``). Any registered backend works, a plugin's too.
        distance: ``"l2"`` or ``"cosine"``.
        dataset: The dataset component (kind ``dataset``) whose items the index holds and whose queries it takes:
            a name or ``{name, args}`` spec, saved; None: ``images``.
        data: The data keys offered to the component's factory, as a pipeline offers them (``dataset_root``,
            ``dataframe_name``, ``data_dir`` ...: :data:`~oml_core.config.data.DATA_KEYS`),
            JSON values, saved: ``oml search`` builds the component again with them.
        registry: Where the components are looked up (``default_registry()`` when None).
        seed: Seeds the building of the extractor, so that random weights are the same at every build.
        batch_size: Items per batch of the extractor.
        num_workers: Workers of the loader of items.
        device: Where the extractor embeds (e.g. ``"cuda:0"``; :func:`~oml_core.engine.one_device` gives it from
            the config keys ``accelerator`` and ``devices``): the extractor, built or given, is moved there before
            it embeds; None: where the extractor is (one built from a spec: the CPU). Not saved: the index is the
            same whatever device embedded it, its embeddings float32 on the CPU, computed on a GPU in float32
            rather than TF32 (:func:`~oml_core.utils.precision.without_tf32`).

    Raises:
        ValueError: a distance other than ``l2``, ``cosine`` (or another than the backend's); a spec that is
            not JSON values; ``data`` with a key that is not a data key.
        RegistryError: an unknown knn backend (with the close matches).
    """

    def __init__(
        self,
        extractor: Spec | nn.Module | None = None,
        transforms: Spec | Callable[[Any], Any] | None = None,
        knn_backend: Spec = "exact",
        distance: str = "l2",
        *,
        dataset: Spec | None = None,
        data: Mapping[str, Any] | None = None,
        registry: Registry | None = None,
        seed: int = 42,
        batch_size: int = 64,
        num_workers: int = 0,
        device: str | torch.device | None = None,
    ) -> None:
        self.distance = check_distance(distance)
        self.seed, self.batch_size, self.num_workers = seed, batch_size, num_workers
        #: Where the extractor embeds (None: where it is).
        self.device = None if device is None else torch.device(device)
        self._registry = registry
        self._extractor_spec, self._extractor = _spec_or_object(extractor, "extractor")
        if self._extractor_spec is not None:
            self._extractor_spec = _with_absolute_weights(self._extractor_spec)
        self._transforms_spec, self._transforms = _spec_or_object(transforms, "transforms")
        self._dataset_spec, dataset_object = _spec_or_object(dataset, "dataset")
        if dataset_object is not None:
            raise ValueError(f"dataset must be a registered name or a {{name, args}} spec, got {dataset!r}")
        self._data_keys = _data_keys(data)
        #: The dataset component, built on first use (:attr:`data`).
        self._data: IDatasetComponent | None = None
        backend_spec, _ = _spec_or_object(knn_backend, "knn_backend")
        if backend_spec is None:
            raise ValueError(
                f"knn_backend must be a registered name or a {{name, args}} spec, got {knn_backend!r}"
            )
        backend_distance = backend_spec["args"].setdefault("distance", self.distance)
        if backend_distance != self.distance:
            raise ValueError(
                f"the knn backend's args.distance is {backend_distance!r} but the index's distance is "
                f"{self.distance!r}; give one distance"
            )
        self._backend_spec = backend_spec
        self._backend = make_knn_index(backend_spec, self.distance, self.registry)
        #: The embeddings of the items (a loaded index's mapped from its file, then the rows added since).
        self._vectors = AppendedRows(torch.zeros(0, 0))
        #: The ids, names, labels and knn backend keys (the item's id in the backend, increasing in the items'
        #: order) of the items (:mod:`oml_core.index.item_table`), and the key of the next item.
        self._items = ItemTable()
        self._next_key = 0
        #: The row of every item by id (made when first needed after a change).
        self._row_of: RowsById | None = None
        #: The folder a loaded index was loaded from (where :meth:`commit` writes), its generation, and the
        #: changes made since it was loaded or committed.
        self._folder: Path | None = None
        self._generation = 0
        self._changes: list[Change] = []
        #: The base generation of the folder that this index holds (its items, read whole), its number of
        #: items, and the segments of its log applied on it since (:mod:`oml_core.index.generations`).
        self._base, self._base_items = 0, 0
        self._segments: tuple[Segment, ...] = ()
        #: When :meth:`commit` writes a whole generation rather than a segment of the log: once the log's items
        #: (put in or removed, this commit's included) would exceed ``compact_fraction`` of the base
        #: generation's items, or its segments ``max_segments`` (0: every commit writes a whole generation); a
        #: commit that recalibrates, or the first of a folder of version 2, always does.
        self.compact_fraction = COMPACT_FRACTION
        self.max_segments = MAX_SEGMENTS
        #: A loaded index's ``index.json``, and what its ``embeddings.pt`` holds beside the embeddings: what a
        #: commit writes again unchanged.
        self._meta: dict[str, Any] = {}
        self._stored: StoredEmbeddings | None = None
        #: Whether the gallery changed since :attr:`calibration` was made (saved with the index).
        self.calibration_stale = False
        #: The arguments of :meth:`calibrate` that made :attr:`calibration` (``target``, ``value``, ``top_n``).
        self._calibration_args: dict[str, Any] | None = None
        #: A loaded index's weights file and its sha256: the extractor spec is rebuilt with them.
        self._weights: tuple[Path, str] | None = None
        #: A loaded index's probe; checked before the first query.
        self._probe: Probe | None = None
        self._probe_checked = False
        #: The input of the first gallery item of the dataset component: the probe of a component without a
        #: probe query.
        self._first_input: ItemInput | None = None
        #: The calibrated match threshold (None: search answers no match / no-match).
        self.calibration: Calibration | None = None

    # ---------------------------------------------------------------------------------------- building
    @classmethod
    def from_dataframe(
        cls,
        df: pd.DataFrame,
        dataset_root: str | Path | None = None,
        *,
        rows: str = "all",
        calibration: Mapping[str, Any] | None = None,
        **index_args: Any,
    ) -> GalleryIndex:
        """An index of the rows of a dataframe of images in OML's format (checked first; images are cropped to
        their boxes when it has ``x_1, x_2, y_1, y_2``), through the ``images`` dataset component
        (:meth:`ImageData.of_dataframe <oml_core.datasets.image_data.ImageData.of_dataframe>`) and
        :meth:`add_dataset`.

        The items' ids are their row positions (0-based, as ``oml check-dataframe`` names rows), their paths
        absolute (``dataset_root / path``), their labels the ``label`` column.

        Args:
            df: The dataframe.
            dataset_root: The folder its ``path`` column is relative to (None: paths as they are).
            rows: ``"all"``: every row is a gallery item (train and validation); ``"gallery"``: only the rows
                whose ``is_gallery`` is true (train rows, whose flags are empty, are left out).
            calibration: When given, the keyword arguments of :meth:`calibrate` (``target``, ``value``,
                ``top_n``): the threshold is calibrated on the ``split == "validation"`` rows, their queries
                against their gallery items (their embeddings are computed once, with the gallery's).
            index_args: The arguments of :class:`GalleryIndex` (without ``dataset`` and ``data``).

        Raises:
            DataFrameFormatError: ``df`` is not in OML's format (naming the column and rows).
            ValueError: ``rows`` is neither ``all`` nor ``gallery``; ``calibration`` with other keys or a bad
                target or value, or on a dataframe without validation rows (checked before any image is read).
            ConfigError: an image that cannot be read or a box outside its image (checked before the extractor
                runs).
            CalibrationError: the validation rows cannot give a threshold for the target.
        """
        if rows not in GALLERY_ROWS:
            raise ValueError(f"rows must be one of {list(GALLERY_ROWS)}, got {rows!r}")
        index = cls._of_images(index_args)
        data = ImageData.of_dataframe(df, dataset_root, transforms=index.transforms)
        if calibration is not None:
            check_calibration_args(calibration)
            if not (data.dataframe[SPLIT_COLUMN] == "validation").any():
                raise ValueError("the dataframe has no split=validation rows to calibrate the threshold on")
        index._data = data
        index.add_dataset(rows, calibration)
        return index

    @classmethod
    def from_folder(cls, folder: str | Path, **index_args: Any) -> GalleryIndex:
        """An index of every image under ``folder`` (``.jpg, .jpeg, .png``, any case, searched recursively), in
        the sorted order of their absolute paths, without labels, through the ``images`` dataset component.

        Raises:
            GalleryIndexError: ``folder`` is not a folder.
            ConfigError: ``folder`` holds no image, or an image cannot be read (checked before the extractor runs).
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise GalleryIndexError(f"{folder}: no such folder of images")
        index = cls._of_images(index_args)
        index._data = ImageData(data_dir=folder, transforms_predict=index.transforms, pipeline=INDEX_PIPELINE)
        index.add_dataset()
        return index

    @classmethod
    def _of_images(cls, index_args: Mapping[str, Any]) -> GalleryIndex:
        """A new index of ``index_args`` whose dataset component is ``images`` (the default)."""
        index = cls(**index_args)
        if index._dataset_spec not in (None, {"name": "images", "args": {}}) or index._data_keys:
            raise ValueError("an index of a dataframe or folder of images takes no dataset or data")
        return index

    def add_dataset(self, rows: str = "all", calibration: Mapping[str, Any] | None = None) -> str | None:
        """Add the gallery items of the index's dataset component (:meth:`IDatasetComponent.gallery_dataset
        <oml_core.interfaces.datasets.IDatasetComponent.gallery_dataset>`), their names as paths, their ids (the
        component's :meth:`item_ids <oml_core.interfaces.datasets.IDatasetComponent.item_ids>`, or the integers
        after the largest id so far) and labels (a labelled dataset's); with ``calibration``, then calibrate the
        match threshold on the component's validation split, an item of which that is in the gallery being
        embedded once. The component checks both datasets first (its ``check``; its warnings are issued).

        Args:
            rows: ``"all"``: every item of the data; ``"gallery"``: only its gallery items (``is_gallery``).
            calibration: When given, the keyword arguments of :meth:`calibrate` (``target``, ``value``,
                ``top_n``).

        Returns:
            Why the index was not calibrated although ``calibration`` was given: the component gives no
            validation split (e.g. ``a folder of images has no labels``); None otherwise.

        Raises:
            ValueError: a bad ``rows`` or ``calibration`` (before anything is read).
            ConfigError: the component's data cannot be read, or an item of it (named, before the extractor runs);
                the extractor cannot take its items (the component's ``check_extractor``).
            GalleryIndexError: the component gives no gallery; see :meth:`embed`.
            CalibrationError: the validation split cannot give a threshold for the target.
        """
        if rows not in GALLERY_ROWS:
            raise ValueError(f"rows must be one of {list(GALLERY_ROWS)}, got {rows!r}")
        if calibration is not None:
            check_calibration_args(calibration)
        data = self.data
        try:
            gallery = data.gallery_dataset(rows)
        except NotImplementedError as e:
            raise GalleryIndexError(f"{e}: a gallery index cannot be built of its items") from e
        validation, not_calibrated = None, None
        if calibration is not None:
            try:
                validation = data.validation_dataset()
            except NotImplementedError as e:
                not_calibrated = str(e)
        datasets = [gallery] if validation is None else [gallery, validation]
        check_datasets(data, datasets, self.num_workers, None, self._dataset_entry)
        if self._has_extractor:
            data.check_extractor(self.extractor)
        names = item_names(data, gallery)
        gallery_ids = item_ids(data, gallery)
        labels = gallery.get_labels().tolist() if isinstance(gallery, ILabeledDataset) else None
        if size_of(gallery) and self._first_input is None:
            self._first_input = gallery[0][gallery.input_tensors_key]
        embeddings = self.embed(gallery) if size_of(gallery) else torch.zeros(0, 0)
        self._add(embeddings, names, labels, gallery_ids)
        if validation is not None and calibration is not None:
            known = {} if gallery_ids is None else dict(zip(gallery_ids, embeddings))
            self._calibrate_on(validation, item_ids(data, validation), known, calibration)
        return not_calibrated

    def _calibrate_on(
        self,
        validation: IQueryGalleryLabeledDataset,
        ids: list[int] | None,
        known: Mapping[int, Tensor],
        calibration: Mapping[str, Any],
    ) -> None:
        """Calibrate on ``validation`` (a labelled query/gallery split), whose items of ``ids`` found in ``known``
        (the gallery's embeddings by id) are not embedded again."""
        n = size_of(validation)
        reused = {} if ids is None else {i: known[item] for i, item in enumerate(ids) if item in known}
        missing = [i for i in range(n) if i not in reused]
        computed = dict(zip(missing, self.embed(SomeItems(validation, missing)))) if missing else {}
        rows = [reused[i] if i in reused else computed[i] for i in range(n)]
        embeddings = torch.stack(rows) if rows else torch.zeros(0, 0)
        is_query, is_gallery = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        is_query[validation.get_query_ids().numpy()] = True
        is_gallery[validation.get_gallery_ids().numpy()] = True
        sequences = get_sequence_ids(validation)
        self.calibrate(
            embeddings,
            validation.get_labels().tolist(),
            is_query,
            is_gallery,
            sequences=None if sequences is None else sequences.tolist(),
            **calibration,
        )

    # ------------------------------------------------------------------------------------------ items
    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        calibrated = "calibrated" if self.calibration is not None else "not calibrated"
        return (
            f"{type(self).__name__}({len(self)} items, knn_backend={self._backend_spec['name']!r}, "
            f"distance={self.distance!r}, {calibrated})"
        )

    @property
    def embeddings(self) -> Tensor:
        """``[n, dim]`` float32 embeddings of the items, in the order they were added (those of a loaded index of
        version 5, before any change, a read-only tensor on the mapping of its file)."""
        return self._vectors.rows

    @property
    def ids(self) -> list[int]:
        """The items' ids."""
        return self._items.ids

    @property
    def paths(self) -> list[str | None]:
        """The items' names: image paths, or their names by the dataset component (None for an embedding added
        without one)."""
        return self._items.paths

    @property
    def labels(self) -> list[int | None]:
        """The items' labels (None when unknown)."""
        return self._items.labels

    @property
    def config(self) -> dict[str, Any]:
        """What builds this index again (saved with it): the extractor, transforms and knn backend specs (None
        for objects), the distance, the seed, the batch size, the number of workers, the dataset component's spec
        (None: images) and its data keys."""
        return {
            "extractor": self._extractor_spec,
            "transforms": self._transforms_spec,
            "knn_backend": self._backend_spec,
            "distance": self.distance,
            "seed": self.seed,
            "batch_size": self.batch_size,
            "num_workers": self.num_workers,
            "dataset": self._dataset_spec,
            "data": dict(self._data_keys),
        }

    @property
    def registry(self) -> Registry:
        """The registry that builds the components."""
        return self._registry if self._registry is not None else default_registry()

    @property
    def _dataset_entry(self) -> Entry:
        """The registry entry of the index's dataset component (names it and its plugin in messages)."""
        return dataset_entry(self.registry, self._dataset_spec)

    @property
    def _has_extractor(self) -> bool:
        """Whether the index has an extractor: its spec, or an object given."""
        return self._extractor_spec is not None or self._extractor is not None

    @property
    def extractor(self) -> nn.Module:
        """The extractor (built from its spec on first use, seeded with ``seed``). A loaded index rebuilds it
        from its spec with every ``weights`` argument null and loads the weights saved in its folder
        (``weights.pt``, checked against its sha256): no file outside the folder is read.

        Raises:
            GalleryIndexError: the index has no extractor, or its spec cannot be built (a weights file that does
                not exist or does not fit), or its saved weights are not those it was built with.
            RegistryError: its name is not registered (e.g. its plugin is not installed).
        """
        if self._extractor is None:
            if self._extractor_spec is None:
                raise GalleryIndexError(
                    "this index has no extractor (it was built from embeddings, or with an extractor object, "
                    "which is not saved): give one (GalleryIndex.load(folder, extractor=...)) to embed images"
                )
            if self._weights is None:
                self._extractor = self._build("extractor", self._extractor_spec)
            else:
                self._extractor = self._build_with_saved_weights(self._extractor_spec, *self._weights)
        return self._extractor

    def _build_with_saved_weights(self, spec: dict[str, Any], weights_file: Path, sha256: str) -> nn.Module:
        """The extractor of ``spec`` with null ``weights``, loaded strictly with the state dict of
        ``weights_file`` (whose sha256 is checked first)."""
        state_dict = read_weights(weights_file, sha256)
        extractor = self._build("extractor", rebuilt_spec(spec))
        try:
            extractor.load_state_dict(state_dict, strict=True)
        except RuntimeError as e:
            raise GalleryIndexError(
                f"{weights_file}: does not fit the index's extractor {spec['name']!r} ({e})"
            ) from e
        return extractor

    @property
    def transforms(self) -> Callable[[Any], Any] | None:
        """The transforms of the images (built from their spec on first use)."""
        if self._transforms is None and self._transforms_spec is not None:
            self._transforms = self._build("transforms", self._transforms_spec)
        return self._transforms

    def _build(self, kind: str, spec: dict[str, Any]) -> Any:
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.seed)
                return self.registry.build(kind, spec)
        except RegistryError:
            raise
        except (FileNotFoundError, ValueError) as e:
            raise GalleryIndexError(f"the index's {kind} {spec['name']!r} cannot be built: {e}") from e

    @property
    def data(self) -> IDatasetComponent:
        """The dataset component whose items the index holds and whose queries it takes: built on first use from
        its spec (None: ``images``) with its data keys and the index's :attr:`transforms` (offered as
        ``transforms_predict`` and ``transforms_val``) by
        :func:`~oml_core.config.data.build_dataset_component`; nothing of the data is read.

        Raises:
            RegistryError: the component is not registered (e.g. its plugin is not installed).
            ConfigError: the component refuses its arguments.
        """
        if self._data is None:
            config = {
                "dataset": self._dataset_spec,
                **self._data_keys,
                "transforms_predict": self.transforms,
                "transforms_val": self.transforms,
            }
            self._data = build_dataset_component(self.registry, config, INDEX_PIPELINE)
        return self._data

    def embed(
        self, items: Sequence[str | Path] | IBaseDataset, bboxes: Sequence[TBBox | None] | None = None
    ) -> Tensor:
        """``[n, dim]`` float32 embeddings of ``items``: a dataset of the index's dataset component (e.g. its
        :meth:`~oml_core.interfaces.datasets.IDatasetComponent.query_dataset`), or image files (the ``images``
        component: cropped to ``bboxes``, then the transforms), by the extractor.

        A loaded index first embeds its probe and checks it against its embedding at build time
        (:func:`~oml_core.index.integrity.check_probe`), once.

        Args:
            items: The dataset, or the image files.
            bboxes: With image files, one box ``(x_1, y_1, x_2, y_2)`` (or None: the whole image) per image;
                None: no boxes.

        Raises:
            ValueError: ``bboxes`` of another length, or with a dataset.
            GalleryIndexError: an image that does not exist (checked before the extractor is built) or cannot
                be read (the message names it); image files for an index of another component; the extractor or
                transforms do not reproduce the probe's embedding; see :attr:`extractor`.
        """
        if isinstance(items, Dataset):
            if bboxes is not None:
                raise ValueError("bboxes go with image paths, not with a dataset")
            dataset: IBaseDataset = items
        else:
            dataset = self._image_files(list(items), bboxes)
        self._check_probe()
        return self._infer(dataset)

    def _image_files(self, paths: list[str | Path], bboxes: Sequence[TBBox | None] | None) -> IBaseDataset:
        """The dataset of the image files ``paths`` (cropped to ``bboxes``) of the index's ``images`` component."""
        data = self.data
        if not isinstance(data, ImageData):
            raise GalleryIndexError(
                f"image paths are items of the images dataset component, and this index's is "
                f"{type(data).__name__}: give its queries as a dataset (oml_core.index.queries.collect_queries) or "
                f"embeddings"
            )
        try:
            return data.image_dataset(paths, bboxes)
        except ConfigError as e:
            raise GalleryIndexError(str(e)) from e

    def _check_probe(self) -> None:
        """A loaded index's probe embedded by the extractor and transforms in use, checked against its embedding
        at build time (once)."""
        if self._probe is not None and not self._probe_checked:
            probe = self._probe
            items = self._probe_query(probe.item) if isinstance(probe.item, Path) else OneInput(probe.item)
            check_probe(probe.embedding, self._infer(items)[0], probe.name)
            self._probe_checked = True

    def _probe_query(self, file: Path) -> IBaseDataset:
        """The probe query ``file`` as the dataset component reads it."""
        try:
            return self.data.query_dataset([str(file)])
        except (NotImplementedError, ConfigError) as e:
            raise GalleryIndexError(f"{file}: the index's probe query cannot be read: {e}") from e

    def _infer(self, dataset: IBaseDataset) -> Tensor:
        """The float32 CPU embeddings of ``dataset`` by the extractor on :attr:`device`, without TF32."""
        extractor = self.extractor if self.device is None else self.extractor.to(self.device)
        try:
            with without_tf32():
                return inference(extractor, dataset, batch_size=self.batch_size, num_workers=self.num_workers)
        except OSError as e:  # an item that cannot be read (imread_pil names the image)
            raise GalleryIndexError(str(e)) from e

    def add(
        self,
        items: Tensor | Sequence[str | Path],
        labels: Sequence[int | None] | None = None,
        ids: Sequence[int] | None = None,
        paths: Sequence[str | Path | None] | None = None,
    ) -> None:
        """Add gallery items: ``[n, dim]`` embeddings, or image files (paths) embedded by :meth:`embed` (for the
        items of a dataset component, see :meth:`add_dataset`; to replace items by id, :meth:`upsert`).

        Args:
            items: The embeddings, or the image paths (their ``paths``).
            labels: ``n`` integer labels (None entries: unknown); None: all unknown.
            ids: ``n`` distinct integer ids, none of them already in the index; None: the integers after the
                largest id ever given (:attr:`next_id`; 0, 1, ... in a new index).
            paths: With embeddings, the image path (or name) of each (or None); not with images.

        Raises:
            ValueError: labels, ids or paths of another length, not integers, ids already taken, embeddings
                that are not finite or of another dimension than the index's.
            GalleryIndexError: see :meth:`embed`.
        """
        n = self._count(items)
        labels_list = [None] * n if labels is None else _labels(labels, n)
        ids_list = self._new_ids(ids, n)
        embeddings, names, _ = self._embedded(items, paths)
        self._add(embeddings, names, labels_list, ids_list)

    def _add(
        self,
        embeddings: Tensor,
        paths: list[str | None],
        labels: Sequence[Any] | None,
        ids: Sequence[int] | None,
    ) -> None:
        n = len(embeddings)
        if n == 0:
            return
        if len(paths) != n:
            raise ValueError(f"paths must have one entry per item ({n}), got {len(paths)}")
        labels_list: list[int | None] = [None] * n if labels is None else _labels(labels, n)
        change = Upsert(
            self._checked(embeddings), self._new_ids(ids, n), list(paths), labels_list, fresh=ids is None
        )
        self._apply(change)
        self._record(change)

    @property
    def next_id(self) -> int:
        """The id that the next item put without an id gets: after the largest id the index ever gave or held
        (kept in ``index.json`` as ``next_id``), so that the id of a removed item is never given to another (a
        client that keeps ids never finds another item under one)."""
        recorded = self._meta.get(NEXT_ID_KEY, 0)
        largest = self._items.max_id()
        held = 0 if largest is None else largest + 1
        return max(recorded if isinstance(recorded, int) else 0, held)

    def _new_ids(self, ids: Sequence[int] | None, n: int) -> list[int]:
        """``n`` new ids: ``ids`` checked to be distinct integers that the index does not have, or the integers
        from :attr:`next_id` on."""
        values = self._upsert_ids(ids, n)
        taken = [value for value in values if value in self._rows()]
        if taken:
            raise ValueError(f"id {taken[0]} is given to two items; ids must be distinct")
        return values

    def _upsert_ids(self, ids: Sequence[int] | None, n: int) -> list[int]:
        """``ids`` checked to be ``n`` distinct integers, or (None) the ``n`` integers from :attr:`next_id` on."""
        if ids is None:
            start = self.next_id
            return list(range(start, start + n))
        values = list(ids)
        if len(values) != n or not all(_is_int(v) for v in values):
            raise ValueError(f"ids must be {n} integers, one per item, got {len(values)} values")
        values = [int(v) for v in values]
        if len(set(values)) != len(values):
            twice = next(v for v in values if values.count(v) > 1)
            raise ValueError(f"id {twice} is given to two items; ids must be distinct")
        return values

    def _count(self, items: Tensor | IBaseDataset | Sequence[str | Path] | str | Path) -> int:
        """How many items ``items`` are (embeddings, a dataset, image paths), before any is read."""
        if isinstance(items, Tensor):
            return len(items)
        if isinstance(items, Dataset):
            return size_of(items)
        return 1 if isinstance(items, str | Path) else len(items)

    def _embedded(
        self,
        items: Tensor | IBaseDataset | Sequence[str | Path] | str | Path,
        paths: Sequence[str | Path | None] | None,
    ) -> tuple[Tensor, list[str | None], list[int | None] | None]:
        """The embeddings, names and labels (a labelled dataset's; else None) of ``items``: embeddings (named by
        ``paths``), a dataset of the index's dataset component (named by it) or image files (their paths)."""
        if isinstance(items, Tensor):
            n = len(items)
            names: list[str | None] = [None] * n
            if paths is not None:
                names = [None if p is None else str(p) for p in paths]
            return items, names, None
        if paths is not None:
            raise ValueError("paths go with embeddings; items of a dataset or images are named by themselves")
        if isinstance(items, Dataset):
            if not size_of(items):
                return torch.zeros(0, 0), [], None
            labels = (
                _labels(items.get_labels().tolist(), size_of(items))
                if isinstance(items, ILabeledDataset)
                else None
            )
            return self.embed(items), item_names(self.data, items), labels
        image_paths = [str(p) for p in ([items] if isinstance(items, str | Path) else items)]
        embeddings = self.embed(image_paths) if image_paths else torch.zeros(0, 0)
        return embeddings, list(image_paths), None

    def _checked(self, embeddings: Tensor) -> Tensor:
        """``embeddings`` as checked float32 CPU rows of the index's dimension (before anything changes)."""
        dim = self._vectors.width
        return check_added(embeddings, None, None, 0, dim)[0].float()

    # ------------------------------------------------------------------------------------------ changes
    def upsert(
        self,
        items: Tensor | IBaseDataset | Sequence[str | Path] | str | Path,
        *,
        ids: Sequence[int] | None = None,
        labels: Sequence[int | None] | None = None,
        paths: Sequence[str | Path | None] | None = None,
    ) -> Upserted:
        """Put items into the gallery by id: an item of an id the index has replaces it (its vector and item: it
        then comes after the others, as a new one does); the others are added after the index's items. The
        change is in memory until :meth:`commit`; the calibration, if any, is kept and marked stale
        (:attr:`calibration_stale`).

        The knn backend is changed in place where it can remove items (``exact``, ``faiss_flat``,
        ``faiss_ivf``), else built again from the index's embeddings: either way a search then answers as an
        index built from scratch of the resulting items in their order.

        Args:
            items: ``[n, dim]`` embeddings, a dataset of the index's dataset component (e.g. the
                ``dataset`` of :func:`~oml_core.index.queries.collect_queries`: named by the component, labelled
                when it is labelled) or image files (their paths), embedded by :meth:`embed`.
            ids: ``n`` distinct integer ids; None: the integers from :attr:`next_id` on (all new).
            labels: ``n`` integer labels (None entries: unknown); None: the dataset's, else unknown.
            paths: With embeddings, the name of each (or None).

        Returns:
            How many items were added and how many updated.

        Raises:
            ValueError: ids or labels of another length, not integers, an id given twice (before anything is
                embedded); embeddings not finite or of another dimension than the index's.
            GalleryIndexError: see :meth:`embed`.
        """
        n = self._count(items)
        ids_list = self._upsert_ids(ids, n)
        given_labels = None if labels is None else _labels(labels, n)
        embeddings, names, dataset_labels = self._embedded(items, paths)
        if len(names) != n:
            raise ValueError(f"paths must have one entry per item ({n}), got {len(names)}")
        if n == 0:
            return Upserted(0, 0)
        labels_list = given_labels or dataset_labels or [None] * n
        change = Upsert(self._checked(embeddings), ids_list, names, labels_list, fresh=ids is None)
        done = self._apply(change)
        self._record(change)
        return done

    def remove(self, ids: int | Sequence[int]) -> int:
        """Remove the items of ``ids`` from the gallery (in memory until :meth:`commit`); the others keep their
        order. The calibration, if any, is kept and marked stale.

        Returns:
            The number of items removed.

        Raises:
            ValueError: ids that are not integers, or an id given twice.
            UnknownItemError: ids that no item has (all named; nothing was removed).
        """
        given = [cast(int, ids)] if _is_int(ids) else list(cast(Sequence[int], ids))
        values = self._upsert_ids(given, len(given))
        unknown = [value for value in values if value not in self._rows()]
        if unknown:
            raise UnknownItemError(unknown, self._where())
        change = Removal(values)
        self._apply(change)
        self._record(change)
        return len(values)

    def item(self, id: int) -> GalleryItem:
        """The gallery item of ``id``: its id, path (or text, or name) and label.

        Raises:
            UnknownItemError: no item has ``id``.
        """
        row = self._rows().get(id) if _is_int(id) else None
        if row is None:
            raise UnknownItemError([id], self._where())
        return GalleryItem(*self._items.rows([row])[0])

    @property
    def generation(self) -> int:
        """The generation of the index's folder that this index holds, with its changes since (see
        :mod:`oml_core.index.generations`): 0 for an index not loaded, or loaded from a folder of version 2
        that no commit changed yet."""
        return self._generation

    def recalibrate(self) -> Calibration:
        """Calibrate the match threshold again, with the arguments of the calibration the index has (``target``,
        ``value``, ``top_n``; 5 for an index saved before they were kept), on the validation split of its dataset
        component as it is now, every item of it embedded by the index's extractor; the calibration is then no
        longer stale. In memory until :meth:`commit`.

        Raises:
            GalleryIndexError: the index is not calibrated, or its dataset component has no validation split.
            CalibrationError: the split cannot give a threshold for the target.
            ConfigError: an item of the split cannot be read.
        """
        if self.calibration is None:
            raise GalleryIndexError(
                f"{self._where()}: the index is not calibrated, so it has no target to calibrate for again"
            )
        args = self._calibration_args or {
            "target": self.calibration.target,
            "value": self.calibration.value,
            "top_n": DEFAULT_TOP_N,
        }
        data = self.data
        try:
            validation = data.validation_dataset()
        except NotImplementedError as e:
            raise GalleryIndexError(f"{self._where()}: {e}: the index cannot be calibrated again") from e
        check_datasets(data, [validation], self.num_workers, None, self._dataset_entry)
        self._calibrate_on(validation, None, {}, args)
        assert self.calibration is not None
        return self.calibration

    def commit(self, timeout: float = LOCK_TIMEOUT) -> int:
        """Write the changes since the index was loaded (or last committed) into its folder as a new
        generation, durably (see :mod:`oml_core.index.generations`): when it returns, they survive a kill or a
        power loss; a kill during it leaves the folder as before. Under the folder's writer lock, the index
        first takes the generation another process may have committed meanwhile and makes its own changes
        again on top of it (:meth:`refresh`).

        The changes are written as a segment of the log of the base generation (their items and the ids
        removed only: what it writes does not grow with the gallery), or as a whole generation (items,
        embeddings, backend, calibration) when the log would grow past :attr:`compact_fraction` of the base's
        items or :attr:`max_segments` segments, when they recalibrate, when the backend holds its items outside
        the index (:attr:`~oml_core.interfaces.knn.IKnnIndex.holds_items_outside`), and at the first commit of a
        folder of version 2, 3 or 4 (converted even without changes, so that it gains its manifest,
        :mod:`oml_core.index.manifest`, and its items and embeddings in the files that open memory-mapped,
        :mod:`oml_core.index.storage`); after a whole generation, the generations but the previous base are
        removed.

        Args:
            timeout: Seconds to wait for another writer's lock.

        Returns:
            The generation of the folder now.

        Raises:
            GalleryIndexError: the index was not loaded from a folder; see :meth:`refresh`.
            IndexLockedError: another process held the lock for ``timeout`` seconds (nothing was written).
        """
        folder = self._bound_folder()
        with writer_lock(folder, timeout):
            self.refresh()
            if not self._changes and self._generation > 0 and self._meta.get("version") == INDEX_VERSION:
                return self._generation
            generation = self._generation + 1
            if self._compacts():
                self._write_whole(folder, generation)
            else:
                self._write_segment(folder, generation)
        logger.debug("%s: committed generation %d (%d items)", folder, generation, len(self))
        return generation

    def _compacts(self) -> bool:
        """Whether :meth:`commit` writes its changes as a whole generation (see there) rather than a segment."""
        if self._generation == 0 or any(isinstance(change, Recalibration) for change in self._changes):
            return True
        if self._backend.holds_items_outside:  # its older saves name a collection that has changed since
            return True
        # an older folder: its base is rewritten in this format
        if self._meta.get("version") != INDEX_VERSION:
            return True
        if len(self._segments) + 1 > self.max_segments:
            return True
        logged = sum(segment.items for segment in self._segments) + log_items(self._changes)
        return logged > self.compact_fraction * self._base_items

    def _write_segment(self, folder: Path, generation: int) -> None:
        """Write the changes as the segment of the base's log that makes ``generation``, then the pointer that
        names it (a kill before the pointer is replaced leaves a segment that nothing names, replaced by the
        next commit's)."""
        data = generation_folder(folder, self._base)
        changes = cast(list[LoggedChange], self._changes)  # a recalibration is written whole (_compacts)
        sha256 = write_segment(segment_path(data, generation), generation, changes)
        segments = (*self._segments, Segment(generation, log_items(changes), sha256))
        meta = pointer(self._meta, generation, self._base, segments)
        write_json(folder / INDEX_FILE, meta)
        self._generation, self._segments, self._meta, self._changes = generation, segments, meta, []

    def _write_whole(self, folder: Path, generation: int) -> None:
        """Write the index as the whole generation ``generation`` (a new base without a log), then the pointer
        that names it with the manifest of its files and of the probe query; then remove the generations but the
        previous base."""
        data = generation_folder(folder, generation)
        if data.exists():
            shutil.rmtree(data)  # left by a commit that was killed before it switched
        data.mkdir()
        recalibrated = any(isinstance(change, Recalibration) for change in self._changes)
        plot = None if recalibrated else generation_folder(folder, self._base) / CALIBRATION_PLOT
        stored = self._stored_template()
        try:
            uid = self._write_generation(data, generation, stored, plot)
            fsync_directory(folder)
            manifest = self._manifest(folder, generation, stored, uid)
        except BaseException:
            shutil.rmtree(data, ignore_errors=True)  # the folder is as before: index.json names the last one
            raise
        meta = pointer({**self._meta, MANIFEST_KEY: manifest.to_dict()}, generation, generation, ())
        write_json(folder / INDEX_FILE, meta)
        previous = self._base
        self._generation, self._base, self._base_items = generation, generation, len(self)
        self._segments, self._meta, self._changes = (), meta, []
        remove_generations(folder, {generation, previous})

    def refresh(self) -> bool:
        """Take the generation that another process committed into the index's folder since this index read it,
        if any (a cheap check of ``index.json`` otherwise): an index without changes of its own that holds the
        same base generation reads and applies the new segments of its log only; else it reads the new
        generation whole, and the changes not yet committed here are made again on top of it.

        Returns:
            Whether the index took a new generation.

        Raises:
            GalleryIndexError: the index was not loaded from a folder; the folder cannot be read; a change made
                here cannot be made again (e.g. the removal of an id that the other process removed): the
                changes not committed here are then dropped, the index holds the new generation.
        """
        folder = self._bound_folder()
        if current_generation(folder) == self._generation:
            return False
        if not self._changes and self._took_new_segments(folder):
            return True
        layout, state = _read_current(folder, self._read_generation)
        before, changes = self._generation, self._changes
        self._set_generation(layout, state)
        try:
            for change in changes:
                self._apply(change)
        except (GalleryIndexError, ValueError) as e:
            self._set_generation(*_read_current(folder, self._read_generation))
            self._changes = []
            raise GalleryIndexError(
                f"{folder} was changed by another process (generation {before} to {layout.generation}) and the "
                f"changes made here cannot be made again on it ({e}); they were dropped"
            ) from e
        self._changes = changes
        logger.debug("%s: took generation %d of another process", folder, layout.generation)
        return True

    def _took_new_segments(self, folder: Path) -> bool:
        """Whether the index took the generation of ``folder`` by applying the segments of its log after the
        generation it holds: False (nothing changed) when the folder's base is another (a whole generation was
        written since) or its segments cannot be read (a writer removed the base meanwhile: the whole read that
        follows says what is wrong, if anything)."""
        try:
            layout = read_layout(folder)
            if layout.base != self._base or layout.generation <= self._generation:
                return False
            log = _read_log(layout, after=self._generation)
        except GalleryIndexError as e:
            logger.debug("%s: reading the generation whole: %s", folder, e)
            return False
        self._replay(layout, log)
        logger.debug("%s: took the segments to generation %d of another process", folder, layout.generation)
        return True

    def _replay(self, layout: Layout, changes: list[LoggedChange]) -> None:
        """Make the ``changes`` of segments of ``layout``'s log, in order, as their net effect
        (:func:`~oml_core.index.changes.net_change`: one removal and one add in the backend, or one rebuild when
        it cannot remove), and hold the generation of ``layout`` that they make.

        Raises:
            GalleryIndexError: changes that cannot be made (e.g. an id removed that no item has), naming the
                folder of the log.
        """
        if changes:
            rows = self._rows()
            try:
                net = net_change(changes, rows)
            except ValueError as e:
                raise GalleryIndexError(
                    f"{layout.data}: the changes of its log to generation {layout.generation} cannot be made on "
                    f"its items ({e})"
                ) from e
            self._replace_rows([rows[item] for item in net.dropped], net.upsert)
            self.calibration_stale = self.calibration is not None
        self._generation, self._segments, self._meta = layout.generation, layout.segments, layout.meta

    def _apply(self, change: Change) -> Upserted:
        """Make ``change`` in memory (see :class:`~oml_core.index.changes.Change`)."""
        if isinstance(change, Recalibration):
            self.calibration, self._calibration_args = change.calibration, dict(change.args)
            self.calibration_stale = False
            return Upserted(0, 0)
        rows = self._rows()
        if isinstance(change, Removal):
            unknown = [value for value in change.ids if value not in rows]
            if unknown:
                raise UnknownItemError(unknown, self._where())
            self._replace_rows([rows[value] for value in change.ids], None)
            updated = 0
        else:
            dropped = [rows[value] for value in change.ids if value in rows]
            if (
                change.fresh and dropped
            ):  # new items, made again on another writer's generation that gave the id
                raise ValueError(
                    f"id {self._items.rows([dropped[0]])[0][0]} is given to two items, here and by another writer"
                )
            self._replace_rows(dropped, change)
            updated = len(dropped)
            if change.ids:
                self._meta = {**self._meta, NEXT_ID_KEY: max(self.next_id, max(change.ids) + 1)}
        self.calibration_stale = self.calibration is not None
        return Upserted(len(change.ids) - updated if isinstance(change, Upsert) else 0, updated)

    def _replace_rows(self, dropped: list[int], new: Upsert | None) -> None:
        """Remove the items of rows ``dropped`` and append those of ``new``, in the backend too: in place, or by
        a backend built again from the embeddings when it cannot remove items."""
        rebuild = False
        if dropped:
            kept = torch.ones(len(self), dtype=torch.bool)
            kept[dropped] = False
            try:
                self._backend.remove(self._items.keys[~kept])
            except CannotRemoveError as e:
                logger.info("%s: building it again from the index's embeddings", e)
                rebuild = True
            self._vectors.keep(kept)
            self._items.keep(kept.numpy())
        if new is not None:
            keys = torch.arange(self._next_key, self._next_key + len(new.ids))
            self._next_key += len(new.ids)
            if not rebuild:
                self._backend.add(new.embeddings, ids=keys)
            self._vectors.append(new.embeddings)
            self._items.append(ItemTable.of(new.ids, new.paths, new.labels, keys))
        if rebuild:
            backend = make_knn_index(self._backend_spec, self.distance, self.registry)
            if len(self):
                backend.add(self.embeddings, ids=self._items.keys)
            self._backend = backend
        self._row_of = None

    def _rows(self) -> RowsById:
        """The row of every item by id."""
        if self._row_of is None:
            self._row_of = RowsById(self._items.id_array)
        return self._row_of

    def _record(self, change: Change) -> None:
        """Keep ``change`` for :meth:`commit` (an index not loaded from a folder has nothing to commit)."""
        if self._folder is not None:
            self._changes.append(change)

    def _where(self) -> str:
        """What names the index in messages: its folder, or "the gallery index"."""
        return str(self._folder) if self._folder is not None else "the gallery index"

    def _bound_folder(self) -> Path:
        if self._folder is None:
            raise GalleryIndexError(
                "this index was not loaded from a folder, so it has none to commit to or refresh from: save it "
                "(save) and load it (GalleryIndex.load)"
            )
        return self._folder

    # ----------------------------------------------------------------------------------------- search
    def search(
        self,
        queries: Tensor | IBaseDataset | Sequence[str | Path] | str | Path,
        top_k: int = 5,
        *,
        bboxes: Sequence[TBBox | None] | None = None,
    ) -> list[list[SearchHit]]:
        """The ``top_k`` nearest gallery items of every query, nearest first.

        Args:
            queries: ``[Q, dim]`` embeddings, a dataset of the index's dataset component (e.g. the queries of
                :func:`~oml_core.index.queries.collect_queries`), or image paths (one or a sequence), embedded by
                :meth:`embed`.
            top_k: Items per query (fewer when the gallery is smaller).
            bboxes: With image paths, the box of each to crop it to (see :meth:`embed`).

        Returns:
            One list of :class:`SearchHit` per query; ``match`` is ``distance < threshold`` when the index is
            calibrated, else None.

        Raises:
            ValueError: ``top_k`` is not a positive integer; embeddings of another dimension than the index's;
                ``bboxes`` with embeddings or a dataset, or of another length than the paths.
            GalleryIndexError: see :meth:`embed`.
        """
        check_k(top_k)
        if isinstance(queries, Tensor):
            if bboxes is not None:
                raise ValueError("bboxes go with image paths, not with embeddings")
            embeddings = queries.detach().float().cpu()
        elif isinstance(queries, Dataset):
            embeddings = self.embed(queries, bboxes) if size_of(queries) else torch.zeros(0, 0)
        else:
            paths = [str(p) for p in ([queries] if isinstance(queries, str | Path) else queries)]
            if not paths:
                return []
            embeddings = self.embed(paths, bboxes)
        if len(embeddings) == 0:
            return []
        found = self._backend.search(embeddings, top_k)
        rows = self._rows_of_keys(found.ids)
        if self.calibration is None:
            matches = [[None] * top_k] * len(embeddings)
        else:
            matches = self.calibration.is_match(found.distances).tolist()
        found_rows = rows[rows >= 0].tolist()
        items = iter(self._items.rows(found_rows))  # the found items' columns, in the order of the hits
        return [
            [
                SearchHit(rank, *next(items), distance=distance, match=match)
                for rank, (position, distance, match) in enumerate(zip(*row), start=1)
                if position >= 0
            ]
            for row in zip(rows.tolist(), found.distances.tolist(), matches)
        ]

    def _rows_of_keys(self, keys: Tensor) -> Tensor:
        """The rows of the items of backend ``keys`` (``-1`` stays ``-1``): the keys themselves unless items
        were removed or replaced (the keys increase with the rows)."""
        if self._next_key == len(self):
            return keys
        return torch.where(
            keys >= 0, torch.searchsorted(self._items.keys, keys.clamp(min=0).contiguous()), keys
        )

    # ------------------------------------------------------------------------------------ calibration
    def calibrate(
        self,
        embeddings: Tensor,
        labels: Sequence[Any],
        is_query: Sequence[bool] | np.ndarray | None = None,
        is_gallery: Sequence[bool] | np.ndarray | None = None,
        sequences: Sequence[Any] | None = None,
        *,
        target: str = "precision",
        value: float | None = None,
        top_n: int = 5,
    ) -> Calibration:
        """Calibrate the match threshold on a labelled validation split and keep it (:attr:`calibration`).

        The queries are searched among the split's gallery items through a new, empty index of this index's
        knn backend, as oml's retrieval does (:func:`~oml_core.knn.backend_search.search_with_index`): a
        query never retrieves itself nor an item of its sequence, and neither is its ground truth. The
        threshold is then chosen by :func:`~oml_core.index.calibration.calibrate_rr` (formulas and targets:
        :mod:`oml_core.index.calibration`).

        Args:
            embeddings: ``[n, dim]`` embeddings of the split's items.
            labels: Their labels.
            is_query: Which items are queries (None: all).
            is_gallery: Which items are gallery items (None: all; "1 vs rest" when both are None).
            sequences: Their sequence ids (None: no sequences).
            target: ``precision``, ``f1`` or ``fmr``.
            value: The target's value (None: the target's default, a precision of 0.9, an FMR of 0.01).
            top_n: Items retrieved per query; the FMR counts the irrelevant ones among them.

        Raises:
            ValueError: inputs of other lengths; see :func:`~oml_core.index.calibration.calibrate_threshold`.
            CalibrationError: no query or no gallery item; the target cannot be reached.
        """
        embeddings = torch.as_tensor(embeddings).detach().float().cpu()
        n = len(embeddings)
        queries, gallery = _flags(is_query, n, "is_query"), _flags(is_gallery, n, "is_gallery")
        if len(labels) != n or (sequences is not None and len(sequences) != n):
            raise ValueError(f"labels and sequences must have one entry per embedding ({n})")
        if not queries.any() or not gallery.any():
            raise CalibrationError(
                f"cannot calibrate: the split has {int(queries.sum())} queries and {int(gallery.sum())} gallery items"
            )
        found = search_with_index(
            make_knn_index(self._backend_spec, self.distance, self.registry),
            embeddings,
            torch.nonzero(queries).reshape(-1),
            torch.nonzero(gallery).reshape(-1),
            top_n,
            labels_gt=factorize(np.asarray(labels)),
            sequence_ids=None if sequences is None else factorize(np.asarray(sequences)),
        )
        rr = RetrievalResults(found.distances, found.retrieved_ids, found.gt_ids, n_gallery=found.n_gallery)
        change = Recalibration(
            calibrate_rr(rr, target=target, value=value), {"target": target, "value": value, "top_n": top_n}
        )
        self._apply(change)
        self._record(change)
        return change.calibration

    # ---------------------------------------------------------------------------------- save and load
    def save(self, folder: str | Path) -> Path:
        """Write the index into the new folder ``folder`` (see :mod:`oml_core.index.storage` for its files and
        :mod:`oml_core.index.generations` for its layout: generation 1): its config, items, embeddings, the knn
        backend's own save, and the calibration with its curve as a PNG. The index stays bound to the folder it
        was loaded from, if any (:meth:`commit` writes there).

        The index is self-contained (:mod:`oml_core.index.integrity`): an extractor spec's weights are copied
        (the state dict of the extractor as it is, ``weights.pt``, with its sha256 in ``index.json``), and with
        any extractor a probe and its embedding are kept (the dataset component's probe query, e.g. the picture
        ``probe.png``; for a component without one, the input of the first gallery item), as is the model JSON
        of what defines the embeddings. A loaded index is checked against its probe before it is saved again
        (and keeps it). ``index.json`` holds the manifest of the files (:mod:`oml_core.index.manifest`).

        Everything is written into a temporary folder beside it, which is renamed to ``folder`` when complete:
        ``folder`` appears whole or not at all.

        Raises:
            FileExistsError: ``folder`` exists and is not an empty folder (it is never written over).
            GalleryIndexError: see :attr:`extractor` and :meth:`embed` (the extractor of a spec is built here).
        """
        from oml_core import __version__

        folder = Path(folder)
        has_extractor = self._has_extractor
        if has_extractor:
            self._check_probe()
        with new_folder(folder) as temporary:
            weights_sha256 = None
            if self._extractor_spec is not None:
                weights_sha256 = write_weights(temporary / WEIGHTS_FILE, self.extractor.state_dict())
            probe = (
                self._probe if self._probe is not None or not has_extractor else self._new_probe(temporary)
            )
            if probe is not None and isinstance(probe.item, Path) and probe.item.parent != temporary:
                shutil.copyfile(probe.item, temporary / probe.item.name)  # a loaded index's, kept as it was
            model = model_json(
                self._extractor_spec, self._transforms_spec, self.distance, weights_sha256, self._dataset_spec
            )
            stored = StoredEmbeddings(torch.zeros(0), model)
            if probe is not None:
                if isinstance(probe.item, Path):
                    stored = StoredEmbeddings(
                        stored.embeddings, model, probe.embedding, probe_query=probe.item.name
                    )
                else:
                    stored = StoredEmbeddings(
                        stored.embeddings, model, probe.embedding, probe_input=probe.item
                    )
            data = generation_folder(temporary, 1)
            data.mkdir()
            uid = self._write_generation(data, 1, stored)
            write_json(
                temporary / INDEX_FILE,
                {
                    "format": INDEX_FORMAT,
                    "version": INDEX_VERSION,
                    "oml_core": __version__,
                    "config": self.config,
                    "weights_sha256": weights_sha256,
                    "generation": 1,
                    MANIFEST_KEY: self._manifest(temporary, 1, stored, uid).to_dict(),
                },
            )
        return folder

    def _write_generation(
        self, data: Path, generation: int, stored: StoredEmbeddings, plot: Path | None = None
    ) -> str:
        """Write the items, embeddings (with what ``stored`` holds beside them), backend and calibration of
        the index as ``generation`` into the new folder ``data``, each file fsync-ed, then the folder. ``plot``:
        the calibration's curve as a previous generation drew it, linked rather than drawn again (a copy where
        the file system has no hard links; drawn when it does not exist).

        Returns:
            The uid of the generation's data (:func:`~oml_core.index.manifest.content_uid`), which its items and
            embeddings files carry.
        """
        from oml_core.index.plot import plot_calibration

        parts = self._vectors.parts  # written part by part: a mapped base is not copied
        uid = content_uid(self._items, parts)
        self._items.write(data / ITEMS_TABLE_FILE, uid, INDEX_VERSION)
        write_embeddings(data / EMBEDDINGS_FILE, replace(stored, embeddings=parts, uid=uid))
        self._backend.save(data / BACKEND_FOLDER)
        if self.calibration is not None:
            write_json(data / CALIBRATION_FILE, self.calibration.to_dict())
            if plot is not None and plot.is_file():
                _link_or_copy(plot, data / CALIBRATION_PLOT)
            else:
                plot_calibration(self.calibration, data / CALIBRATION_PLOT)
        info = generation_info(
            generation, len(self), self._vectors.width or 0, self.calibration_stale, self._calibration_args
        )
        write_json(data / GENERATION_FILE, info)
        fsync_directory(data)
        return uid

    @staticmethod
    def _manifest(folder: Path, generation: int, stored: StoredEmbeddings, uid: str) -> Manifest:
        """The manifest of the index ``folder`` whose base is ``generation`` (written with ``uid``): its files and
        the probe query that ``stored`` names."""
        probe = [stored.probe_query] if stored.probe is not None and stored.probe_query is not None else []
        return manifest_of(folder, [*probe, *generation_names(generation)], uid)

    def _stored_template(self) -> StoredEmbeddings:
        """What a loaded index's ``embeddings.pt`` holds beside its embeddings (model JSON, probe)."""
        if self._stored is None:
            raise GalleryIndexError(f"{self._where()}: the index was not loaded from a folder")
        return self._stored

    def _new_probe(self, folder: Path) -> Probe | None:
        """The probe of a new index with an extractor: the dataset component's probe query, written into
        ``folder``, or else the input of its first gallery item; None (with a warning) when it has neither."""
        data = self.data
        try:
            name = data.probe_query(folder)
        except NotImplementedError:
            first = self._first_input
            if first is None or not is_item_input(first):
                warnings.warn(
                    f"the dataset component {type(data).__name__} writes no probe query and the index has no "
                    f"gallery item whose input is tensors: the index keeps no probe, so a replaced model is caught "
                    f"only by the digest of its weights",
                    stacklevel=3,
                )
                return None
            embedding = self._infer(OneInput(first))[0]
            return Probe(embedding, first, f"{folder / EMBEDDINGS_FILE} {INPUT_PROBE}")
        if Path(name).name != name or name in OWN_FILES or not (folder / name).is_file():
            raise GalleryIndexError(
                f"the dataset component {type(data).__name__} wrote no probe query {name!r} of its own into the "
                f"index's folder (a file name other than the index's files)"
            )
        query = folder / name
        return Probe(self._infer(self._probe_query(query))[0], query, str(query))

    @classmethod
    def load(
        cls,
        folder: str | Path,
        *,
        registry: Registry | None = None,
        extractor: nn.Module | None = None,
        transforms: Callable[[Any], Any] | None = None,
        device: str | torch.device | None = None,
    ) -> GalleryIndex:
        """The index saved by :meth:`save` in ``folder`` (its current generation, see
        :mod:`oml_core.index.generations`; a folder of version 2 is read as generation 0), its queries embedded
        on ``device`` (see :class:`GalleryIndex`; None: where the extractor is, the CPU for the saved one). Its
        extractor, transforms and dataset component are built from the saved config when first needed, with the
        weights saved in the folder (or the objects given here are used instead); the knn backend's state is
        read by the ``load`` of the backend registered under the saved name. The folder may have moved: nothing
        outside it is read but the queries to search (and what a dataset component of a plugin reads when it is
        built). An index saved before the dataset component was recorded is an index of images. The index is
        bound to ``folder``: :meth:`commit` writes its changes there, :meth:`refresh` reads those of others.

        A load that fails because another process committed twice meanwhile (its generation removed) is made
        again on the new generation.

        Checked: at load, the files against the manifest of ``index.json`` (:mod:`oml_core.index.manifest`: a file
        or a set of files of another index is named in one line), then (:mod:`oml_core.index.integrity`) the model
        JSON of ``index.json``'s config against
        the one its embeddings were built with (an edited extractor, transforms, distance or dataset component is
        refused, naming the key); when the extractor is built, the sha256 of ``weights.pt``; before the first
        query is embedded, the embedding of the probe by the extractor and transforms in use.

        Raises:
            GalleryIndexError: ``folder`` is not a folder, or a file of it is missing, foreign, corrupt or
                inconsistent with the others (the message names the file); an index of an older version
                (rebuild it).
            RegistryError: the saved knn backend is not registered (e.g. its plugin is not installed).
        """
        folder = Path(folder)

        def read(layout: Layout) -> GalleryIndex:
            return cls._of_layout(folder, layout, registry, extractor, transforms, device)

        return _read_current(folder, read)[1]

    @classmethod
    def _of_layout(
        cls,
        folder: Path,
        layout: Layout,
        registry: Registry | None,
        extractor: nn.Module | None,
        transforms: Callable[[Any], Any] | None,
        device: str | torch.device | None,
    ) -> GalleryIndex:
        """The index of ``folder`` whose ``index.json`` and current generation are ``layout``."""
        meta, meta_path = layout.meta, layout.meta_path
        weights_sha256 = meta.get("weights_sha256")
        if weights_sha256 is not None and not _is_sha256(weights_sha256):
            raise GalleryIndexError(f"{meta_path}: weights_sha256 must be null or a sha256 hex digest")
        try:
            config = meta["config"]
            index = cls(
                extractor=extractor if extractor is not None else config["extractor"],
                transforms=transforms if transforms is not None else config["transforms"],
                knn_backend=config["knn_backend"],
                distance=config["distance"],
                dataset=config.get("dataset"),  # absent in an index written before it was recorded: images
                data=config.get("data"),
                registry=registry,
                seed=config["seed"],
                batch_size=config["batch_size"],
                num_workers=config["num_workers"],
                device=device,
            )
        except RegistryError:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise GalleryIndexError(
                f"{meta_path}: not a valid gallery index config ({type(e).__name__}: {e})"
            ) from e
        state = index._read_generation(layout)
        index._set_generation(layout, state)
        index._folder = folder
        stored = state.stored
        index._stored = replace(stored, embeddings=torch.zeros(0))
        if weights_sha256 is not None:
            index._weights = (_existing(folder / WEIGHTS_FILE, "the index's weights"), weights_sha256)
        if stored.probe is not None and stored.probe_query is not None:
            query = _existing(folder / stored.probe_query, "the index's probe query")
            index._probe = Probe(stored.probe, query, str(query))
        elif stored.probe is not None and stored.probe_input is not None:
            index._probe = Probe(
                stored.probe, stored.probe_input, f"{layout.data / EMBEDDINGS_FILE} {INPUT_PROBE}"
            )
        return index

    def _read_generation(self, layout: Layout) -> _Generation:
        """The items, embeddings, backend and calibration of the base generation of ``layout``, checked against
        each other and against the model JSON of ``index.json``, and the changes of the segments of its log.

        Raises:
            GalleryIndexError: a file missing, foreign, corrupt or inconsistent (named).
        """
        data, n_items, meta, manifest = layout.data, layout.n_items, layout.meta, layout.manifest
        if manifest is not None:
            check_files(layout.meta_path.parent, manifest, generation_names(layout.base), layout.meta_path)
        if layout.version > WHOLE_FILES_VERSION:
            items_path = data / ITEMS_TABLE_FILE
            items, uid = ItemTable.read(items_path, n_items)
        else:
            items_path = data / ITEMS_FILE
            items, uid = _read_items(items_path, n_items, with_keys=layout.generation > 0)
        stored = read_embeddings(data / EMBEDDINGS_FILE, n_items, layout.dim)
        if manifest is not None:
            check_uid(manifest, {items_path: uid, data / EMBEDDINGS_FILE: stored.uid}, layout.meta_path)
        try:
            config = meta["config"]
            saved_model = model_json(
                config["extractor"],
                config["transforms"],
                config["distance"],
                meta.get("weights_sha256"),
                config.get("dataset"),
            )
        except (KeyError, TypeError) as e:
            raise GalleryIndexError(f"{layout.meta_path}: not a valid gallery index config ({e!r})") from e
        check_model(stored.model, saved_model, layout.meta_path, data / EMBEDDINGS_FILE)
        backend = _load_backend(data / BACKEND_FOLDER, self, n_items)
        calibration = None
        calibration_path = data / CALIBRATION_FILE
        if calibration_path.exists():
            try:
                calibration = Calibration.from_dict(read_json(calibration_path))
            except (KeyError, TypeError, ValueError) as e:
                raise GalleryIndexError(
                    f"{calibration_path}: not a valid calibration ({type(e).__name__}: {e})"
                ) from e
        log = _read_log(layout, after=layout.base)
        return _Generation(items, stored, backend, calibration, log)

    def _set_generation(self, layout: Layout, state: _Generation) -> None:
        """Hold the generation ``state`` of ``layout`` (what :meth:`_read_generation` read): its base, then
        the changes of its segments.

        Raises:
            GalleryIndexError: changes of its log that cannot be made (naming the folder of the log).
        """
        embeddings = cast(Tensor, state.stored.embeddings)
        self._vectors = AppendedRows(torch.zeros(0, 0))
        if embeddings.shape[1]:
            self._vectors.append(embeddings)
        self._items = state.items
        self._next_key = int(state.items.keys[-1]) + 1 if len(state.items) else 0
        self._row_of = None
        self._backend = state.backend
        self.calibration = state.calibration
        self.calibration_stale, self._calibration_args = layout.calibration_stale, layout.calibration_args
        self._generation, self._meta = layout.base, layout.meta
        self._base, self._base_items, self._segments = layout.base, layout.n_items, ()
        self._replay(layout, state.log)


@dataclass(frozen=True)
class _Generation:
    """What a generation's files hold (:meth:`GalleryIndex._read_generation`): its base's items, embeddings,
    backend and calibration, and the changes of the segments of its log, in order."""

    items: ItemTable
    stored: StoredEmbeddings
    backend: IKnnIndex
    calibration: Calibration | None
    log: list[LoggedChange]


T = TypeVar("T")


def _read_current(folder: Path, read: Callable[[Layout], T], attempts: int = 3) -> tuple[Layout, T]:
    """The layout of the index ``folder`` and what ``read`` makes of it; when ``read`` fails because a writer
    made a new generation meanwhile (and removed the one read), made again on the new one, ``attempts`` times
    at most."""
    layout = read_layout(folder)
    try:
        return layout, read(layout)
    except GalleryIndexError:
        if attempts <= 1 or current_generation(folder) == layout.generation:
            raise
    return _read_current(folder, read, attempts - 1)


def _read_log(layout: Layout, after: int) -> list[LoggedChange]:
    """The changes, in order, of the segments of ``layout``'s log that make the generations after ``after``, every
    segment read whole (and checked against its sha256) before any change is made.

    Raises:
        GalleryIndexError: a segment missing, changed or not valid (named).
    """
    return [
        change
        for segment in layout.segments
        if segment.generation > after
        for change in read_segment(
            segment_path(layout.data, segment.generation), segment.sha256, segment.generation, layout.dim
        )
    ]


def _read_items(path: Path, n_items: int, with_keys: bool) -> tuple[ItemTable, Any]:
    """The items (ids, paths, labels, backend keys; version 2: the positions as keys) and uid (None when absent:
    written before the manifest) of the ``items.json`` of ``path`` (versions 2 to 4).

    Raises:
        GalleryIndexError: not ``n_items`` of each, ids or keys not integers; see :meth:`ItemTable.check`.
    """
    items = read_json(path)
    try:
        ids, paths, labels = items["ids"], items["paths"], items["labels"]
        keys = items["keys"] if with_keys else list(range(n_items))
        if not all(isinstance(x, list) and len(x) == n_items for x in (ids, paths, labels, keys)):
            raise ValueError(f"ids, paths, labels and keys must be lists of the index's {n_items} items")
        if not all(_is_int(v) for v in (*ids, *keys)):
            raise ValueError("ids and keys must be integers")
        table = ItemTable.of(ids, paths, _labels(labels, n_items), torch.tensor(keys, dtype=torch.long))
    except (KeyError, TypeError, ValueError) as e:
        raise GalleryIndexError(f"{path}: not valid gallery items ({type(e).__name__}: {e})") from e
    table.check(path)
    return table, items.get(UID_KEY)


# ------------------------------------------------------------------------------------------------ helpers
def check_calibration_args(calibration: Mapping[str, Any]) -> None:
    """Check the keyword arguments of :meth:`GalleryIndex.calibrate` given as ``calibration`` (``target``,
    ``value``, ``top_n``), so that a bad one fails before any item is embedded.

    Raises:
        ValueError: another key, an unknown target, a value out of its range, a ``top_n`` that is not a
            positive integer.
    """
    unknown = set(calibration) - CALIBRATE_ARGS
    if unknown:
        raise ValueError(f"the arguments are {sorted(CALIBRATE_ARGS)}, got also {sorted(unknown)}")
    check_target(calibration.get("target", "precision"), calibration.get("value"))
    top_n = calibration.get("top_n", 1)
    if not _is_int(top_n) or top_n < 1:
        raise ValueError(f"top_n must be a positive integer, got {top_n!r}")


def _data_keys(data: Mapping[str, Any] | None) -> dict[str, Any]:
    """``data`` as a plain dict, checked to hold data keys and JSON values only (it is saved with the index)."""
    keys = dict(to_plain(data) or {})
    unknown = sorted(set(keys) - DATA_KEYS)
    if unknown:
        raise ValueError(f"data takes the data keys {sorted(DATA_KEYS)}, got also {unknown}")
    try:
        json.dumps(keys, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"data must hold JSON values only (it is saved with the index): {e}") from e
    return keys


def item_names(data: IDatasetComponent, dataset: IBaseDataset) -> list[str | None]:
    """The names of ``dataset``'s items by ``data`` (None each when it names none), one per item.

    Raises:
        GalleryIndexError: the component names another number of items.
    """
    try:
        names: list[str | None] = list(data.item_names(dataset))
    except NotImplementedError:
        return [None] * size_of(dataset)
    if len(names) != size_of(dataset):
        raise GalleryIndexError(
            f"the dataset component {type(data).__name__} names {len(names)} of its {size_of(dataset)} items"
        )
    return names


def item_ids(data: IDatasetComponent, dataset: IBaseDataset) -> list[int] | None:
    """The ids of ``dataset``'s items by ``data``, or None when it gives none.

    Raises:
        GalleryIndexError: the component gives another number of ids, or ids twice.
    """
    try:
        ids = [int(i) for i in data.item_ids(dataset)]
    except NotImplementedError:
        return None
    if len(ids) != size_of(dataset) or len(set(ids)) != len(ids):
        raise GalleryIndexError(
            f"the dataset component {type(data).__name__} gives {len(ids)} ids ({len(set(ids))} distinct) to "
            f"{size_of(dataset)} items"
        )
    return ids


def _spec_or_object(value: Any, kind: str) -> tuple[dict[str, Any] | None, Any]:
    """``(spec, None)`` for a name or a ``{name, args}`` mapping (a plain copy, checked to be JSON values),
    else ``(None, value)``."""
    value = to_plain(value)
    if isinstance(value, str):
        return {"name": value, "args": {}}, None
    if not isinstance(value, Mapping):
        return None, value
    if not isinstance(value.get("name"), str) or not set(value) <= {"name", "args"}:
        raise ValueError(
            f"the {kind} spec must be a mapping {{name: ..., args: {{...}}}}, got {dict(value)!r}"
        )
    spec = {"name": value["name"], "args": dict(value.get("args") or {})}
    try:
        json.dumps(spec, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"the {kind} spec must hold JSON values only (it is saved with the index): {e}"
        ) from e
    return spec, None


def _with_absolute_weights(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with a relative ``args.weights`` made absolute when it names an existing file."""
    weights = spec["args"].get("weights")
    if isinstance(weights, str) and Path(weights).is_file() and not Path(weights).is_absolute():
        return {**spec, "args": {**spec["args"], "weights": str(Path(weights).absolute())}}
    return spec


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _link_or_copy(source: Path, target: Path) -> None:
    """``target`` as a hard link to the file ``source`` (which no one changes), or a copy of it."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _existing(path: Path, what: str) -> Path:
    """``path``, checked to be a file."""
    if not path.is_file():
        raise GalleryIndexError(f"{path}: no such file ({what}); the index folder is incomplete")
    return path


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _labels(values: Sequence[Any], n: int) -> list[int | None]:
    """``n`` labels as ints, None (or NaN) for unknown ones."""
    values = list(values)
    if len(values) != n:
        raise ValueError(f"labels must have one entry per item ({n}), got {len(values)}")
    labels: list[int | None] = []
    for value in values:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            labels.append(None)
        elif _is_int(value) or (isinstance(value, float | np.floating) and float(value).is_integer()):
            labels.append(int(value))
        else:
            raise ValueError(f"labels must be integers (or None), got {value!r}")
    return labels


def _flags(values: Sequence[bool] | np.ndarray | None, n: int, name: str) -> Tensor:
    if values is None:
        return torch.ones(n, dtype=torch.bool)
    flags = torch.as_tensor(np.asarray(values, dtype=bool)).reshape(-1)
    if len(flags) != n:
        raise ValueError(f"{name} must have one entry per embedding ({n}), got {len(flags)}")
    return flags


def _load_backend(folder: Path, index: GalleryIndex, n_items: int) -> IKnnIndex:
    """The backend state saved in ``folder``, read by the ``load`` of the class the registry builds under the
    saved name (the factory itself when it is an ``IKnnIndex`` class, else the class of what it builds)."""
    spec = index.config["knn_backend"]
    factory = index.registry.get("knn_backend", spec["name"]).load()
    backend_class = (
        factory
        if inspect.isclass(factory) and issubclass(factory, IKnnIndex)
        else type(index.registry.build("knn_backend", spec))
    )
    try:
        backend = backend_class.load(folder)
    except Exception as e:  # the backend's own error of a missing or corrupt state, whatever its type
        raise GalleryIndexError(
            f"{folder}: the knn backend {spec['name']!r} cannot load it ({type(e).__name__}: {e})"
        ) from e
    if not isinstance(backend, IKnnIndex) or len(backend) != n_items or backend.distance != index.distance:
        raise GalleryIndexError(
            f"{folder}: the knn backend {spec['name']!r} holds {len(backend)} items by {backend.distance!r} "
            f"distance; the index has {n_items} by {index.distance!r}"
        )
    return backend


__all__ = [
    "CALIBRATE_ARGS",
    "GALLERY_ROWS",
    "LOCK_TIMEOUT",
    "GalleryIndex",
    "GalleryItem",
    "SearchHit",
    "check_calibration_args",
    "item_ids",
    "item_names",
]
