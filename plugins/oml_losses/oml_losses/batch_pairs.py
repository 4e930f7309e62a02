"""Shared pieces of the pair and proxy losses: argument checks, the label masks and cosine similarities of a
batch, and a numerically stable masked ``log(1 + sum exp)``."""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F


def check_number(value: float, name: str) -> float:
    """Return ``value`` if it is a finite real number (an ``int`` or a ``float``, not a ``bool``).

    Raises:
        ValueError: ``value`` is not a number (a string, ``None``, a bool) or is ``nan`` / infinite.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return value


def check_positive(value: float, name: str) -> float:
    """Return ``value`` if it is a finite number ``> 0``.

    Raises:
        ValueError: ``value`` is not a finite number or is ``<= 0``.
    """
    if not check_number(value, name) > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return value


def check_non_negative(value: float, name: str) -> float:
    """Return ``value`` if it is a finite number ``>= 0``.

    Raises:
        ValueError: ``value`` is not a finite number or is ``< 0``.
    """
    if not check_number(value, name) >= 0:
        raise ValueError(f"{name} must be non-negative, got {value!r}")
    return value


def check_size(value: int, name: str) -> int:
    """Return ``value`` if it is an ``int >= 1`` (not a ``bool``).

    Raises:
        ValueError: ``value`` is not a positive int.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def pair_masks(labels: Tensor) -> tuple[Tensor, Tensor]:
    """Boolean ``[B, B]`` masks of the positive pairs (same label, ``i != j``) and the negative pairs (other
    label) of ``labels`` ``[B]``."""
    same = labels[:, None] == labels[None, :]
    not_self = ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    return same & not_self, ~same


def cosine_similarities(x1: Tensor, x2: Tensor | None = None) -> Tensor:
    """``S[i, j] = <x1_i / |x1_i|, x2_j / |x2_j|>``: ``[n1, n2]`` cosine similarities (``x2 = x1`` if ``None``).

    The rows are normalised by ``F.normalize`` (a zero row stays zero, with a finite gradient).
    """
    x1 = F.normalize(x1, p=2, dim=1)
    return x1 @ (x1 if x2 is None else F.normalize(x2, p=2, dim=1)).T


def log1p_sum_exp(values: Tensor, mask: Tensor, dim: int) -> Tensor:
    """``log(1 + sum_{mask} exp(values))`` along ``dim``, without overflow: the ``logsumexp`` of the masked
    values and of one extra ``0`` (so ``0`` where the mask selects nothing, with a zero gradient)."""
    masked = values.masked_fill(~mask, -torch.inf)
    shape = list(masked.shape)
    shape[dim] = 1
    zeros = masked.new_zeros(shape)
    return torch.cat([masked, zeros], dim=dim).logsumexp(dim=dim)


def masked_mean(values: Tensor, mask: Tensor) -> float:
    """The mean of ``values[mask]`` as a float (``nan`` if the mask is empty), for the logs."""
    with torch.no_grad():
        return float(values[mask].mean()) if bool(mask.any()) else float("nan")


__all__ = [
    "check_non_negative",
    "check_number",
    "check_positive",
    "check_size",
    "cosine_similarities",
    "log1p_sum_exp",
    "masked_mean",
    "pair_masks",
]
