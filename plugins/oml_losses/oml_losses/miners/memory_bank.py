"""A memory bank: a ring buffer of the features and labels of the last batches, shared by the miners with
memory."""

from __future__ import annotations

import torch
from torch import Tensor

from oml_losses.miners.checks import check_positive_int


class FeatureBank:
    """The detached features and the labels of the last ``size_in_batches`` batches.

    The bank is allocated at the first batch, on its device, with room for ``size_in_batches`` batches of the
    first batch's size; every later batch must have that size and feature size. :meth:`push` writes a batch
    over the oldest one.

    With ``placeholders`` the bank starts full of placeholder items: item ``i`` has the label
    ``-(i // 2) - 1`` (so ``-1, -1, -2, -2, ...``: pairs of one label, never equal to a real, non-negative
    label) and the one-hot feature of the coordinate ``min((i // 2) % batch_size + 1, feature_size - 1)``:
    as in OML, whose placeholders are one-hot in the coordinates ``1 .. batch_size``, a feature that is
    one-hot in a coordinate above the batch size never equals a placeholder (OML's tests of the miner rely
    on it). Without, it starts empty and
    :attr:`is_full` once ``size_in_batches`` batches were pushed.

    Args:
        size_in_batches: The size of the bank in batches (``>= 1``).
        placeholders: Start full of placeholder items.
    """

    def __init__(self, size_in_batches: int, placeholders: bool) -> None:
        self.size_in_batches = check_positive_int(size_in_batches, "bank_size_in_batches")
        self.placeholders = placeholders
        self.features: Tensor | None = None
        self.labels: Tensor | None = None
        self.batch_size = 0
        self.n_pushed = 0
        self.ptr = 0

    @property
    def is_full(self) -> bool:
        """Whether every item of the bank holds a placeholder or a pushed feature."""
        return self.features is not None and (self.placeholders or self.n_pushed >= self.size_in_batches)

    def prepare(self, features: Tensor) -> None:
        """Allocate the bank for batches shaped like ``features`` ``[B, D]``, or check that they are.

        Raises:
            ValueError: ``features`` is not shaped like the first batch.
        """
        if self.features is None:
            self.batch_size, dim = features.shape
            size = self.size_in_batches * self.batch_size
            if self.placeholders:
                slot = torch.arange(size, device=features.device) // 2
                self.labels = -slot - 1
                self.features = torch.zeros(size, dim, dtype=features.dtype, device=features.device)
                coordinate = (slot % self.batch_size + 1).clamp(max=dim - 1)
                self.features[torch.arange(size, device=features.device), coordinate] = 1
            else:
                self.labels = torch.empty(size, dtype=torch.long, device=features.device)
                self.features = features.new_empty(size, dim)
        elif features.shape != (self.batch_size, self.features.shape[1]):
            raise ValueError(
                f"features: the memory bank takes batches of the first batch's shape "
                f"{(self.batch_size, self.features.shape[1])}, got {tuple(features.shape)}"
            )

    def push(self, features: Tensor, labels: Tensor) -> None:
        """Write a (prepared) batch, detached, over the oldest one."""
        if self.features is None or self.labels is None:
            raise RuntimeError("the memory bank must be prepared with a batch before a push")
        rows = slice(self.ptr, self.ptr + self.batch_size)
        self.features[rows] = features.detach()
        self.labels[rows] = labels
        self.ptr = (self.ptr + self.batch_size) % len(self.features)
        self.n_pushed += 1


__all__ = ["FeatureBank"]
