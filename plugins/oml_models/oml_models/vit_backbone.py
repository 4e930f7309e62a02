"""The DINO / DINOv2 vision transformers of :class:`~oml_models.vit.ViTExtractor`, on timm's VisionTransformer.

Each arch of :data:`VIT_ARCHS` mirrors a timm arch (same layers, same parameter names and shapes) and the
original facebookresearch release it was trained as: DINO (ViT-S/B with patches of 8 or 16, 224 px) and
DINOv2 (ViT-S/B/L with patches of 14, 518 px, layer scale, optionally 4 register tokens).

Any input size is accepted (``dynamic_img_size``): the position embedding is interpolated to the patch grid
of the input the way the original release does it, so a checkpoint gives the embeddings it gives upstream:

- DINO and DINOv2 without registers: bicubic, no antialiasing, with the scale factor
  ``(grid + 0.1) / native_grid`` per side (the ``interpolate_offset`` of 0.1 of both code bases);
- DINOv2 with registers: bicubic with antialiasing to the exact grid size (``interpolate_offset=0``), which is
  timm's own resampling.

The position embedding is used as stored when the grid is the native one. Pixels that do not fill a whole
patch at the right or bottom edge are ignored, as by the original patch embedding's strided convolution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from oml_models.extras import requires_extra

with requires_extra("timm", "the extractor 'vit'"):
    from timm.models.vision_transformer import VisionTransformer


@dataclass(frozen=True)
class ViTArch:
    """The hyper-parameters of one arch.

    Attributes:
        timm_name: The timm arch with the same layers (``timm.create_model(timm_name)``): the reference.
        patch_size: Side of the square patches, in pixels.
        embed_dim: Width of the tokens: the size of the embeddings.
        depth: Number of transformer blocks.
        num_heads: Attention heads per block.
        img_size: The native input size (the grid of the stored position embedding is ``img_size // patch``).
        init_values: Initial value of the layer-scale factors (``None``: no layer scale, as DINO);
            DINOv2's releases are built with 1.0.
        reg_tokens: Number of register tokens (DINOv2 "with registers": 4).
        interpolate_offset: Offset of the original position-embedding interpolation (see the module's doc);
            ``None`` for the size-based antialiased interpolation of DINOv2 with registers.
    """

    timm_name: str
    patch_size: int
    embed_dim: int
    depth: int
    num_heads: int
    img_size: int
    init_values: float | None = None
    reg_tokens: int = 0
    interpolate_offset: float | None = 0.1


def _dino(timm_name: str, patch_size: int, embed_dim: int, num_heads: int) -> ViTArch:
    return ViTArch(timm_name, patch_size, embed_dim, depth=12, num_heads=num_heads, img_size=224)


def _dinov2(timm_name: str, embed_dim: int, depth: int, num_heads: int, registers: bool) -> ViTArch:
    return ViTArch(
        timm_name,
        patch_size=14,
        embed_dim=embed_dim,
        depth=depth,
        num_heads=num_heads,
        img_size=518,
        init_values=1.0,
        reg_tokens=4 if registers else 0,
        interpolate_offset=None if registers else 0.1,
    )


#: The archs of :class:`~oml_models.vit.ViTExtractor`, by OML's names.
VIT_ARCHS: dict[str, ViTArch] = {
    "vits8": _dino("vit_small_patch8_224", 8, 384, 6),
    "vits16": _dino("vit_small_patch16_224", 16, 384, 6),
    "vitb8": _dino("vit_base_patch8_224", 8, 768, 12),
    "vitb16": _dino("vit_base_patch16_224", 16, 768, 12),
    "vits14": _dinov2("vit_small_patch14_dinov2", 384, 12, 6, registers=False),
    "vitb14": _dinov2("vit_base_patch14_dinov2", 768, 12, 12, registers=False),
    "vitl14": _dinov2("vit_large_patch14_dinov2", 1024, 24, 16, registers=False),
    "vits14_reg": _dinov2("vit_small_patch14_reg4_dinov2", 384, 12, 6, registers=True),
    "vitb14_reg": _dinov2("vit_base_patch14_reg4_dinov2", 768, 12, 12, registers=True),
    "vitl14_reg": _dinov2("vit_large_patch14_reg4_dinov2", 1024, 24, 16, registers=True),
}


def interpolate_pos_embed_with_offset(
    patch_pos_embed: Tensor, grid: tuple[int, int], offset: float
) -> Tensor:
    """The original DINO / DINOv2 resampling of a square grid of position embeddings.

    Args:
        patch_pos_embed: ``[1, M * M, C]``, the embeddings of an ``M x M`` grid, row-major.
        grid: ``(rows, cols)`` of the grid to produce.
        offset: Added to each side of ``grid`` before the scale factor is computed.

    Returns:
        ``[1, rows * cols, C]``: ``F.interpolate`` (bicubic, no antialiasing) with the scale factors
        ``((rows + offset) / M, (cols + offset) / M)``.
    """
    num, dim = patch_pos_embed.shape[1:]
    side = int(round(num**0.5))
    if side * side != num:
        raise ValueError(f"patch_pos_embed must hold a square grid of embeddings, got {num} of them")
    square = patch_pos_embed.float().reshape(1, side, side, dim).permute(0, 3, 1, 2)
    scale = ((grid[0] + offset) / side, (grid[1] + offset) / side)
    resized = F.interpolate(square, scale_factor=scale, mode="bicubic", antialias=False)
    if tuple(resized.shape[-2:]) != tuple(grid):
        raise ValueError(
            f"offset {offset} resamples the {side}x{side} grid to {resized.shape[-2:]}, not {grid}"
        )
    return resized.permute(0, 2, 3, 1).reshape(1, -1, dim).to(patch_pos_embed.dtype)


class DinoVisionTransformer(VisionTransformer):
    """timm's VisionTransformer of the arch ``arch`` with the original position-embedding interpolation.

    ``forward(x)`` gives the CLS token after the final norm ``[B, embed_dim]`` (no head): the DINO / DINOv2
    image embedding. Built with random weights; nothing is downloaded.
    """

    def __init__(self, arch: ViTArch) -> None:
        super().__init__(
            img_size=arch.img_size,
            patch_size=arch.patch_size,
            embed_dim=arch.embed_dim,
            depth=arch.depth,
            num_heads=arch.num_heads,
            init_values=arch.init_values,
            reg_tokens=arch.reg_tokens,
            no_embed_class=arch.reg_tokens > 0,
            num_classes=0,
            global_pool="token",
            dynamic_img_size=True,
        )
        self.arch = arch

    def forward_features(self, x: Tensor, **kwargs: Any) -> Tensor:
        """The normed tokens ``[B, T, C]`` of the images ``x`` ``[B, 3, H, W]``, cropped first (top-left) to
        whole patches (timm refuses a size that is not a multiple of the patch; DINO's convolution drops
        the rest)."""
        patch_h, patch_w = self.patch_embed.patch_size
        height, width = x.shape[-2:]
        return super().forward_features(
            x[..., : height - height % patch_h, : width - width % patch_w], **kwargs
        )

    def _pos_embed(self, x: Tensor) -> Tensor:
        """Add the position embedding to the patch tokens ``x`` (``[B, rows, cols, C]``) and prepend the
        CLS (and register) tokens."""
        offset = self.arch.interpolate_offset
        grid = tuple(x.shape[1:3])
        if offset is None or grid == tuple(self.patch_embed.grid_size):
            return super()._pos_embed(x)
        # DINO / DINOv2 without registers: one position embedding for the CLS token, then the patches'
        patch_pos = interpolate_pos_embed_with_offset(self.pos_embed[:, 1:], grid, offset)
        pos_embed = torch.cat([self.pos_embed[:, :1], patch_pos], dim=1)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        tokens = torch.cat([cls, x.reshape(x.shape[0], -1, x.shape[-1])], dim=1)
        return self.pos_drop(tokens + pos_embed)
