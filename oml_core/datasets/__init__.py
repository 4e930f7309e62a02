"""Image and pairs datasets in OML's dataframe format, the format's checker and the mock "figures" dataset;
datasets of embeddings already computed (:mod:`oml_core.datasets.embeddings`); OML's older names
``DatasetWithLabels`` and ``DatasetQueryGallery`` (:mod:`oml_core.datasets.base`).

The names are imported on first access, so that the embeddings datasets do not import pandas or PIL.

OML's text and audio datasets (``TextLabeledDataset``, ``AudioQueryGalleryDataset``, ...), which OML's
``oml.datasets`` exports too, live in the oml-texts and oml-audio plugins; they come from OML's module paths
``oml_core.datasets.texts`` and ``oml_core.datasets.audios``, forwarding modules of :mod:`oml_core.compat.modules`
that find them in the packages of the installed plugins providing a ``dataset`` component (without the plugin,
an ``ImportError`` says where the name was looked for).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports
from oml_core.utils.oml_path_folders import oml_paths_folder

# OML's module paths here that live elsewhere (oml_core.datasets.texts): the folder of compat's tree
__path__.append(oml_paths_folder(__name__))

if TYPE_CHECKING:
    from oml_core.datasets.base import DatasetQueryGallery, DatasetWithLabels, get_retrieval_datasets
    from oml_core.datasets.dataframe_format import DataFrameFormatError, check_retrieval_dataframe_format
    from oml_core.datasets.embeddings import (
        EmbeddingsQueryGalleryDataset,
        EmbeddingsQueryGalleryLabeledDataset,
    )
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
        get_mock_images_dataset,
    )
    from oml_core.datasets.pairs import EmbeddingPairsDataset, ImagePairsDataset

_EXPORTS = {
    "DatasetQueryGallery": "oml_core.datasets.base",
    "DatasetWithLabels": "oml_core.datasets.base",
    "get_retrieval_datasets": "oml_core.datasets.base",
    "DataFrameFormatError": "oml_core.datasets.dataframe_format",
    "check_retrieval_dataframe_format": "oml_core.datasets.dataframe_format",
    "EmbeddingsQueryGalleryDataset": "oml_core.datasets.embeddings",
    "EmbeddingsQueryGalleryLabeledDataset": "oml_core.datasets.embeddings",
    "ImageBaseDataset": "oml_core.datasets.images",
    "ImageLabeledDataset": "oml_core.datasets.images",
    "ImageQueryGalleryDataset": "oml_core.datasets.images",
    "ImageQueryGalleryLabeledDataset": "oml_core.datasets.images",
    "get_retrieval_images_datasets": "oml_core.datasets.images",
    "parse_bboxes": "oml_core.datasets.images",
    "pil_to_tensor": "oml_core.datasets.images",
    "download_mock_dataset": "oml_core.datasets.mock",
    "generate_mock_dataset": "oml_core.datasets.mock",
    "get_mock_dataset_path": "oml_core.datasets.mock",
    "get_mock_dataset_root": "oml_core.datasets.mock",
    "EmbeddingPairsDataset": "oml_core.datasets.pairs",
    "ImagePairsDataset": "oml_core.datasets.pairs",
    "PairDataset": "oml_core.datasets.pairs",
    "get_mock_images_dataset": "oml_core.datasets.mock",
    **{
        f"{modality}{kind}Dataset": f"oml_core.datasets.{modality.lower()}s"
        for modality in ("Text", "Audio")
        for kind in ("Base", "Labeled", "QueryGallery", "QueryGalleryLabeled")
    },
}

__all__ = [
    "AudioBaseDataset",
    "AudioLabeledDataset",
    "AudioQueryGalleryDataset",
    "AudioQueryGalleryLabeledDataset",
    "DataFrameFormatError",
    "DatasetQueryGallery",
    "DatasetWithLabels",
    "EmbeddingPairsDataset",
    "EmbeddingsQueryGalleryDataset",
    "EmbeddingsQueryGalleryLabeledDataset",
    "ImageBaseDataset",
    "ImageLabeledDataset",
    "ImagePairsDataset",
    "ImageQueryGalleryDataset",
    "ImageQueryGalleryLabeledDataset",
    "PairDataset",
    "TextBaseDataset",
    "TextLabeledDataset",
    "TextQueryGalleryDataset",
    "TextQueryGalleryLabeledDataset",
    "check_retrieval_dataframe_format",
    "download_mock_dataset",
    "generate_mock_dataset",
    "get_mock_dataset_path",
    "get_mock_dataset_root",
    "get_mock_images_dataset",
    "get_retrieval_datasets",
    "get_retrieval_images_datasets",
    "parse_bboxes",
    "pil_to_tensor",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
