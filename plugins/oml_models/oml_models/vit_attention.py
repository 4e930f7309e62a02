"""The self-attention of a vision transformer's last block, and its drawing over an image (OML's
``ViTExtractor.draw_attention``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor

from oml_core.builtins.transforms import IMAGENET_MEAN, IMAGENET_STD
from oml_core.utils.images import to_rgb8
from oml_models.gradcam import overlay_heatmap

if TYPE_CHECKING:
    from timm.models.vision_transformer import VisionTransformer

#: The maximum of the drawn attention map (OML's ``0.6 * a / a.max()``).
HEATMAP_SCALE = 0.6


def last_block_attention(model: VisionTransformer, x: Tensor) -> Tensor:
    """The attention weights of the last transformer block of ``model`` for the images ``x``.

    Args:
        model: A timm VisionTransformer (with the standard ``Attention``: ``qkv``, ``q_norm``, ``k_norm``).
        x: Images ``[B, 3, H, W]``.

    Returns:
        ``[B, heads, T, T]``: ``softmax(q k^T * scale)`` over the keys (every row sums to 1), the tokens
        being the prefix tokens (CLS, then registers) followed by the patches, row-major.
    """
    captured: list[Tensor] = []
    block = model.blocks[-1]
    handle = block.register_forward_pre_hook(lambda _module, args: captured.append(args[0]))
    try:
        model.forward_features(x)
    finally:
        handle.remove()
    attn = block.attn
    tokens = block.norm1(captured[0])
    batch, num_tokens, _ = tokens.shape
    qkv = attn.qkv(tokens).reshape(batch, num_tokens, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    q, k = attn.q_norm(qkv[0]), attn.k_norm(qkv[1])
    return ((q * attn.scale) @ k.transpose(-2, -1)).softmax(dim=-1)


def cls_attention_map(model: VisionTransformer, x: Tensor) -> Tensor:
    """The attention of the CLS token of the last block over the patches: ``[B, heads, rows, cols]`` for
    a grid of ``rows x cols`` patches (the prefix tokens' share is left out, so a head's map sums to 1 minus
    the CLS token's attention to itself and to the registers)."""
    patch = model.patch_embed.patch_size
    grid = (x.shape[-2] // patch[0], x.shape[-1] // patch[1])
    attention = last_block_attention(model, x)[:, :, 0, model.num_prefix_tokens :]
    return attention.reshape(*attention.shape[:2], *grid)


def image_to_array(image: Image.Image | np.ndarray) -> np.ndarray:
    """``image`` as a float array ``[H, W, 3]`` of pixel values in ``[0, 255]``.

    Raises:
        TypeError: ``image`` is neither a PIL image nor a numpy array.
        ValueError: the array is not ``[H, W, 3]``.
    """
    if isinstance(image, Image.Image):
        return np.asarray(to_rgb8(image), dtype=np.float32)
    if not isinstance(image, np.ndarray):
        raise TypeError(f"image must be a PIL image or a numpy array, got {type(image).__name__}")
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"image must be an RGB array [H, W, 3] with values in [0, 255], got {image.shape}")
    return image.astype(np.float32)


def draw_attention(
    model: VisionTransformer,
    image: Image.Image | np.ndarray,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> np.ndarray | Image.Image:
    """The CLS attention of ``model``'s last block drawn over ``image`` (OML's ``vis_vit``).

    The image (pixel values in ``[0, 255]``) is scaled to ``[0, 1]`` and normalised with ``mean`` and
    ``std``, and passed through ``model`` (which crops it to whole patches) in eval mode without gradients
    (its mode is restored). The CLS token's attention over the patches, averaged over the heads,
    is upsampled (nearest) to the image's size, scaled to ``0.6 * a / a.max()`` and drawn with the jet
    colour map over the image stretched to a maximum of 255 (OML's ``image / image.max()``), half and half
    (:func:`oml_models.gradcam.overlay_heatmap`).

    Returns:
        The drawing, of the size and type of ``image`` (as OML's): a ``uint8 [H, W, 3]`` array for an array,
        an RGB PIL image of those pixels for a PIL image.

    Raises:
        TypeError, ValueError: ``image`` is not an RGB image (:func:`image_to_array`), or is smaller than a
            patch.
    """
    array = image_to_array(image)
    patch = model.patch_embed.patch_size
    height, width = array.shape[:2]
    if height < patch[0] or width < patch[1]:
        raise ValueError(f"image of {height}x{width} pixels is smaller than a patch of {patch[0]}x{patch[1]}")
    tensor = torch.from_numpy(array / 255.0).float().permute(2, 0, 1)
    tensor = ((tensor - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1)).unsqueeze(0)
    with _eval_mode(model), torch.no_grad():
        heads = cls_attention_map(model, tensor.to(next(model.parameters()).device))
    attention = F.interpolate(heads.mean(dim=1, keepdim=True).float().cpu(), size=(height, width))[0, 0]
    heat = (HEATMAP_SCALE * attention / attention.max()).numpy()
    stretched = np.clip(np.rint(array * (255.0 / max(float(array.max()), 1e-12))), 0, 255).astype(np.uint8)
    drawn = overlay_heatmap(stretched, heat)
    return Image.fromarray(drawn) if isinstance(image, Image.Image) else drawn


@contextmanager
def _eval_mode(module: torch.nn.Module) -> Iterator[None]:
    """``module`` in eval mode inside the block, its former mode restored on exit."""
    was_training = module.training
    module.eval()
    try:
        yield
    finally:
        module.train(was_training)


__all__ = [
    "HEATMAP_SCALE",
    "cls_attention_map",
    "draw_attention",
    "image_to_array",
    "last_block_attention",
]
