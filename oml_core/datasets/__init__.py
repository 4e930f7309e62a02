"""Image datasets in OML's dataframe format and the generated mock "figures" dataset."""

from oml_core.datasets.images import (
    ImageBaseDataset,
    ImageLabeledDataset,
    ImageQueryGalleryDataset,
    ImageQueryGalleryLabeledDataset,
    get_retrieval_images_datasets,
    parse_bboxes,
    pil_to_tensor,
)
from oml_core.datasets.mock import download_mock_dataset, generate_mock_dataset, get_mock_dataset_root

__all__ = [
    "ImageBaseDataset",
    "ImageLabeledDataset",
    "ImageQueryGalleryDataset",
    "ImageQueryGalleryLabeledDataset",
    "download_mock_dataset",
    "generate_mock_dataset",
    "get_mock_dataset_root",
    "get_retrieval_images_datasets",
    "parse_bboxes",
    "pil_to_tensor",
]
