"""The classic contrastive loss (Hadsell, Chopra, LeCun, 2006) over every pair of a batch."""

from __future__ import annotations

import torch
from torch import Tensor, nn


class ContrastiveLoss(nn.Module):
    """Contrastive loss over all ``N * (N - 1) / 2`` unordered pairs ``i < j`` of a batch of ``N`` items.

    ``loss = mean_{i<j} [ y_ij * d_ij^2 + (1 - y_ij) * relu(margin - d_ij)^2 ]`` with
    ``d_ij = ||f_i - f_j||_2`` and ``y_ij = 1`` when ``labels[i] == labels[j]`` else ``0``: positive pairs are
    pulled together, negative pairs pushed at least ``margin`` apart. A batch with fewer than two items
    has no pairs and gives ``0``.

    Args:
        margin: The distance beyond which negative pairs cost nothing.
    """

    def __init__(self, margin: float = 0.5) -> None:
        if margin < 0:
            raise ValueError(f"margin must be non-negative, got {margin}")
        super().__init__()
        self.margin = margin

    def forward(self, features: Tensor, labels: Tensor | list[int]) -> Tensor:
        """The mean contrastive loss of the pairs of ``features`` ``[N, D]`` with ``labels`` ``[N]``."""
        labels = torch.as_tensor(labels, device=features.device)
        if features.ndim != 2 or labels.shape != (features.shape[0],):
            raise ValueError(
                f"expected features [N, D] and N labels, got shapes {tuple(features.shape)} "
                f"and {tuple(labels.shape)}"
            )
        n = features.shape[0]
        if n < 2:
            return features.sum() * 0.0
        i, j = torch.triu_indices(n, n, offset=1, device=features.device)
        sq_dist = (features[i] - features[j]).pow(2).sum(dim=1)
        dist = sq_dist.clamp(min=1e-12).sqrt()  # the clamp keeps the gradient finite at d = 0
        same = (labels[i] == labels[j]).to(features.dtype)
        losses = same * sq_dist + (1 - same) * torch.relu(self.margin - dist).pow(2)
        return losses.mean()

    def extra_repr(self) -> str:
        """``margin=...`` in the module's repr."""
        return f"margin={self.margin}"
