"""Retrieval: ``RetrievalResults`` (memory-bounded kNN of queries among gallery items)."""

from oml_core.retrieval.retrieval_results import RetrievalResults

__all__ = ["RetrievalResults"]
