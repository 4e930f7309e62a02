"""Metrics: ``EmbeddingMetrics`` (accumulate embeddings, compute retrieval metrics) and their helpers; OML's
``calc_topological_metrics`` too (:mod:`oml_core.functional.metrics`)."""

from oml_core.functional.metrics import calc_topological_metrics
from oml_core.metrics.embeddings import (
    EmbeddingMetrics,
    EmbeddingMetricsDDP,
    calc_fnmr_at_fmr_rr,
    calc_retrieval_metrics_rr,
    flatten_metrics,
)

__all__ = [
    "EmbeddingMetrics",
    "EmbeddingMetricsDDP",
    "calc_fnmr_at_fmr_rr",
    "calc_retrieval_metrics_rr",
    "calc_topological_metrics",
    "flatten_metrics",
]
