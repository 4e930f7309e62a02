"""Checks of the miners' arguments and of the batches given to them."""

from __future__ import annotations

import torch
from torch import Tensor


def check_batch(features: Tensor, labels: Tensor | list[int]) -> Tensor:
    """Check that ``features`` is ``[B, D]`` and ``labels`` has ``B`` integer items; return the labels as an
    ``int64`` tensor on the features' device.

    Raises:
        TypeError: ``features`` is not a tensor, or the labels are not integers.
        ValueError: the shapes disagree.
    """
    if not isinstance(features, Tensor):
        raise TypeError(f"features must be a torch.Tensor, got {type(features).__name__}")
    if features.ndim != 2:
        raise ValueError(
            f"features must have the shape [batch_size, feature_size], got {tuple(features.shape)}"
        )
    labels_t = torch.as_tensor(labels, device=features.device)
    if labels_t.numel() == 0:  # an empty list becomes a float tensor
        labels_t = labels_t.long()
    if labels_t.ndim != 1 or len(labels_t) != len(features):
        raise ValueError(
            f"labels must be one-dimensional with one label per feature row ({len(features)}), "
            f"got the shape {tuple(labels_t.shape)}"
        )
    if labels_t.is_floating_point() or labels_t.is_complex() or labels_t.dtype == torch.bool:
        raise TypeError(f"labels must be integers, got {labels_t.dtype}")
    return labels_t.long()


def check_positive_int(value: int, name: str) -> int:
    """Return ``value`` if it is an int ``>= 1``.

    Raises:
        TypeError: not an int (a bool is not one).
        ValueError: below 1.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


__all__ = ["check_batch", "check_positive_int"]
