"""Pieces shared by the post-processing pipelines (training and validation of a pairwise post-processor): the
post-processor built around a given pairwise model, and the metrics of the extractor's embeddings alone (the
"before" of their reports, :mod:`oml_core.reports.pipelines`)."""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import Tensor

from oml_core.config.components import build_component, spec_of
from oml_core.registry import ConfigError, Registry

#: Prefix of the metrics before post-processing in the logger (the metrics after have OML's plain keys).
BEFORE_PREFIX = "before_postprocessing/"


def build_pairwise_postprocessor(registry: Registry, spec: Any, pairwise_model: Any, pipeline: str) -> Any:
    """Build the post-processor of ``spec`` (the config key ``postprocessor``) with ``pairwise_model`` as its
    argument ``pairwise_model``, replacing the spec's own ``args.pairwise_model``.

    The pipelines build the model themselves, so that it is the model they train or move to the device.

    Raises:
        ConfigError: the post-processor takes no argument ``pairwise_model``.
    """
    spec = spec_of(spec)
    factory = registry.get("postprocessor", spec["name"]).load()
    if "pairwise_model" not in inspect.signature(factory).parameters:
        raise ConfigError(
            f"{pipeline}: config key 'postprocessor' must name a pairwise post-processor (one with the argument "
            f"pairwise_model, e.g. pairwise_reranker), but {spec['name']!r} has none"
        )
    args = {k: v for k, v in (spec.get("args") or {}).items() if k != "pairwise_model"}
    offers = {"pairwise_model": lambda: pairwise_model}
    return build_component(
        registry,
        "postprocessor",
        {"name": spec["name"], "args": args},
        "postprocessor",
        pipeline,
        offers=offers,
    )


def metrics_of_embeddings(metric: Any, embeddings: Tensor) -> dict[str, float]:
    """The flat metrics of ``metric`` over ``embeddings`` (row ``i``: item ``i`` of the metric's dataset)."""
    from oml_core.metrics import flatten_metrics

    metric.setup(num_samples=len(embeddings))
    metric.update(embeddings=embeddings, indices=torch.arange(len(embeddings)))
    return {key: float(value) for key, value in flatten_metrics(metric.compute_metrics()).items()}


__all__ = ["BEFORE_PREFIX", "build_pairwise_postprocessor", "metrics_of_embeddings"]
