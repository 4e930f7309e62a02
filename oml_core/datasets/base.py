"""OML's older dataset names, used throughout the manual's examples (``from oml.datasets.base import
DatasetWithLabels, DatasetQueryGallery``), on top of the image datasets of :mod:`oml_core.datasets.images`.

- :class:`DatasetWithLabels` is an :class:`~oml_core.datasets.images.ImageLabeledDataset` (training: it gives
  its labels to the samplers).
- :class:`DatasetQueryGallery` is an :class:`~oml_core.datasets.images.ImageQueryGalleryLabeledDataset`
  (validation: OML's old class read the ``label`` column too, and its items had ``labels``).

The argument names are OML's and so are their positions, which differ from the image datasets' in one place:
the old ``DatasetWithLabels`` took ``transform`` before ``dataset_root``. So every call of the manual works as
it is written, by keyword (``DatasetWithLabels(df_train, dataset_root=root)``, ``DatasetQueryGallery(df=df_val,
extra_data={"embeddings": embeddings}, transform=transform)``) or by position.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from oml_core.const import (
    CATEGORIES_KEY,
    INDEX_KEY,
    INPUT_TENSORS_KEY,
    IS_GALLERY_KEY,
    IS_QUERY_KEY,
    LABELS_KEY,
    MOCK_DATASET_DEFAULT_CSV,
    PATHS_KEY,
    SEQUENCE_KEY,
    X1_KEY,
    X2_KEY,
    Y1_KEY,
    Y2_KEY,
)
from oml_core.datasets.images import (
    ImageLabeledDataset,
    ImageQueryGalleryLabeledDataset,
    TImReader,
    get_retrieval_images_datasets,
)


class DatasetWithLabels(ImageLabeledDataset):
    """OML's ``DatasetWithLabels``: an :class:`~oml_core.datasets.images.ImageLabeledDataset` with OML's old
    argument order (``df, extra_data, transform, dataset_root, ...``).

    Requires the columns ``label`` and ``path``; items are dicts with ``input_tensors``, ``labels``, ``idx``,
    ``paths``, the crop box ``x1, y1, x2, y2``, ``categories`` / ``sequence`` when the table has those
    columns, and one key per entry of ``extra_data``.

    Example (the manual's)::

        df_train, _ = download_mock_dataset(dataset_root)
        train_dataset = DatasetWithLabels(df_train, dataset_root=dataset_root)
        sampler = BalanceSampler(train_dataset.get_labels(), n_labels=2, n_instances=2)
    """

    def __init__(
        self,
        df: pd.DataFrame,
        extra_data: Mapping[str, Collection[Any]] | None = None,
        transform: Callable[[Any], Any] | None = None,
        dataset_root: Path | str | None = None,
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
        index_key: str = INDEX_KEY,
    ):
        """
        Args:
            df: The table (OML's format) with at least the columns ``label`` and ``path``.
            extra_data: Additional records, one value per row, put into the items under their keys (the
                manual's ``extra_data={"embeddings": embeddings}``: row ``i`` of the tensor goes to item ``i``).
            transform: Applied to the (cropped) image; ``None`` only normalises and casts to a tensor.
            dataset_root: The folder that the relative paths of ``df`` are joined to.
            f_imread: Reads an image from its path (``None``: PIL).
            cache_size: How many decoded images to keep in an LRU cache (``0``: none).
            input_tensors_key: Key of the image tensors in the items.
            labels_key: Key of the labels.
            paths_key: Key of the paths.
            categories_key: Key of the ``category`` column's values (``None`` to leave them out).
            sequence_key: Key of the ``sequence`` column's values (``None`` to leave them out).
            x1_key: Key of the left edge of the crop box.
            x2_key: Key of the right edge of the crop box.
            y1_key: Key of the top edge of the crop box.
            y2_key: Key of the bottom edge of the crop box.
            index_key: Key of the items' indices.

        Raises:
            DataFrameFormatError: a required column is missing or has empty values (see
                :class:`~oml_core.datasets.images.ImageLabeledDataset`).
        """
        super().__init__(
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


class DatasetQueryGallery(ImageQueryGalleryLabeledDataset):
    """OML's ``DatasetQueryGallery``: an
    :class:`~oml_core.datasets.images.ImageQueryGalleryLabeledDataset` with OML's old argument order.

    Requires the columns ``label``, ``path``, ``is_query`` and ``is_gallery``; items are those of
    :class:`DatasetWithLabels` plus ``is_query`` and ``is_gallery`` (bools). Every validation row being both a
    query and in the gallery is the "1 vs rest" validation.

    Example (the manual's)::

        _, df_val = download_mock_dataset(dataset_root)
        val_dataset = DatasetQueryGallery(df_val, dataset_root=dataset_root)
        dataset = DatasetQueryGallery(df_val, extra_data={"embeddings": emb_val}, transform=transforms)
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
        x1_key: str = X1_KEY,
        x2_key: str = X2_KEY,
        y1_key: str = Y1_KEY,
        y2_key: str = Y2_KEY,
        is_query_key: str = IS_QUERY_KEY,
        is_gallery_key: str = IS_GALLERY_KEY,
        sequence_key: str | None = SEQUENCE_KEY,
        index_key: str = INDEX_KEY,
    ):
        """
        Args:
            df: The table (OML's format) with at least ``label``, ``path``, ``is_query`` and ``is_gallery``.
            is_query_key: Key of the items' ``is_query`` flags.
            is_gallery_key: Key of the items' ``is_gallery`` flags.

        The other arguments are those of :class:`DatasetWithLabels` (``sequence_key`` and ``index_key``, which
        OML's old class did not take, come last).

        Raises:
            DataFrameFormatError: a required column is missing, has empty values, or a flag that is not
                True/False (see :class:`~oml_core.datasets.images.ImageQueryGalleryLabeledDataset`).
        """
        super().__init__(
            df=df,
            extra_data=extra_data,
            dataset_root=dataset_root,
            transform=transform,
            f_imread=f_imread,
            cache_size=cache_size,
            input_tensors_key=input_tensors_key,
            labels_key=labels_key,
            paths_key=paths_key,
            categories_key=categories_key,
            sequence_key=sequence_key,
            x1_key=x1_key,
            x2_key=x2_key,
            y1_key=y1_key,
            y2_key=y2_key,
            is_query_key=is_query_key,
            is_gallery_key=is_gallery_key,
            index_key=index_key,
        )


def get_retrieval_datasets(
    dataset_root: Path | str,
    transforms_train: Callable[[Any], Any] | None = None,
    transforms_val: Callable[[Any], Any] | None = None,
    f_imread_train: TImReader | None = None,
    f_imread_val: TImReader | None = None,
    dataframe_name: str = MOCK_DATASET_DEFAULT_CSV,
    cache_size: int | None = 0,
    verbose: bool = True,
) -> tuple[DatasetWithLabels, DatasetQueryGallery]:
    """OML's old ``get_retrieval_datasets``: the train and validation datasets of ``dataset_root /
    dataframe_name``, as :func:`~oml_core.datasets.images.get_retrieval_images_datasets` builds them (checked
    table, labels remapped to ``0..n-1`` with the train labels first), as the old classes.

    Raises:
        FileNotFoundError, DataFrameFormatError: see
            :func:`~oml_core.datasets.images.get_retrieval_images_datasets`.
    """
    train, valid = get_retrieval_images_datasets(
        dataset_root,
        dataframe_name=dataframe_name,
        cache_size=cache_size,
        verbose=verbose,
    )
    root = Path(dataset_root)
    return (
        DatasetWithLabels(
            train.df,
            transform=transforms_train,
            dataset_root=root,
            f_imread=f_imread_train,
            cache_size=cache_size,
        ),
        DatasetQueryGallery(
            valid.df,
            dataset_root=root,
            transform=transforms_val,
            f_imread=f_imread_val,
            cache_size=cache_size,
        ),
    )


__all__ = ["DatasetQueryGallery", "DatasetWithLabels", "get_retrieval_datasets"]
