"""``images``, the default dataset component of every pipeline: images listed in a dataframe in OML's format (or,
for prediction, the images of a folder), read with their boxes, transformed, and checked before any model runs.

It is registered by the core's own plugin (:mod:`oml_core.builtins.plugin`) through ``oml_register_datasets``, as
any modality's plugin registers its component, and takes OML's flat data keys (``dataset_root``,
``dataframe_name``, ``transforms_train``, ``transforms_val``, ``cache_size`` ...), which the pipelines offer it, so
that OML's yaml files run as written.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from oml_core.const import TBBox
from oml_core.datasets.dataframe_format import (
    DEFAULT_ENCODING,
    DataFrameFormatError,
    dataframe_warnings,
    parse_bboxes,
    read_csv_file,
    read_dataframe,
)
from oml_core.datasets.image_checks import check_images as check_image_files
from oml_core.datasets.images import ImageBaseDataset, ImageLabeledDataset, ImageQueryGalleryLabeledDataset
from oml_core.interfaces.datasets import IBaseDataset, IDatasetComponent
from oml_core.registry import ConfigError
from oml_core.utils.images import IMAGE_SUFFIXES, find_images
from oml_core.utils.logs import get_logger

log = get_logger(__name__)


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


def split_dataframe(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``split == "train"`` and ``split == "validation"`` rows of a checked dataframe, index reset."""
    df_train = df[df["split"] == "train"].reset_index(drop=True)
    df_val = df[df["split"] == "validation"].reset_index(drop=True)
    return df_train, df_val


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
    - Checks (:meth:`check`): every image opens and its box lies in it (``check_images``), named by CSV row; with
      ``show_dataset_warnings``, the dataframe's doubtful rows (a label with several categories, repeated images,
      labels in both splits) as warnings.

    Args:
        dataset_root: The folder of the dataframe and the images; null: the built-in mock dataset.
        dataframe_name: The CSV, relative to ``dataset_root``.
        dataframe_encoding: The CSV's text encoding.
        transforms_train: The transform of training images (a built transform: a callable).
        transforms_val: The transform of validation images.
        transforms_predict: The transform of the images to predict.
        cache_size: Decoded images kept per dataset (0: none).
        data_dir: A folder of images to predict (prediction only).
        check_images: Read every image before any model runs (false skips it).
        show_dataset_warnings: Warn about the dataframe's doubtful rows.
        pipeline: Names the pipeline in the messages of the checks.

    Raises:
        ConfigError: ``dataset_root`` is not a folder; ``data_dir`` and ``dataframe_name`` both given, or
            ``dataset_root`` without ``dataframe_name`` for prediction.
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
        self.dataset_root = resolve_dataset_root(dataset_root)
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
                f"{pipeline}: give either data_dir (a folder of images) or dataframe_name (a csv under "
                f"dataset_root), not both"
            )
        if dataset_root is not None and dataframe_name is None and data_dir is None:
            raise ConfigError(
                f"{pipeline}: dataset_root is set but dataframe_name is null: set dataframe_name to predict the "
                f"images of a csv, or data_dir to predict the images of a folder"
            )
        self.data_dir = None if data_dir is None else Path(data_dir).expanduser().resolve()
        self._rows: dict[int, np.ndarray] = {}  # id(dataset) -> the dataframe row of each of its items

    @property
    def source(self) -> Path:
        """``dataset_root / dataframe_name`` (prediction from a folder: ``data_dir``)."""
        if self.dataframe_name is None:
            return self.data_dir if self.data_dir is not None else self.dataset_root / "images"
        return self.dataset_root / self.dataframe_name

    @cached_property
    def dataframe(self) -> pd.DataFrame:
        """The dataframe, read once and checked (:func:`~oml_core.datasets.dataframe_format.read_dataframe`)."""
        if self.dataframe_name is None:
            raise ConfigError(f"{self.pipeline}: dataframe_name is null: the dataset needs a dataframe")
        return read_dataframe(self.dataset_root, self.dataframe_name, self.dataframe_encoding)

    def train_dataset(self) -> ImageLabeledDataset:
        """The ``split == "train"`` rows.

        Raises:
            ConfigError: the dataframe has no train or no validation rows (a training run needs both).
        """
        df = self.dataframe
        train, validation = (np.flatnonzero(df["split"] == split) for split in ("train", "validation"))
        check_train_and_validation_rows(self.source, len(train), len(validation))
        dataset = ImageLabeledDataset(
            split_dataframe(df)[0],
            dataset_root=self.dataset_root,
            transform=self.transforms_train,
            cache_size=self.cache_size,
        )
        self._rows[id(dataset)] = train
        return dataset

    def validation_dataset(self) -> ImageQueryGalleryLabeledDataset:
        """The ``split == "validation"`` rows.

        Raises:
            ConfigError: the dataframe has no validation rows.
        """
        df = self.dataframe
        rows = np.flatnonzero(df["split"] == "validation")
        if len(rows) == 0:
            raise ConfigError(f"{self.source}: has no rows with split=validation")
        dataset = ImageQueryGalleryLabeledDataset(
            split_dataframe(df)[1],
            dataset_root=self.dataset_root,
            transform=self.transforms_val,
            cache_size=self.cache_size,
        )
        self._rows[id(dataset)] = rows
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
            self._rows[id(dataset)] = np.arange(len(paths))
            return dataset
        return ImageBaseDataset(self._image_files(), transform=self.transforms_predict)

    def item_names(self, dataset: IBaseDataset) -> list[str]:
        """The images' absolute paths (as the dataset reads them)."""
        return [str(path) for path in self._image_dataset(dataset).paths]

    def check(self, datasets: list[IBaseDataset], num_workers: int, progress_bar: bool | None) -> list[str]:
        """Read every image of ``datasets`` once (``num_workers`` threads) unless ``check_images`` is false, with
        their boxes (:func:`~oml_core.datasets.image_checks.check_images`; an image is named by its CSV row when it
        has one); prints how long it took. With ``show_dataset_warnings``, the dataframe's doubtful rows.

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
        if all(id(dataset) in self._rows for dataset in images):
            rows = [int(row) for dataset in images for row in self._rows[id(dataset)]]
        problems = check_image_files(
            paths, images[0].f_imread, num_workers, self.pipeline, progress_bar, bboxes, rows
        )
        found += [f"{str(self.source)!r}: {message}" for message in problems]
        log.info(
            f"Checked {len(paths)} images in {time.perf_counter() - started:.1f} s (check_images=false skips it)"
        )
        return found

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
        if not csv_path.is_file():
            raise ConfigError(f"dataframe {str(csv_path)!r} (dataset_root + dataframe_name) does not exist")
        try:
            df = read_csv_file(csv_path, encoding=self.dataframe_encoding)
        except DataFrameFormatError as e:
            raise ConfigError(str(e)) from e
        if "path" not in df.columns:
            raise ConfigError(
                f"{str(csv_path)!r}: has no column 'path' (columns: {', '.join(map(str, df.columns))})"
            )
        missing = df.index[df["path"].isna()].tolist()
        if missing:
            raise ConfigError(f"{str(csv_path)!r}: column 'path' is empty in the row(s) {missing[:10]}")
        paths = df["path"].astype(str)
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
    "ImageData",
    "check_train_and_validation_rows",
    "resolve_dataset_root",
    "split_dataframe",
]
