"""Metrics: ``EmbeddingMetrics`` (accumulate embeddings, compute retrieval metrics) and their helpers."""

from oml_core.metrics.embeddings import EmbeddingMetrics, calc_retrieval_metrics_rr, flatten_metrics

__all__ = ["EmbeddingMetrics", "calc_retrieval_metrics_rr", "flatten_metrics"]
