"""Validation of a dataset's labels and their grouping into per-label index lists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor


def as_labels_tensor(labels: Sequence[int] | Any, name: str = "labels") -> Tensor:
    """Return ``labels`` (a list, numpy array or tensor of ints) as a 1-D ``int64`` CPU tensor.

    Raises:
        ValueError: ``labels`` is empty, not one-dimensional or not integer (bools and floats are refused).
    """
    try:
        labels_t = torch.as_tensor(labels).cpu() if not isinstance(labels, Tensor) else labels.detach().cpu()
    except (TypeError, ValueError, RuntimeError) as e:
        raise ValueError(f"{name} must be a 1-D sequence of integers: {e}") from None
    if labels_t.numel() == 0:
        raise ValueError(f"{name} must not be empty")
    if labels_t.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got the shape {tuple(labels_t.shape)}")
    if labels_t.dtype == torch.bool or labels_t.is_floating_point() or labels_t.is_complex():
        raise ValueError(f"{name} must be integers, got the dtype {labels_t.dtype}")
    return labels_t.long()


def group_indices_by_label(labels: Tensor) -> tuple[Tensor, list[Tensor]]:
    """Sorted unique labels ``[L]`` and, for each, the ascending indices ``i`` with ``labels[i] == label``."""
    unique, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
    order = torch.argsort(inverse, stable=True)
    return unique, list(torch.split(order, counts.tolist()))
