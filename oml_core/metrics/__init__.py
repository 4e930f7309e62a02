"""Metrics: ``EmbeddingMetrics`` (accumulate embeddings, compute retrieval metrics) and their helpers."""

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
    "flatten_metrics",
]
