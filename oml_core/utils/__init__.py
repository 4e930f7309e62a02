"""Small helpers shared by the core and every plugin; and, as OML's ``oml.utils`` exports them, its mock datasets'
functions ``get_mock_images_dataset``, ``get_mock_texts_dataset`` and ``get_mock_audios_dataset``.

The helpers are imported lazily on first access (PEP 562), so that ``oml_core.utils.lazy``, which every
plugin package uses for its own lazy exports, can be imported without torch.

The mock datasets' functions come from OML's module path ``oml_core.utils.download_mock_dataset``, whose names
:mod:`oml_core.compat.modules` finds: the images' in :mod:`oml_core.datasets.mock`, the texts' and the audio's in
the packages of the installed plugins that provide a ``dataset`` component (oml-texts, oml-audio); without such
a plugin the name raises an ``ImportError`` that says where it was looked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports
from oml_core.utils.oml_path_folders import oml_paths_folder

# OML's module paths here that live elsewhere (oml_core.utils.download_mock_dataset): the folder of compat's tree
__path__.append(oml_paths_folder(__name__))

if TYPE_CHECKING:
    from oml_core.datasets.mock import get_mock_images_dataset
    from oml_core.utils.indexing import assign_2d, take_2d
    from oml_core.utils.misc_torch import pairwise_dist
    from oml_core.utils.pca import PCA

#: OML's module of its mock datasets' functions (a forwarding module of :mod:`oml_core.compat.modules`).
_MOCK_DATASETS = "oml_core.utils.download_mock_dataset"

_EXPORTS = {
    "PCA": "oml_core.utils.pca",
    "assign_2d": "oml_core.utils.indexing",
    "get_mock_audios_dataset": _MOCK_DATASETS,
    "get_mock_images_dataset": _MOCK_DATASETS,
    "get_mock_texts_dataset": _MOCK_DATASETS,
    "pairwise_dist": "oml_core.utils.misc_torch",
    "take_2d": "oml_core.utils.indexing",
}

__all__ = [
    "PCA",
    "assign_2d",
    "get_mock_audios_dataset",
    "get_mock_images_dataset",
    "get_mock_texts_dataset",
    "pairwise_dist",
    "take_2d",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
