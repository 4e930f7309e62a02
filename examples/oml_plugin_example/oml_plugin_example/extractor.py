"""A tiny convolutional extractor: a custom model written against ``oml_core``'s interface only."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from oml_core.interfaces.models import IExtractor


class TinyConvExtractor(IExtractor):
    """Two strided 3x3 convolutions, global average pooling and a linear projection.

    ``forward(x)``: ``[B, 3, H, W]`` (any ``H, W >= 1``) -> ``[B, feat_dim]``, computed as
    ``linear(mean_{h,w} relu(conv2(relu(conv1(x)))))``, L2-normalised along the last dimension when
    ``normalise_features``.

    Args:
        feat_dim: Size of the embeddings.
        normalise_features: L2-normalise the embeddings.
    """

    def __init__(self, feat_dim: int = 32, normalise_features: bool = True) -> None:
        if feat_dim < 1:
            raise ValueError(f"feat_dim must be a positive integer, got {feat_dim}")
        super().__init__()
        self._feat_dim = feat_dim
        self.normalise_features = normalise_features
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, stride=2, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, kernel_size=3, stride=2, padding=1),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.head = nn.Linear(32, feat_dim)

    def forward(self, x: Tensor) -> Tensor:
        """Embeddings ``[B, feat_dim]`` of the images ``x`` of shape ``[B, 3, H, W]``."""
        x = self.head(self.backbone(x))
        if self.normalise_features:
            x = F.normalize(x, p=2, dim=1)
        return x

    @property
    def feat_dim(self) -> int:
        """Size of the embeddings."""
        return self._feat_dim
