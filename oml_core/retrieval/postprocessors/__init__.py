"""Retrieval post-processors of the core (those that need no model)."""

from oml_core.retrieval.postprocessors.thresholding import (
    AdaptiveThresholding,
    ConstantThresholding,
    keep_first_items,
)

__all__ = ["AdaptiveThresholding", "ConstantThresholding", "keep_first_items"]
