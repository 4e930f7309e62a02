"""``images``, the default dataset component of every pipeline and gallery index: images listed in a dataframe in
OML's format (or, for prediction and a gallery, the images of a folder), read with their boxes, transformed, and
checked before any model runs; the image queries of ``oml search`` and the probe picture of a gallery index.

It is registered by the core's own plugin (:mod:`oml_core.builtins.plugin`) through ``oml_register_datasets``, as
any modality's plugin registers its component, and takes OML's flat data keys (``dataset_root``,
``dataframe_name``, ``transforms_train``, ``transforms_val``, ``cache_size`` ...), which the pipelines offer it, so
that OML's yaml files run as written.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from oml_core.const import IS_GALLERY_COLUMN, PATHS_COLUMN, TBBox
from oml_core.datasets.dataframe_format import (
    DEFAULT_ENCODING,
    DataFrameFormatError,
    check_retrieval_dataframe_format,
    dataframe_warnings,
    parse_bboxes,
    parse_flags,
    read_csv_with_column,
    read_dataframe,
)
from oml_core.datasets.image_checks import check_images as check_readable_images
from oml_core.datasets.image_queries import (
    PROBE_FILE,
    check_image_files,
    collect_image_queries,
    write_probe_image,
)
from oml_core.datasets.images import ImageBaseDataset, ImageLabeledDataset, ImageQueryGalleryLabeledDataset
from oml_core.interfaces.datasets import IBaseDataset, IDatasetComponent
from oml_core.registry import ConfigError
from oml_core.utils.images import IMAGE_SUFFIXES, find_images
from oml_core.utils.logs import get_logger

log = get_logger(__name__)


#: A labelled image dataset class of a split (:meth:`ImageData._split`).
D = TypeVar("D", ImageLabeledDataset, ImageQueryGalleryLabeledDataset)


def resolve_dataset_root(dataset_root: str | os.PathLike[str] | None) -> Path:
    """The config key ``dataset_root`` as an absolute folder, or the built-in mock dataset (generated on first
    use) when it is null.

    Raises:
        ConfigError: ``dataset_root`` is not a directory.
    """
    if dataset_root is None:
        from oml_core.datasets.mock import get_mock_dataset_root

        return get_mock_dataset_root()
    path = Path(dataset_root).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(f"dataset_root {str(path)!r} is not a directory")
    return path


#: The :attr:`ImageData.dataframe_name` of a dataframe held in memory (:meth:`ImageData.of_dataframe`).
IN_MEMORY_DATAFRAME = "<dataframe>"


def check_train_and_validation_rows(dataframe_path: Path, n_train: int, n_validation: int) -> None:
    """Raise a ``ConfigError`` naming ``dataframe_path`` when a training pipeline's dataframe has no
    ``split == "train"`` rows (``n_train``) or no ``split == "validation"`` rows (``n_validation``)."""
    if n_train == 0 or n_validation == 0:
        raise ConfigError(
            f"{dataframe_path}: needs rows with split=train and split=validation "
            f"(found {n_train} and {n_validation})"
        )


class ImageData(IDatasetComponent):
    """Images and their labels as OML lays them out: ``dataset_root / dataframe_name``, a CSV with the columns
    ``label, path, split, is_query, is_gallery`` (``category``, ``sequence`` and the boxes ``x_1, x_2, y_1, y_2``
    when present; see :func:`~oml_core.datasets.dataframe_format.check_retrieval_dataframe_format`).

    - Training: the ``split == "train"`` rows as an :class:`ImageLabeledDataset` with ``transforms_train``;
      validation: the ``split == "validation"`` rows as an :class:`ImageQueryGalleryLabeledDataset` with
      ``transforms_val``. Both have ``cache_size`` decoded images in an LRU cache.
    - Prediction: the images of the folder ``data_dir`` (``.jpg, .jpeg, .png``, any case, searched recursively,
      sorted by path); or of ``dataframe_name``'s ``path`` column (with its boxes), every row in its order; with
      neither, the images of the built-in mock dataset. Items are named by their absolute paths.
    - A gallery index (:meth:`gallery_dataset`): every row of the dataframe (or only its ``is_gallery`` rows) as an
      :class:`ImageLabeledDataset` with ``transforms_predict``, its items' ids their rows; or the images of
      ``data_dir``, without labels. Its queries (:meth:`query_dataset`): image files, folders of images, CSVs of
      queries with boxes; its probe (:meth:`probe_query`): a fixed picture.
    - Checks (:meth:`check`): every image opens and its box lies in it (``check_images``), named by CSV row; with
      ``show_dataset_warnings``, the dataframe's doubtful rows (a label with several categories, repeated images,
      labels in both splits) as warnings.

    Data without labels (a folder of images) or without validation rows gives no training or validation dataset
    (``NotImplementedError``, which says why).

    Args:
        dataset_root: The folder of the dataframe and the images; null: the built-in mock dataset (generated when
            first needed).
        dataframe_name: The CSV, relative to ``dataset_root``; or Parquet (a ``*.parquet`` file or a folder of
            them, rows in the order of their names) of the same columns.
        dataframe_encoding: The CSV's text encoding.
        transforms_train: The transform of training images (a built transform: a callable).
        transforms_val: The transform of validation images.
        transforms_predict: The transform of the images to predict, of a gallery and of queries.
        cache_size: Decoded images kept per dataset (0: none).
        data_dir: A folder of images to predict or to make a gallery of (no labels).
        check_images: Read every image before any model runs (false skips it).
        show_dataset_warnings: Warn about the dataframe's doubtful rows.
        pipeline: Names the pipeline in the messages of the checks.

    Raises:
        ConfigError: ``data_dir`` and ``dataframe_name`` both given, or ``dataset_root`` without
            ``dataframe_name`` for prediction. A ``dataset_root`` that is not a folder is refused when the data is
            first read (a gallery index's queries never read it).
    """

    def __init__(
        self,
        dataset_root: str | Path | None = None,
        dataframe_name: str | None = None,
        dataframe_encoding: str = DEFAULT_ENCODING,
        transforms_train: Callable[[Any], Any] | None = None,
        transforms_val: Callable[[Any], Any] | None = None,
        transforms_predict: Callable[[Any], Any] | None = None,
        cache_size: int = 0,
        data_dir: str | Path | None = None,
        check_images: bool = True,
        show_dataset_warnings: bool = False,
        pipeline: str = "images",
    ) -> None:
        self._given_root = dataset_root
        self._root: Path | None = None  # resolved on first use
        self._frame: pd.DataFrame | None = None  # read on first use
        self.dataframe_name = dataframe_name
        self.dataframe_encoding = dataframe_encoding
        self.transforms_train = transforms_train
        self.transforms_val = transforms_val
        self.transforms_predict = transforms_predict
        self.cache_size = cache_size
        self.check_images = check_images
        self.show_dataset_warnings = show_dataset_warnings
        self.pipeline = pipeline
        if data_dir is not None and dataframe_name is not None:
            raise ConfigError(
                f"{pipeline}: give either data_dir (a folder of images) or dataframe_name (a csv or Parquet "
                f"under dataset_root), not both"
            )
        if dataset_root is not None and dataframe_name is None and data_dir is None:
            raise ConfigError(
                f"{pipeline}: dataset_root is set but dataframe_name is null: set dataframe_name to predict the "
                f"images of a csv, or data_dir to predict the images of a folder"
            )
        self.data_dir = None if data_dir is None else Path(data_dir).expanduser().resolve()
        #: The dataframe row of each item of the datasets built from the dataframe.
        self._rows: weakref.WeakKeyDictionary[IBaseDataset, np.ndarray] = weakref.WeakKeyDictionary()

    @classmethod
    def of_dataframe(
        cls,
        df: pd.DataFrame,
        dataset_root: str | Path | None = None,
        transforms: Callable[[Any], Any] | None = None,
    ) -> ImageData:
        """The images of a dataframe in OML's format held in memory (checked first), whose ``path`` column is
        relative to ``dataset_root`` (made absolute; None: the paths as they are), read with ``transforms``
        everywhere (gallery, validation and queries). Its :attr:`source` is ``<dataset_root>/<dataframe>``.

        Raises:
            DataFrameFormatError: ``df`` is not in OML's format (naming the column and rows).
        """
        check_retrieval_dataframe_format(df, dataset_root=dataset_root, verbose=False)
        data = cls(
            dataframe_name=IN_MEMORY_DATAFRAME, transforms_val=transforms, transforms_predict=transforms
        )
        data._root = Path("") if dataset_root is None else Path(dataset_root).absolute()
        data._frame = df.reset_index(drop=True)
        return data

    @property
    def dataset_root(self) -> Path:
        """The folder of the dataframe and the images, absolute (null: the mock dataset, generated on first use).

        Raises:
            ConfigError: ``dataset_root`` is not a folder.
        """
        if self._root is None:
            self._root = resolve_dataset_root(self._given_root)
        return self._root

    @property
    def source(self) -> Path:
        """``dataset_root / dataframe_name`` (prediction from a folder: ``data_dir``)."""
        if self.dataframe_name is None:
            return self.data_dir if self.data_dir is not None else self.dataset_root / "images"
        return self.dataset_root / self.dataframe_name

    @property
    def dataframe(self) -> pd.DataFrame:
        """The dataframe, read once and checked (:func:`~oml_core.datasets.dataframe_format.read_dataframe`)."""
        if self._frame is None:
            if self.dataframe_name is None:
                raise ConfigError(f"{self.pipeline}: dataframe_name is null: the dataset needs a dataframe")
            self._frame = read_dataframe(self.dataset_root, self.dataframe_name, self.dataframe_encoding)
        return self._frame

    def train_dataset(self) -> ImageLabeledDataset:
        """The ``split == "train"`` rows.

        Raises:
            NotImplementedError: the images of a folder (no labels).
            ConfigError: the dataframe has no train or no validation rows (a training run needs both).
        """
        self._check_labelled()
        df = self.dataframe
        train, validation = (np.flatnonzero(df["split"] == split) for split in ("train", "validation"))
        check_train_and_validation_rows(self.source, len(train), len(validation))
        return self._split(ImageLabeledDataset, train, self.transforms_train)

    def validation_dataset(self) -> ImageQueryGalleryLabeledDataset:
        """The ``split == "validation"`` rows.

        Raises:
            NotImplementedError: the images of a folder (no labels), or a dataframe without validation rows.
        """
        self._check_labelled()
        df = self.dataframe
        rows = np.flatnonzero(df["split"] == "validation")
        if len(rows) == 0:
            raise NotImplementedError(f"{self.source} has no split=validation rows")
        return self._split(ImageQueryGalleryLabeledDataset, rows, self.transforms_val)

    def _split(self, dataset_class: type[D], rows: np.ndarray, transform: Callable[[Any], Any] | None) -> D:
        """The dataframe's ``rows`` as a ``dataset_class`` with ``transform``, its rows remembered for the check."""
        dataset = dataset_class(
            self.dataframe.iloc[rows].reset_index(drop=True),
            dataset_root=self.dataset_root,
            transform=transform,
            cache_size=self.cache_size,
        )
        self._rows[dataset] = rows
        return dataset

    def prediction_dataset(self) -> ImageBaseDataset:
        """The images of ``data_dir``, of the dataframe's rows, or of the mock dataset.

        Raises:
            ConfigError: no such folder or no images in it; a dataframe that cannot be read, lacks the ``path``
                column, has empty or repeated paths or bad boxes (naming the file, the column and the rows).
        """
        if self.dataframe_name is not None:
            paths, bboxes = self._prediction_rows()
            dataset = ImageBaseDataset(
                paths, dataset_root=self.dataset_root, bboxes=bboxes, transform=self.transforms_predict
            )
            self._rows[dataset] = np.arange(len(paths))
            return dataset
        return ImageBaseDataset(self._image_files(), transform=self.transforms_predict)

    def gallery_dataset(self, rows: str = "all") -> ImageBaseDataset:
        """Every row of the dataframe (``rows="all"``) or its rows whose ``is_gallery`` is true (``"gallery"``),
        with their labels; or, for ``data_dir`` (or no dataframe), the images of the folder, without labels.

        Raises:
            ConfigError: see :meth:`prediction_dataset` and :attr:`dataframe`.
        """
        if self.dataframe_name is None:
            return self.prediction_dataset()
        df = self.dataframe
        keep = np.arange(len(df)) if rows == "all" else np.flatnonzero(parse_flags(df[IS_GALLERY_COLUMN])[0])
        dataset = ImageLabeledDataset(
            df.iloc[keep].reset_index(drop=True),
            dataset_root=self.dataset_root,
            transform=self.transforms_predict,
            cache_size=self.cache_size,
        )
        self._rows[dataset] = keep
        return dataset

    def item_names(self, dataset: IBaseDataset) -> list[str]:
        """The images' paths (as the dataset reads them: absolute for the dataframe's rows)."""
        return [str(path) for path in self._image_dataset(dataset).paths]

    def item_ids(self, dataset: IBaseDataset) -> list[int]:
        """The dataframe row of each item; the position of each image of a folder or of queries."""
        images = self._image_dataset(dataset)
        rows = self._rows.get(images)
        return list(range(len(images))) if rows is None else [int(row) for row in rows]

    def query_dataset(self, queries: Sequence[str], root: Path | None = None) -> ImageBaseDataset:
        """The images of ``queries`` (image files, folders, CSVs of queries with boxes, see
        :func:`~oml_core.datasets.image_queries.collect_image_queries`), with ``transforms_predict``.

        Raises:
            ConfigError: a query that is no image file, a folder without images, a bad CSV of queries.
        """
        found = collect_image_queries(queries, root)
        return self.image_dataset(found.paths, found.bboxes)

    def image_dataset(
        self, paths: Sequence[str | Path], bboxes: Sequence[TBBox | None] | None = None
    ) -> ImageBaseDataset:
        """The image files ``paths`` as they are (cropped to ``bboxes``: one box or None per image), with
        ``transforms_predict``.

        Raises:
            ConfigError: a path that does not exist or is a folder (checked here, before any image is read).
            ValueError: ``bboxes`` of another length, or a box that is not ``(x1, y1, x2, y2)``.
        """
        names = [str(path) for path in paths]
        check_image_files(names)
        if bboxes is not None and len(bboxes) != len(names):
            raise ValueError(f"bboxes must have one entry per image ({len(names)}), got {len(bboxes)}")
        return ImageBaseDataset(names, bboxes=bboxes, transform=self.transforms_predict)

    def probe_query(self, folder: Path) -> str:
        """Write the probe picture (:func:`~oml_core.datasets.image_queries.write_probe_image`) into ``folder``."""
        write_probe_image(Path(folder) / PROBE_FILE)
        return PROBE_FILE

    def check(self, datasets: list[IBaseDataset], num_workers: int, progress_bar: bool | None) -> list[str]:
        """Read every image of ``datasets`` once (``num_workers`` threads) unless ``check_images`` is false, with
        their boxes (:func:`~oml_core.datasets.image_checks.check_images`; an image is named by its CSV row when it
        has one); logs how long it took. With ``show_dataset_warnings``, the dataframe's doubtful rows.

        Returns:
            The warnings: boxes crossing their images' edges, the dataframe's doubtful rows.

        Raises:
            ConfigError: unreadable images or boxes outside their images (counted, the first few named).
        """
        found = []
        if self.show_dataset_warnings and self.dataframe_name is not None:
            found += dataframe_warnings(self.dataframe, repr(str(self.source)))
        if not self.check_images:
            return found
        images = [self._image_dataset(dataset) for dataset in datasets]
        started = time.perf_counter()
        paths = [path for dataset in images for path in dataset.paths]
        bboxes = None
        if any(dataset.bboxes is not None for dataset in images):
            bboxes = [box for dataset in images for box in (dataset.bboxes or [None] * len(dataset))]
        rows = None
        if all(dataset in self._rows for dataset in images):
            rows = [int(row) for dataset in images for row in self._rows[dataset]]
        problems = check_readable_images(
            paths, images[0].f_imread, num_workers, self.pipeline, progress_bar, bboxes, rows
        )
        found += [f"{str(self.source)!r}: {message}" for message in problems]
        log.info(
            f"Checked {len(paths)} images in {time.perf_counter() - started:.1f} s (check_images=false skips it)"
        )
        return found

    def _check_labelled(self) -> None:
        """Raise ``NotImplementedError`` for the images of a folder, which have no labels."""
        if self.data_dir is not None:
            raise NotImplementedError("a folder of images has no labels")

    def _image_dataset(self, dataset: IBaseDataset) -> ImageBaseDataset:
        if not isinstance(dataset, ImageBaseDataset):
            raise TypeError(
                f"the images dataset component got a {type(dataset).__name__}, not one of its datasets"
            )
        return dataset

    def _image_files(self) -> list[Path]:
        """The image files under ``data_dir`` (recursively; null: the mock dataset's images), sorted by path."""
        if self.data_dir is None:
            from oml_core.datasets.mock import get_mock_dataset_root

            data_dir = get_mock_dataset_root() / "images"
        else:
            data_dir = self.data_dir
            if not data_dir.is_dir():
                raise ConfigError(f"{self.pipeline}: data_dir {str(data_dir)!r} is not a directory")
        files = find_images(data_dir)
        if not files:
            raise ConfigError(
                f"{self.pipeline}: no image files ({', '.join(IMAGE_SUFFIXES)}) under data_dir {str(data_dir)!r}"
            )
        return files

    def _prediction_rows(self) -> tuple[list[str], Sequence[TBBox | None] | None]:
        """The ``path`` column and the bounding boxes (or None) of every row of the dataframe (all its rows: a
        prediction dataframe needs no labels or splits)."""
        csv_path = self.source
        try:
            df = read_csv_with_column(csv_path, PATHS_COLUMN, self.dataframe_encoding)
        except DataFrameFormatError as e:
            raise ConfigError(str(e)) from e
        paths = df[PATHS_COLUMN].astype(str)
        duplicated = paths[paths.duplicated()].unique().tolist()
        if duplicated:
            raise ConfigError(
                f"{str(csv_path)!r}: column 'path' repeats {duplicated[:5]}; the predictions have one entry per "
                f"image path"
            )
        try:
            bboxes = parse_bboxes(df, owner=repr(str(csv_path)))
        except DataFrameFormatError as e:
            raise ConfigError(str(e)) from e
        return paths.tolist(), bboxes


__all__ = [
    "IN_MEMORY_DATAFRAME",
    "ImageData",
    "check_train_and_validation_rows",
    "resolve_dataset_root",
]
