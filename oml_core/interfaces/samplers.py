"""Batch-sampler interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator


class IBatchSampler(ABC):
    """A sampler yielding whole batches of dataset indices (``DataLoader(batch_sampler=...)``).

    We introduce our interface instead of using the default ``BatchSampler`` from Torch, because the
    latter is just a wrapper for a sequential sampler, which is not convenient for our purposes.
    ``len()`` must equal the number of batches actually yielded in an epoch.
    """

    @abstractmethod
    def __len__(self) -> int:
        """The number of batches in an epoch."""

    @abstractmethod
    def __iter__(self) -> Iterator[list[int]]:
        """Iterate over the batches of an epoch, each a list of dataset indices."""
