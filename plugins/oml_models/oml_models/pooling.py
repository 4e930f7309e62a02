"""Pooling layers for convolutional backbones."""

from __future__ import annotations

from torch import Tensor, nn


class GEM(nn.Module):
    """Generalized Mean (GeM) pooling over the spatial dimensions of a ``[B, C, H, W]`` feature map.

    ``GEM(p)(x)[b, c] = (mean_{h, w} clamp(x[b, c, h, w], min=eps) ** p) ** (1 / p)``, returned with the
    shape ``[B, C, 1, 1]`` so that it can replace ``nn.AdaptiveAvgPool2d((1, 1))``. ``p = 1`` is average
    pooling (of the clamped, hence positive, values) and ``p -> inf`` tends to max pooling.

    The power is computed on ``x / m`` with ``m`` the (detached) spatial maximum and the result multiplied
    back by ``m``: GeM is positively homogeneous, so value and gradient are the same, but a large ``p`` no
    longer overflows.

    Args:
        p: The power, a positive number.
        eps: Lower bound the inputs are clamped to before the power (keeps them positive).
    """

    def __init__(self, p: float, eps: float = 1e-6) -> None:
        super().__init__()
        if p <= 0:
            raise ValueError(f"GeM power p must be positive, got {p}")
        self.p = float(p)
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        """Pool ``x`` of shape ``[B, C, H, W]`` into ``[B, C, 1, 1]``."""
        if x.ndim != 4:
            raise ValueError(f"GEM expects a [B, C, H, W] tensor, got shape {tuple(x.shape)}")
        x = x.clamp(min=self.eps)
        scale = x.amax(dim=(-2, -1), keepdim=True).detach()
        pooled = (x / scale).pow(self.p).mean(dim=(-2, -1), keepdim=True).pow(1.0 / self.p)
        return pooled * scale

    def extra_repr(self) -> str:
        """``p=..., eps=...`` in the module's repr."""
        return f"p={self.p}, eps={self.eps}"


def gem_or_avg_pool(p: float | None) -> nn.Module:
    """GeM pooling with power ``p``, or plain ``nn.AdaptiveAvgPool2d((1, 1))`` when ``p`` is None or 1."""
    if p is None or p == 1:
        return nn.AdaptiveAvgPool2d((1, 1))
    return GEM(p=p)


__all__ = ["GEM", "gem_or_avg_pool"]
