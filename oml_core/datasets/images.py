"""Image datasets built from paths or from a dataframe in OML's format.

A dataframe in OML's format has the columns ``label``, ``path``, ``split``, ``is_query``, ``is_gallery`` and,
optionally, ``category``, ``sequence`` and the bounding box ``x_1, x_2, y_1, y_2`` (left, right, top,
bottom; a row with empty box values uses the whole image). Which columns a dataset requires depends on the
dataset: see each class.

Every dataset here is lazy: constructing it validates the table but reads no image; an image is read (and,
with ``cache_size > 0``, kept in a per-instance LRU cache of decoded images) only when an item is asked for.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from PIL import Image, ImageDraw

from oml_core.builtins.transforms import IMAGENET_MEAN, IMAGENET_STD
from oml_core.const import (
    BBOXES_COLUMNS,
    BLACK,
    CATEGORIES_COLUMN,
    CATEGORIES_KEY,
    INDEX_KEY,
    INPUT_TENSORS_KEY,
    IS_GALLERY_COLUMN,
    IS_GALLERY_KEY,
    IS_QUERY_COLUMN,
    IS_QUERY_KEY,
    LABELS_COLUMN,
    LABELS_KEY,
    MOCK_DATASET_DEFAULT_CSV,
    PATHS_COLUMN,
    PATHS_KEY,
    SEQUENCE_COLUMN,
    SEQUENCE_KEY,
    SPLIT_COLUMN,
    X1_COLUMN,
    X1_KEY,
    X2_COLUMN,
    X2_KEY,
    Y1_COLUMN,
    Y1_KEY,
    Y2_COLUMN,
    Y2_KEY,
    TBBox,
    TColor,
)
from oml_core.datasets.dataframe_columns import LabelsColumn, QueryGalleryColumns
from oml_core.datasets.dataframe_format import (
    DataFrameFormatError,
    check_retrieval_dataframe_format,
    empty_mask,
    missing_columns_problem,
    parse_bboxes,
    row_problem,
)
from oml_core.datasets.extra_data import add_extra_data, checked_extra_data
from oml_core.interfaces.datasets import (
    IBaseDataset,
    ILabeledDataset,
    IQueryGalleryDataset,
    IQueryGalleryLabeledDataset,
    IVisualizableDataset,
)
from oml_core.utils.images import TImage, TImReader, imread_pil, to_rgb8


class _LRUCache:
    """A small least-recently-used cache. Its content is not pickled (DataLoader workers start empty)."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._data: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable) -> Any | None:
        if key not in self._data:
            return None
        self._data.move_to_end(key)
        return self._data[key]

    def put(self, key: Hashable, value: Any) -> None:
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def __getstate__(self) -> dict[str, Any]:
        return {"maxsize": self.maxsize, "_data": OrderedDict()}


def pil_to_tensor(image: TImage) -> torch.Tensor:
    """Convert a PIL image or an ``HxWx3`` uint8 array into a float tensor ``[3, H, W]`` in ``[0, 1]``.

    A PIL image of any mode is first made 8-bit RGB by :func:`~oml_core.utils.images.to_rgb8` (the reader's
    conversion: a 16-bit image is not clipped to white). A uint8 array is divided by 255, an array of another
    dtype is only cast to float32 (taken as already in ``[0, 1]``); a greyscale array is repeated over 3
    channels.
    """
    if isinstance(image, Image.Image):
        array = np.asarray(to_rgb8(image))
    elif isinstance(image, np.ndarray):
        array = image
        if array.ndim == 2:
            array = np.repeat(array[:, :, None], 3, axis=2)
        if array.ndim != 3 or array.shape[2] != 3:
            raise ValueError(f"expected an HxWx3 image array, got the shape {array.shape}")
    else:
        raise TypeError(f"expected a PIL image or a numpy array, got {type(image).__name__}")
    tensor = torch.from_numpy(np.array(array, dtype=np.float32, copy=True)).permute(2, 0, 1).contiguous()
    return tensor / 255.0 if array.dtype == np.uint8 else tensor


_MEAN = torch.tensor(IMAGENET_MEAN, dtype=torch.float32).view(3, 1, 1)
_STD = torch.tensor(IMAGENET_STD, dtype=torch.float32).view(3, 1, 1)


def _normalise_to_tensor(image: TImage) -> torch.Tensor:
    """What the datasets apply when ``transform`` is ``None`` (OML: "only normalisation and casting to
    tensor"): :func:`pil_to_tensor`, then ``(x - mean) / std`` per channel with ImageNet's mean and std."""
    return (pil_to_tensor(image) - _MEAN) / _STD


def _image_size(image: TImage) -> tuple[int, int]:
    """Return ``(width, height)``."""
    if isinstance(image, Image.Image):
        return image.size
    if isinstance(image, np.ndarray):
        return int(image.shape[1]), int(image.shape[0])
    raise TypeError(f"f_imread must return a PIL image or a numpy array, got {type(image).__name__}")


def _to_uint8_rgb(image: TImage) -> np.ndarray:
    """``HxWx3`` uint8 pixels of ``image`` for drawing: a PIL image through
    :func:`~oml_core.utils.images.to_rgb8`; an array as :func:`pil_to_tensor` takes it (uint8 as it is, another
    dtype as intensities in ``[0, 1]``: ``floor(255 v + 0.5)``, clipped)."""
    if isinstance(image, Image.Image):
        return np.array(to_rgb8(image), dtype=np.uint8)
    array = np.asarray(image)
    if array.ndim == 2:
        array = np.repeat(array[:, :, None], 3, axis=2)
    if array.dtype != np.uint8:
        array = np.clip(np.floor(array.astype(np.float64) * 255.0 + 0.5), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(array[:, :, :3])


def _check_columns(df: Any, required: Sequence[str], owner: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{owner} expects a pandas DataFrame as df, got {type(df).__name__}")
    problem = missing_columns_problem(df, required)
    if problem is not None:
        raise DataFrameFormatError(f"{owner}: the dataframe is {problem}")


def _check_no_missing(df: pd.DataFrame, column: str, owner: str) -> None:
    bad = empty_mask(df[column])
    if bad.any():
        raise DataFrameFormatError(f"{owner}: {row_problem(f'column {column!r}', 'an empty value', bad)}")


class ImageBaseDataset(IBaseDataset, IVisualizableDataset):
    """The base class that handles image specific logic: reading, caching, cropping and transforming.

    Items are dicts with ``input_tensors_key`` (the output of ``transform`` applied to the image cropped by
    its bounding box, if any), ``index_key`` (the item's index), ``paths_key`` (the image's path as a string),
    ``x1_key, y1_key, x2_key, y2_key`` (the crop box used; the whole image when the item has no box) and one
    key per entry of ``extra_data``.
    """

    def __init__(
        self,
        paths: Sequence[Path | str],
        dataset_root: Path | str | None = None,
        bboxes: Sequence[TBBox | None] | None = None,
        extra_data: Mapping[str, Collection[Any]] | None = None,
        transform: Callable[[Any], Any] | None = None,
        f_imread: TImReader | None = None,
        cache_size: int | None = 0,
        input_tensors_key: str = INPUT_TENSORS_KEY,
        index_key: str = INDEX_KEY,
        paths_key: str = PATHS_KEY,
        x1_key: str = X1_KEY,
        x2_key: str = X2_KEY,
        y1_key: str = Y1_KEY,
        y2_key: str = Y2_KEY,
    ):
        """
        Args:
            paths: Paths to the images; a relative path is joined to ``dataset_root`` when it is given.
            dataset_root: The images' root folder; ``None`` when the paths are absolute (or relative to the
                working directory).
            bboxes: ``None``, or one entry per path: ``None`` (use the whole image) or ``(x1, y1, x2, y2)``
                with the right and bottom ends exclusive.
            extra_data: Records of additional information, one value per path; ``extra_data[key][i]`` goes
                into item ``i`` under ``key``.
            transform: Applied to the (cropped) PIL image, or array when ``f_imread`` returns arrays; ``None``
                only normalises and casts to a tensor, as OML does: a float tensor ``[3, H, W]``, the pixels
                scaled to ``[0, 1]`` then normalised with ImageNet's mean and std.
            f_imread: Reads an image from its path; ``None`` means :func:`oml_core.utils.images.imread_pil`.
            cache_size: How many decoded images to keep in an LRU cache (per dataset instance); ``0`` or
                ``None`` disables the cache.
            input_tensors_key: Key of the image tensors in the items.
            index_key: Key of the items' indices.
            paths_key: Key of the items' paths.
            x1_key: Key of the left edge of the crop box.
            x2_key: Key of the right edge of the crop box.
            y1_key: Key of the top edge of the crop box.
            y2_key: Key of the bottom edge of the crop box.
        """
        owner = type(self).__name__
        paths = list(paths)
        root = Path(dataset_root) if dataset_root is not None else None
        self._paths: list[Path] = [root / Path(p) if root is not None else Path(p) for p in paths]
        self.dataset_root = root

        if bboxes is not None:
            bboxes = list(bboxes)
            if len(bboxes) != len(self._paths):
                raise ValueError(f"{owner}: got {len(bboxes)} bboxes for {len(self._paths)} paths")
            checked: list[TBBox | None] = []
            for i, bbox in enumerate(bboxes):
                if bbox is None:
                    checked.append(None)
                    continue
                x1, y1, x2, y2 = (int(v) for v in bbox)
                if not (0 <= x1 < x2 and 0 <= y1 < y2):
                    raise ValueError(
                        f"{owner}: the bbox of item {i} ({x1}, {y1}, {x2}, {y2}) is not (x1, y1, x2, y2) "
                        f"with 0 <= x1 < x2 and 0 <= y1 < y2"
                    )
                checked.append((x1, y1, x2, y2))
            bboxes = checked
        self._bboxes: list[TBBox | None] | None = bboxes

        self.input_tensors_key = input_tensors_key
        self.index_key = index_key
        self.paths_key = paths_key
        self.x1_key, self.x2_key, self.y1_key, self.y2_key = x1_key, x2_key, y1_key, y2_key
        reserved = {input_tensors_key, index_key, paths_key, x1_key, x2_key, y1_key, y2_key}

        self.extra_data = checked_extra_data(extra_data, len(self._paths), reserved, owner, "paths")

        self.transform = transform
        self.f_imread: TImReader = f_imread if f_imread is not None else imread_pil
        self.cache_size = int(cache_size or 0)
        if self.cache_size < 0:
            raise ValueError(f"{owner}: cache_size must be >= 0, got {cache_size}")
        self._cache = _LRUCache(self.cache_size) if self.cache_size > 0 else None

    @property
    def paths(self) -> list[Path]:
        """The resolved paths of the images, in dataset order."""
        return list(self._paths)

    @property
    def bboxes(self) -> list[TBBox | None] | None:
        """The bounding boxes ``(x1, y1, x2, y2)`` (or ``None`` per item, or ``None`` for all)."""
        return None if self._bboxes is None else list(self._bboxes)

    def __len__(self) -> int:
        return len(self._paths)

    def _check_index(self, item: int) -> int:
        item = int(item)
        if not 0 <= item < len(self):
            raise IndexError(f"{type(self).__name__}: index {item} is out of range for {len(self)} items")
        return item

    def read_image(self, item: int) -> TImage:
        """Return the decoded, uncropped image of ``item`` (through the LRU cache when it is on).

        Raises the reader's error, with the image's path in the message, when the file cannot be read.
        """
        item = self._check_index(item)
        path = self._paths[item]
        if self._cache is not None:
            image = self._cache.get(path)
            if image is not None:
                return image
        try:
            image = self.f_imread(path)
        except FileNotFoundError as e:
            if str(path) in str(e):
                raise
            raise FileNotFoundError(f"item {item}: image file not found: '{path}' ({e})") from e
        except Exception as e:
            if str(path) in str(e):
                raise
            raise OSError(f"item {item}: cannot read the image '{path}': {type(e).__name__}: {e}") from e
        if self._cache is not None:
            self._cache.put(path, image)
        return image

    def _crop_box(self, item: int, image: TImage) -> TBBox:
        width, height = _image_size(image)
        bbox = self._bboxes[item] if self._bboxes is not None else None
        if bbox is None:
            return 0, 0, width, height
        x1, y1, x2, y2 = bbox
        x1, x2 = min(x1, width), min(x2, width)
        y1, y2 = min(y1, height), min(y2, height)
        if x1 >= x2 or y1 >= y2:
            raise ValueError(
                f"item {item}: the bbox {bbox} lies outside the image '{self._paths[item]}' of size "
                f"{width}x{height}"
            )
        return x1, y1, x2, y2

    def __getitem__(self, item: int) -> dict[str, Any]:
        """Return the dict of item ``item``: ``input_tensors_key``, ``index_key``, ``paths_key``, the crop box
        keys and the ``extra_data`` keys. Reads the image (or takes it from the cache)."""
        item = self._check_index(item)
        image = self.read_image(item)
        x1, y1, x2, y2 = self._crop_box(item, image)
        if isinstance(image, Image.Image):
            cropped: TImage = image.crop((x1, y1, x2, y2))
        else:
            cropped = np.array(image[y1:y2, x1:x2], copy=True)
        tensors = self.transform(cropped) if self.transform is not None else _normalise_to_tensor(cropped)

        data: dict[str, Any] = {
            self.input_tensors_key: tensors,
            self.index_key: item,
            self.paths_key: str(self._paths[item]),
            self.x1_key: x1,
            self.y1_key: y1,
            self.x2_key: x2,
            self.y2_key: y2,
        }
        return add_extra_data(data, self.extra_data, item)

    def visualize(self, item: int, color: TColor = BLACK) -> np.ndarray:
        """Return the whole image of ``item`` as an ``HxWx3`` uint8 array with its bounding box (if it has
        one) drawn in ``color``; the image is not transformed."""
        item = self._check_index(item)
        image = _to_uint8_rgb(self.read_image(item))
        bbox = self._bboxes[item] if self._bboxes is not None else None
        if bbox is None:
            return image
        height, width = image.shape[:2]
        x1, y1, x2, y2 = bbox
        canvas = Image.fromarray(image)
        thickness = max(1, round(0.01 * max(height, width)))
        box = (min(x1, width - 1), min(y1, height - 1), min(x2, width) - 1, min(y2, height) - 1)
        ImageDraw.Draw(canvas).rectangle(box, outline=tuple(int(c) for c in color), width=thickness)
        return np.array(canvas, dtype=np.uint8)


class _DataFrameImageDataset(ImageBaseDataset):
    """Shared construction from a dataframe: paths, bboxes, categories and sequences."""

    def _init_from_df(
        self,
        df: pd.DataFrame,
        required: Sequence[str],
        extra_data: Mapping[str, Collection[Any]] | None,
        categories_key: str | None,
        sequence_key: str | None,
        **base_kwargs: Any,
    ) -> pd.DataFrame:
        owner = type(self).__name__
        _check_columns(df, required, owner)
        df = df.reset_index(drop=True)
        for column in required:
            if column in (LABELS_COLUMN, PATHS_COLUMN):
                _check_no_missing(df, column, owner)

        extra = dict(extra_data or {})
        for key, column in ((categories_key, CATEGORIES_COLUMN), (sequence_key, SEQUENCE_COLUMN)):
            if key is not None and column in df.columns:
                if key in extra:
                    raise ValueError(
                        f"{owner}: extra_data has the key '{key}' that the column '{column}' fills"
                    )
                extra[key] = df[column].tolist()

        self.df = df
        self.categories_key = categories_key if CATEGORIES_COLUMN in df.columns else None
        self.sequence_key = sequence_key if SEQUENCE_COLUMN in df.columns else None
        ImageBaseDataset.__init__(
            self,
            paths=[str(p) for p in df[PATHS_COLUMN].tolist()],
            bboxes=parse_bboxes(df, owner),
            extra_data=extra,
            **base_kwargs,
        )
        return df


class ImageLabeledDataset(_DataFrameImageDataset, LabelsColumn, ILabeledDataset):
    """The dataset of images having their ground truth labels, built from a dataframe in OML's format.

    Requires the columns ``label`` and ``path``; uses ``category``, ``sequence`` and ``x_1, x_2, y_1, y_2``
    when present. Items are those of :class:`ImageBaseDataset` plus ``labels_key`` (the row's label) and
    ``categories_key`` / ``sequence_key`` when the dataframe has those columns.
    """

    def __init__(
        self,
        df: pd.DataFrame,
        extra_data: Mapping[str, Collection[Any]] | None = None,
        dataset_root: Path | str | None = None,
        transform: Callable[[Any], Any] | None = None,
        f_imread: TImReader | None = None,
        cache_size: int | None = 0,
        input_tensors_key: str = INPUT_TENSORS_KEY,
        labels_key: str = LABELS_KEY,
        index_key: str = INDEX_KEY,
        paths_key: str = PATHS_KEY,
        categories_key: str | None = CATEGORIES_KEY,
        sequence_key: str | None = SEQUENCE_KEY,
        x1_key: str = X1_KEY,
        x2_key: str = X2_KEY,
        y1_key: str = Y1_KEY,
        y2_key: str = Y2_KEY,
    ):
        """
        Args:
            df: The table (OML's format) with at least the columns ``label`` and ``path``.
            extra_data: Additional per-row records to put into the items (see :class:`ImageBaseDataset`).
            dataset_root: The root that relative paths of ``df`` are joined to.
            transform: See :class:`ImageBaseDataset`.
            f_imread: See :class:`ImageBaseDataset`.
            cache_size: See :class:`ImageBaseDataset`.
            input_tensors_key: Key of the image tensors in the items.
            labels_key: Key of the labels in the items.
            index_key: Key of the items' indices.
            paths_key: Key of the items' paths.
            categories_key: Key of the ``category`` column's values in the items (``None`` to leave them out).
            sequence_key: Key of the ``sequence`` column's values in the items (``None`` to leave them out).
            x1_key: Key of the left edge of the crop box.
            x2_key: Key of the right edge of the crop box.
            y1_key: Key of the top edge of the crop box.
            y2_key: Key of the bottom edge of the crop box.
        """
        self.labels_key = labels_key
        self._init_from_df(
            df,
            required=self._required_columns(),
            extra_data=extra_data,
            categories_key=categories_key,
            sequence_key=sequence_key,
            dataset_root=dataset_root,
            transform=transform,
            f_imread=f_imread,
            cache_size=cache_size,
            input_tensors_key=input_tensors_key,
            index_key=index_key,
            paths_key=paths_key,
            x1_key=x1_key,
            x2_key=x2_key,
            y1_key=y1_key,
            y2_key=y2_key,
        )
        if labels_key in self.extra_data:
            raise ValueError(
                f"{type(self).__name__}: the extra_data key '{labels_key}' clashes with labels_key"
            )
        self._init_labels()

    @staticmethod
    def _required_columns() -> tuple[str, ...]:
        return LABELS_COLUMN, PATHS_COLUMN

    def __getitem__(self, item: int) -> dict[str, Any]:
        """The item of :class:`ImageBaseDataset` plus ``labels_key``."""
        return self._add_label(super().__getitem__(item), item)


class ImageQueryGalleryLabeledDataset(QueryGalleryColumns, ImageLabeledDataset, IQueryGalleryLabeledDataset):
    """The annotated dataset of images having a query/gallery split.

    Requires the columns ``label``, ``path``, ``is_query`` and ``is_gallery`` (True/False or 1/0 in every row;
    an item may be both a query and in the gallery: "1 vs rest" validation). Items are those of
    :class:`ImageLabeledDataset` plus ``is_query_key`` and ``is_gallery_key`` (bools).
    """

    def __init__(
        self,
        df: pd.DataFrame,
        extra_data: Mapping[str, Collection[Any]] | None = None,
        dataset_root: Path | str | None = None,
        transform: Callable[[Any], Any] | None = None,
        f_imread: TImReader | None = None,
        cache_size: int | None = 0,
        input_tensors_key: str = INPUT_TENSORS_KEY,
        labels_key: str = LABELS_KEY,
        paths_key: str = PATHS_KEY,
        categories_key: str | None = CATEGORIES_KEY,
        sequence_key: str | None = SEQUENCE_KEY,
        x1_key: str = X1_KEY,
        x2_key: str = X2_KEY,
        y1_key: str = Y1_KEY,
        y2_key: str = Y2_KEY,
        is_query_key: str = IS_QUERY_KEY,
        is_gallery_key: str = IS_GALLERY_KEY,
        index_key: str = INDEX_KEY,
    ):
        """
        Args:
            df: The table (OML's format) with at least ``label``, ``path``, ``is_query`` and ``is_gallery``.
            is_query_key: Key of the items' ``is_query`` flags.
            is_gallery_key: Key of the items' ``is_gallery`` flags.
            index_key: Key of the items' indices.

        The other arguments are those of :class:`ImageLabeledDataset`.
        """
        ImageLabeledDataset.__init__(
            self,
            df=df,
            extra_data=extra_data,
            dataset_root=dataset_root,
            transform=transform,
            f_imread=f_imread,
            cache_size=cache_size,
            input_tensors_key=input_tensors_key,
            labels_key=labels_key,
            index_key=index_key,
            paths_key=paths_key,
            categories_key=categories_key,
            sequence_key=sequence_key,
            x1_key=x1_key,
            x2_key=x2_key,
            y1_key=y1_key,
            y2_key=y2_key,
        )
        self._init_query_gallery(self.df, is_query_key, is_gallery_key)

    @staticmethod
    def _required_columns() -> tuple[str, ...]:
        return LABELS_COLUMN, PATHS_COLUMN, IS_QUERY_COLUMN, IS_GALLERY_COLUMN

    def __getitem__(self, item: int) -> dict[str, Any]:
        """The item of :class:`ImageLabeledDataset` plus ``is_query_key`` and ``is_gallery_key``."""
        data = ImageLabeledDataset.__getitem__(self, item)
        return self._add_query_gallery(data, data[self.index_key])


class ImageQueryGalleryDataset(QueryGalleryColumns, _DataFrameImageDataset, IQueryGalleryDataset):
    """The NOT annotated dataset of images having a query/gallery split (for prediction).

    Requires the columns ``path``, ``is_query`` and ``is_gallery``; a ``label`` column, if any, is ignored.
    Items are those of :class:`ImageBaseDataset` plus ``is_query_key``, ``is_gallery_key`` and
    ``categories_key`` / ``sequence_key`` when the dataframe has those columns.
    """

    def __init__(
        self,
        df: pd.DataFrame,
        extra_data: Mapping[str, Collection[Any]] | None = None,
        dataset_root: Path | str | None = None,
        transform: Callable[[Any], Any] | None = None,
        f_imread: TImReader | None = None,
        cache_size: int | None = 0,
        input_tensors_key: str = INPUT_TENSORS_KEY,
        paths_key: str = PATHS_KEY,
        categories_key: str | None = CATEGORIES_KEY,
        sequence_key: str | None = SEQUENCE_KEY,
        x1_key: str = X1_KEY,
        x2_key: str = X2_KEY,
        y1_key: str = Y1_KEY,
        y2_key: str = Y2_KEY,
        is_query_key: str = IS_QUERY_KEY,
        is_gallery_key: str = IS_GALLERY_KEY,
        index_key: str = INDEX_KEY,
    ):
        """
        Args:
            df: The table (OML's format) with at least ``path``, ``is_query`` and ``is_gallery``.

        The other arguments are those of :class:`ImageQueryGalleryLabeledDataset`, without ``labels_key``.
        """
        self._init_from_df(
            df,
            required=(PATHS_COLUMN, IS_QUERY_COLUMN, IS_GALLERY_COLUMN),
            extra_data=extra_data,
            categories_key=categories_key,
            sequence_key=sequence_key,
            dataset_root=dataset_root,
            transform=transform,
            f_imread=f_imread,
            cache_size=cache_size,
            input_tensors_key=input_tensors_key,
            index_key=index_key,
            paths_key=paths_key,
            x1_key=x1_key,
            x2_key=x2_key,
            y1_key=y1_key,
            y2_key=y2_key,
        )
        self._init_query_gallery(self.df, is_query_key, is_gallery_key)

    def __getitem__(self, item: int) -> dict[str, Any]:
        """The item of :class:`ImageBaseDataset` plus ``is_query_key`` and ``is_gallery_key``."""
        data = ImageBaseDataset.__getitem__(self, item)
        return self._add_query_gallery(data, data[self.index_key])


def get_retrieval_images_datasets(
    dataset_root: Path | str,
    transforms_train: Callable[[Any], Any] | None = None,
    transforms_val: Callable[[Any], Any] | None = None,
    f_imread_train: TImReader | None = None,
    f_imread_val: TImReader | None = None,
    dataframe_name: str = MOCK_DATASET_DEFAULT_CSV,
    cache_size: int | None = 0,
    verbose: bool = True,
) -> tuple[ImageLabeledDataset, ImageQueryGalleryLabeledDataset]:
    """Build the train and validation datasets from ``dataset_root / dataframe_name`` (OML's format).

    The table is first checked by :func:`check_retrieval_dataframe_format` (with ``verbose``: its summary is
    printed). The rows with ``split == "train"`` make an :class:`ImageLabeledDataset`, the rows with
    ``split == "validation"`` an :class:`ImageQueryGalleryLabeledDataset`. Labels are remapped to
    consecutive integers, train labels first (``0 .. n_train_labels - 1``), as OML does, so classification
    losses can use them as class indices. Raises ``FileNotFoundError`` naming the csv when it is missing and
    the checker's ``ValueError`` (naming the csv, the columns and the rows) when it is not in the format.
    """
    dataset_root = Path(dataset_root)
    csv_path = dataset_root / dataframe_name
    if not csv_path.is_file():
        raise FileNotFoundError(f"the dataframe '{csv_path}' does not exist")
    check_retrieval_dataframe_format(csv_path, dataset_root=dataset_root, verbose=verbose)
    df = pd.read_csv(csv_path, index_col=False)

    is_train = (df[SPLIT_COLUMN] == "train").to_numpy()
    ordered = pd.concat([df[LABELS_COLUMN][is_train], df[LABELS_COLUMN][~is_train]])
    mapper = {label: i for i, label in enumerate(pd.unique(ordered))}
    df = df.assign(**{LABELS_COLUMN: df[LABELS_COLUMN].map(mapper)})

    train_dataset = ImageLabeledDataset(
        df=df[is_train].reset_index(drop=True),
        dataset_root=dataset_root,
        transform=transforms_train,
        f_imread=f_imread_train,
        cache_size=cache_size,
    )
    valid_dataset = ImageQueryGalleryLabeledDataset(
        df=df[~is_train].reset_index(drop=True),
        dataset_root=dataset_root,
        transform=transforms_val,
        f_imread=f_imread_val,
        cache_size=cache_size,
    )
    return train_dataset, valid_dataset


__all__ = [
    "BBOXES_COLUMNS",
    "CATEGORIES_COLUMN",
    "IS_GALLERY_COLUMN",
    "IS_QUERY_COLUMN",
    "LABELS_COLUMN",
    "PATHS_COLUMN",
    "SEQUENCE_COLUMN",
    "SPLIT_COLUMN",
    "X1_COLUMN",
    "X2_COLUMN",
    "Y1_COLUMN",
    "Y2_COLUMN",
    "ImageBaseDataset",
    "ImageLabeledDataset",
    "ImageQueryGalleryDataset",
    "ImageQueryGalleryLabeledDataset",
    "get_retrieval_images_datasets",
    "parse_bboxes",
    "pil_to_tensor",
]
