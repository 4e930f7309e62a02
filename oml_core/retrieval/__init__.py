"""Retrieval: ``RetrievalResults`` (memory-bounded kNN of queries among gallery items) and the post-processors
that need no model (``ConstantThresholding``, ``AdaptiveThresholding``)."""

from oml_core.retrieval.postprocessors.thresholding import AdaptiveThresholding, ConstantThresholding
from oml_core.retrieval.retrieval_results import RetrievalResults

__all__ = ["AdaptiveThresholding", "ConstantThresholding", "RetrievalResults"]
