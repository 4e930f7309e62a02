"""The plugin module of the ``oml_texts`` plugin (entry point ``oml_texts = "oml_texts.plugin"``).

:data:`COMPONENTS` is the plugin's one table: the ``texts`` dataset component, the ``hf_text`` extractor and the
text models of the zoo (:data:`oml_texts.zoo.PRETRAINED`); declared as ``OML_COMPONENTS``, the registry registers
it, and the package ``oml_texts`` takes its lazy exports from it and from :data:`EXTRA_EXPORTS`. Factories are lazy
``"module:attr"`` strings (but the zoo's metadata factories): transformers is imported only when a model or
tokenizer is read. The default config of a component is ``oml_texts/configs/<kind>/<name>.yaml``."""

from __future__ import annotations

from types import MappingProxyType

from oml_core.utils.lazy import Component
from oml_texts.zoo import PRETRAINED

COMPONENTS: tuple[Component, ...] = (
    Component(
        "dataset",
        "texts",
        "oml_texts.data:TextData",
        "texts in a CSV of OML's format with a text column, tokenised by a Hugging Face tokenizer",
    ),
    Component(
        "extractor",
        "hf_text",
        "oml_texts.extractors:HFTextExtractor",
        "a Hugging Face transformer on texts (folder or cache): cls or mean pooling, optional L2 norm",
    ),
    *(
        Component("pretrained", key, factory, factory().description, export=False)
        for key, factory in PRETRAINED.items()
    ),
)

#: The other public names of ``oml_texts`` (OML's classes and functions that are no component): ``{name: module}``.
EXTRA_EXPORTS: MappingProxyType[str, str] = MappingProxyType(
    {
        "HFWrapper": "oml_texts.extractors",
        "THFModel": "oml_texts.extractors",
        "TBatchEncoding": "oml_texts.extractors",
        "check_model_type": "oml_texts.extractors",
        "TextBaseDataset": "oml_texts.datasets",
        "TextLabeledDataset": "oml_texts.datasets",
        "TextQueryGalleryDataset": "oml_texts.datasets",
        "TextQueryGalleryLabeledDataset": "oml_texts.datasets",
        "get_mock_texts_dataset": "oml_texts.mock",
        "get_mock_texts_dataset_root": "oml_texts.mock",
    }
)

#: The declarations the registry reads (no hook function): the table, and the package of the default configs
#: (``<kind>/<name>.yaml``).
OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://oml_texts.configs",)
