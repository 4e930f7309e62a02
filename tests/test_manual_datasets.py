"""The manual's dataset calls (``from oml.datasets.base import DatasetWithLabels, DatasetQueryGallery``), run as
written on the mock dataset."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils.data import DataLoader

import oml_core.datasets
from oml_core.builtins.transforms import NormaliseResize
from oml_core.datasets import (
    DataFrameFormatError,
    ImageLabeledDataset,
    ImageQueryGalleryLabeledDataset,
    download_mock_dataset,
    get_mock_dataset_root,
)
from oml_core.datasets.base import DatasetQueryGallery, DatasetWithLabels, get_retrieval_datasets
from oml_core.interfaces.datasets import ILabeledDataset, IQueryGalleryLabeledDataset
from oml_core.retrieval import RetrievalResults


@pytest.fixture(scope="module")
def dataset_root(oml_cache_dir: Path) -> Path:
    return get_mock_dataset_root(cache_dir=oml_cache_dir)


def test_the_names_are_exported_by_both_modules() -> None:
    assert oml_core.datasets.DatasetWithLabels is DatasetWithLabels
    assert oml_core.datasets.DatasetQueryGallery is DatasetQueryGallery
    assert issubclass(DatasetWithLabels, ImageLabeledDataset) and issubclass(
        DatasetWithLabels, ILabeledDataset
    )
    assert issubclass(DatasetQueryGallery, ImageQueryGalleryLabeledDataset)
    assert issubclass(DatasetQueryGallery, IQueryGalleryLabeledDataset)


def test_omls_old_argument_order() -> None:
    """OML's old ``DatasetWithLabels`` took ``transform`` before ``dataset_root``, ``DatasetQueryGallery`` after."""
    assert list(inspect.signature(DatasetWithLabels).parameters)[:6] == [
        "df", "extra_data", "transform", "dataset_root", "f_imread", "cache_size",
    ]  # fmt: skip
    assert list(inspect.signature(DatasetQueryGallery).parameters)[:16] == [
        "df", "extra_data", "dataset_root", "transform", "f_imread", "cache_size", "input_tensors_key",
        "labels_key", "paths_key", "categories_key", "x1_key", "x2_key", "y1_key", "y2_key", "is_query_key",
        "is_gallery_key",
    ]  # fmt: skip


def test_training_example(dataset_root: Path) -> None:
    # the manual: df_train, _ = download_mock_dataset(dataset_root)
    #             train_dataset = DatasetWithLabels(df_train, dataset_root=dataset_root)
    df_train, _ = download_mock_dataset(dataset_root)
    train_dataset = DatasetWithLabels(df_train, dataset_root=dataset_root)
    assert len(train_dataset) == 128
    labels = train_dataset.get_labels()
    assert labels.tolist() == df_train["label"].tolist() and sorted(set(labels.tolist())) == list(range(16))
    batch = next(iter(DataLoader(train_dataset, batch_size=4)))
    assert batch["input_tensors"].shape == (4, 3, 64, 64)
    assert batch["labels"].tolist() == df_train["label"][:4].tolist()
    assert batch["idx"].tolist() == [0, 1, 2, 3]
    assert batch["paths"] == [str(dataset_root / p) for p in df_train["path"][:4]]
    # positionally, in OML's old order: df, extra_data, transform, dataset_root
    positional = DatasetWithLabels(df_train, None, NormaliseResize(32), dataset_root)
    assert positional[5]["input_tensors"].shape == (3, 32, 32)
    assert positional[5]["paths"] == str(dataset_root / df_train["path"][5])


def test_validation_examples(dataset_root: Path) -> None:
    # the manual: _, df_val = download_mock_dataset(dataset_root)
    #             val_dataset = DatasetQueryGallery(df_val, dataset_root=dataset_root)
    _, df_val = download_mock_dataset(dataset_root)
    val_dataset = DatasetQueryGallery(df_val, dataset_root=dataset_root)
    assert len(val_dataset) == 64
    assert val_dataset.get_query_ids().tolist() == val_dataset.get_gallery_ids().tolist() == list(range(64))
    batch = next(iter(DataLoader(val_dataset, batch_size=4)))
    assert batch["is_query"].tolist() == batch["is_gallery"].tolist() == [True] * 4
    assert batch["labels"].tolist() == [16] * 4  # validation labels are 16..23, 8 images each
    # the manual: DatasetQueryGallery(df_val, dataset_root=dataset_root,
    #                                 transform=get_normalisation_resize_torch(im_size=48))
    small = DatasetQueryGallery(df_val, dataset_root=dataset_root, transform=NormaliseResize(48))
    assert small[0]["input_tensors"].shape == (3, 48, 48)
    assert small.paths_key == "paths"  # EmbeddingMetrics(extra_keys=[val_dataset_1.paths_key])
    # retrieval on the validation dataset: one-hot embeddings of the labels retrieve the label's 7 other items
    embeddings = torch.nn.functional.one_hot(torch.as_tensor(val_dataset.get_labels()) - 16, 8).float()
    rr = RetrievalResults.from_embeddings(embeddings, val_dataset, n_items=7)
    assert rr.retrieved_ids[0].tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert rr.gt_ids[0].tolist() == [1, 2, 3, 4, 5, 6, 7] and rr.distances[0].tolist() == [0.0] * 7


def test_postprocessing_examples_with_extra_data_and_global_paths(dataset_root: Path) -> None:
    df_train, df_val = download_mock_dataset(dataset_root, global_paths=True)
    embeddings_train = torch.arange(len(df_train) * 2, dtype=torch.float32).reshape(-1, 2)
    emb_val = -torch.arange(len(df_val) * 3, dtype=torch.float32).reshape(-1, 3)
    transform = NormaliseResize(16)
    # the manual: DatasetWithLabels(df=df_train, transform=transform, extra_data={"embeddings": embeddings_train})
    train_dataset = DatasetWithLabels(
        df=df_train, transform=transform, extra_data={"embeddings": embeddings_train}
    )
    item = train_dataset[10]
    assert torch.equal(item["embeddings"], torch.tensor([20.0, 21.0]))
    assert item["input_tensors"].shape == (3, 16, 16) and item["paths"] == df_train["path"][10]
    batch = next(iter(DataLoader(train_dataset, batch_size=3)))
    assert torch.equal(batch["embeddings"], embeddings_train[:3])
    # the manual: DatasetQueryGallery(df=df_val, extra_data={"embeddings": embeddings_val}, transform=transform)
    #             DatasetQueryGallery(df_val, extra_data={"embeddings": emb_val}, transform=transforms)
    for val_dataset in (
        DatasetQueryGallery(df=df_val, extra_data={"embeddings": emb_val}, transform=transform),
        DatasetQueryGallery(df_val, extra_data={"embeddings": emb_val}, transform=transform),
    ):
        item = val_dataset[63]
        assert torch.equal(item["embeddings"], torch.tensor([-189.0, -190.0, -191.0]))
        assert item["labels"] == 23 and item["is_query"] is True and item["is_gallery"] is True


def test_sequence_and_category_columns_reach_the_items(dataset_root: Path) -> None:
    df = pd.read_csv(dataset_root / "df_with_sequence.csv")
    df_val = df[df["split"] == "validation"].reset_index(drop=True)
    dataset = DatasetQueryGallery(df_val, dataset_root=dataset_root)
    assert [dataset[i]["sequence"] for i in (0, 3, 6)] == ["seq_16_0", "seq_16_1", "seq_16_2"]
    df = pd.read_csv(dataset_root / "df_with_category.csv")
    train = DatasetWithLabels(df[df["split"] == "train"].reset_index(drop=True), dataset_root=dataset_root)
    assert train.get_label2category()[0] == "circle" and train[0]["categories"] == "circle"


def test_get_retrieval_datasets(dataset_root: Path) -> None:
    train, valid = get_retrieval_datasets(dataset_root, NormaliseResize(8), None, verbose=False)
    assert type(train) is DatasetWithLabels and type(valid) is DatasetQueryGallery
    assert (len(train), len(valid)) == (128, 64)
    assert train[0]["input_tensors"].shape == (3, 8, 8) and valid[0]["input_tensors"].shape == (3, 64, 64)
    assert np.array_equal(np.unique(valid.get_labels()), np.arange(16, 24))


def test_missing_columns_are_reported(dataset_root: Path) -> None:
    _, df_val = download_mock_dataset(dataset_root)
    with pytest.raises(DataFrameFormatError, match="is_gallery"):
        DatasetQueryGallery(df_val.drop(columns=["is_gallery"]), dataset_root=dataset_root)
    with pytest.raises(DataFrameFormatError, match="label"):
        DatasetWithLabels(df_val.drop(columns=["label"]), dataset_root=dataset_root)
