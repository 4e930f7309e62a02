"""Image and pairs datasets in OML's dataframe format, the format's checker and the mock "figures" dataset;
OML's older names ``DatasetWithLabels`` and ``DatasetQueryGallery`` (:mod:`oml_core.datasets.base`)."""

from oml_core.datasets.base import DatasetQueryGallery, DatasetWithLabels, get_retrieval_datasets
from oml_core.datasets.dataframe_format import DataFrameFormatError, check_retrieval_dataframe_format
from oml_core.datasets.images import (
    ImageBaseDataset,
    ImageLabeledDataset,
    ImageQueryGalleryDataset,
    ImageQueryGalleryLabeledDataset,
    get_retrieval_images_datasets,
    parse_bboxes,
    pil_to_tensor,
)
from oml_core.datasets.mock import (
    download_mock_dataset,
    generate_mock_dataset,
    get_mock_dataset_path,
    get_mock_dataset_root,
)
from oml_core.datasets.pairs import EmbeddingPairsDataset, ImagePairsDataset

__all__ = [
    "DataFrameFormatError",
    "DatasetQueryGallery",
    "DatasetWithLabels",
    "EmbeddingPairsDataset",
    "ImageBaseDataset",
    "ImageLabeledDataset",
    "ImagePairsDataset",
    "ImageQueryGalleryDataset",
    "ImageQueryGalleryLabeledDataset",
    "check_retrieval_dataframe_format",
    "download_mock_dataset",
    "generate_mock_dataset",
    "get_mock_dataset_path",
    "get_mock_dataset_root",
    "get_retrieval_datasets",
    "get_retrieval_images_datasets",
    "parse_bboxes",
    "pil_to_tensor",
]
