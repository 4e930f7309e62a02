"""Loss interfaces."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from torch import Tensor, nn


class ITripletLossWithMiner(nn.Module):
    """Base class for TripletLoss combined with Miner.

    ``last_logs`` holds the statistics of the last forward pass (filled when ``need_logs`` is set).
    """

    last_logs: dict[str, Any]

    @abstractmethod
    def forward(self, features: Tensor, labels: Tensor | list[int]) -> Tensor:
        """Return the loss of ``features`` ``[batch_size, features_dim]`` given ``labels`` ``[batch_size]``."""
