"""oml plugin: pairwise re-ranking post-processors (STIR-style).

The public classes are importable from the top level (``from oml_postprocessors import PairwiseReranker``);
they are imported lazily on first access, so that loading the plugin module (``oml_postprocessors.plugin``,
which only registers lazy ``"module:attr"`` strings) does not import torch. The exports and ``__all__`` come
from the plugin's table (:data:`oml_postprocessors.plugin.COMPONENTS` and
:data:`~oml_postprocessors.plugin.EXTRA_EXPORTS`); the imports below, explicit re-exports, are for static type
checkers and IDEs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import table_exports
from oml_postprocessors.plugin import COMPONENTS, EXTRA_EXPORTS

if TYPE_CHECKING:
    from oml_postprocessors.inference import pairwise_inference as pairwise_inference
    from oml_postprocessors.inference import pairwise_inference_by_ids as pairwise_inference_by_ids
    from oml_postprocessors.ordering import rerank_top_n as rerank_top_n
    from oml_postprocessors.ordering import update_top_n_in_matrix as update_top_n_in_matrix
    from oml_postprocessors.pairs import PairDataset as PairDataset
    from oml_postprocessors.pairwise import PairwiseEmbeddingsPostprocessor as PairwiseEmbeddingsPostprocessor
    from oml_postprocessors.pairwise import PairwiseImagesPostprocessor as PairwiseImagesPostprocessor
    from oml_postprocessors.pairwise import PairwisePostprocessor as PairwisePostprocessor
    from oml_postprocessors.reranker import PairwiseReranker as PairwiseReranker

__getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)
