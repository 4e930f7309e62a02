"""oml plugin package ``oml_texts``: OML's text datasets, ``HFWrapper``, the ``hf_text`` extractor, the ``texts``
dataset component, the text models of the zoo and the mock texts.

``from oml_texts import TextLabeledDataset, HFWrapper``; the public names are imported lazily (PEP 562), so that
loading the plugin's entry point imports neither torch nor transformers. The exports and ``__all__`` come from the
plugin's table (:data:`oml_texts.plugin.COMPONENTS` and :data:`~oml_texts.plugin.EXTRA_EXPORTS`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import table_exports
from oml_texts.plugin import COMPONENTS, EXTRA_EXPORTS

if TYPE_CHECKING:
    from oml_texts.data import TextData as TextData
    from oml_texts.datasets import TextBaseDataset as TextBaseDataset
    from oml_texts.datasets import TextLabeledDataset as TextLabeledDataset
    from oml_texts.datasets import TextQueryGalleryDataset as TextQueryGalleryDataset
    from oml_texts.datasets import TextQueryGalleryLabeledDataset as TextQueryGalleryLabeledDataset
    from oml_texts.extractors import HFTextExtractor as HFTextExtractor
    from oml_texts.extractors import HFWrapper as HFWrapper
    from oml_texts.extractors import TBatchEncoding as TBatchEncoding
    from oml_texts.extractors import THFModel as THFModel
    from oml_texts.extractors import check_model_type as check_model_type
    from oml_texts.mock import get_mock_texts_dataset as get_mock_texts_dataset
    from oml_texts.mock import get_mock_texts_dataset_root as get_mock_texts_dataset_root

__getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)
