"""Retrieval: ``RetrievalResults`` (memory-bounded kNN of queries among gallery items) and the post-processors
that need no model (``ConstantThresholding``, ``AdaptiveThresholding``).

OML's ``PairwiseReranker`` (``from oml_core.retrieval import PairwiseReranker``) is the pairwise re-ranker of the
installed post-processor plugin (oml-postprocessors), found on first access through OML's
``oml_core.retrieval.postprocessors.pairwise`` (:mod:`oml_core.compat.modules`): the core imports no plugin.
"""

from oml_core.retrieval.postprocessors.thresholding import AdaptiveThresholding, ConstantThresholding
from oml_core.retrieval.retrieval_results import RetrievalResults
from oml_core.utils.lazy import lazy_exports

# OML's name that lives in a plugin, from OML's module path that forwards it, when it is asked for
__getattr__, __dir__ = lazy_exports(
    __name__, {"PairwiseReranker": "oml_core.retrieval.postprocessors.pairwise"}
)


__all__ = ["AdaptiveThresholding", "ConstantThresholding", "PairwiseReranker", "RetrievalResults"]
