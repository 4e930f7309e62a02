"""oml plugin: pairwise re-ranking post-processors (STIR-style).

The public classes are importable from the top level (``from oml_postprocessors import PairwiseReranker``);
they are imported lazily on first access, so that loading the plugin module (``oml_postprocessors.plugin``,
which only registers lazy ``"module:attr"`` strings) does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from oml_postprocessors.inference import pairwise_inference
    from oml_postprocessors.ordering import rerank_top_n, update_top_n_in_matrix
    from oml_postprocessors.pairs import PairDataset
    from oml_postprocessors.pairwise import (
        PairwiseEmbeddingsPostprocessor,
        PairwiseImagesPostprocessor,
        PairwisePostprocessor,
    )
    from oml_postprocessors.reranker import PairwiseReranker

_EXPORTS = {
    "PairwiseReranker": "oml_postprocessors.reranker",
    "PairwisePostprocessor": "oml_postprocessors.pairwise",
    "PairwiseEmbeddingsPostprocessor": "oml_postprocessors.pairwise",
    "PairwiseImagesPostprocessor": "oml_postprocessors.pairwise",
    "PairDataset": "oml_postprocessors.pairs",
    "pairwise_inference": "oml_postprocessors.inference",
    "rerank_top_n": "oml_postprocessors.ordering",
    "update_top_n_in_matrix": "oml_postprocessors.ordering",
}

__all__ = [
    "PairDataset",
    "PairwiseEmbeddingsPostprocessor",
    "PairwiseImagesPostprocessor",
    "PairwisePostprocessor",
    "PairwiseReranker",
    "pairwise_inference",
    "rerank_top_n",
    "update_top_n_in_matrix",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
