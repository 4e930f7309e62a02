"""Grad-CAM (Selvaraju et al., https://arxiv.org/abs/1610.02391) of a model's top output, at one conv layer.

The computation of ``pytorch-grad-cam``'s ``GradCAM`` with its default target (the highest output of each
row), as OML's ``ResnetExtractor.draw_gradcam`` uses it, without that dependency:

1. ``A``: the output ``[B, C, h, w]`` of ``layer`` when the model runs on ``x`` (in eval mode);
2. ``s_b = y[b, argmax_k y[b, k]]`` for the model's output ``y`` of shape ``[B, K]``;
3. ``alpha[b, c] = mean_{i, j} d s_b / d A[b, c, i, j]``;
4. ``cam[b] = relu(sum_c alpha[b, c] * A[b, c])``, resized to the input's ``H x W`` (bilinear, half-pixel
   centres: OpenCV's ``INTER_LINEAR``) and min-max scaled to ``[0, 1]``:
   ``(cam - min) / (max - min + 1e-7)``.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib import colormaps
from torch import Tensor, nn

#: Added to the range of a map before scaling it to ``[0, 1]`` (a map without positive evidence stays 0).
EPS = 1e-7


def _single_map(layer: nn.Module, activations: list[Tensor]) -> Tensor:
    """The one ``[B, C, h, w]`` output of ``layer`` recorded during the forward pass."""
    if len(activations) != 1 or activations[0].ndim != 4:
        found = [tuple(a.shape) for a in activations]
        raise ValueError(
            f"layer {type(layer).__name__} must be called once by the model and give a [B, C, h, w] map; "
            f"its outputs: {found}"
        )
    return activations[0]


def grad_cam(model: nn.Module, layer: nn.Module, x: Tensor) -> Tensor:
    """Grad-CAM maps ``[B, H, W]`` in ``[0, 1]`` of the inputs ``x`` ``[B, C, H, W]`` (see the module's doc).

    The model runs in eval mode (its mode is restored afterwards), so the rows of the batch are independent;
    the gradients are taken with respect to ``layer``'s activations only: no parameter's ``.grad`` changes.

    Raises:
        ValueError: ``x`` is not 4-D, ``layer`` is not called by ``model`` or does not give a 4-D tensor,
            or the model's output is not ``[B, K]``.
    """
    if x.ndim != 4:
        raise ValueError(f"x must be a [B, C, H, W] batch of images, got shape {tuple(x.shape)}")
    activations: list[Tensor] = []
    handle = layer.register_forward_hook(lambda _module, _inputs, output: activations.append(output))
    was_training = model.training
    model.eval()
    try:
        with torch.enable_grad():
            output = model(x.detach().requires_grad_(True))
            maps = _single_map(layer, activations)
            if output.ndim != 2:
                raise ValueError(
                    f"the model's output must be [B, K] to pick its top entry, got {tuple(output.shape)}"
                )
            top = output.gather(1, output.argmax(dim=1, keepdim=True))
            (grads,) = torch.autograd.grad(top.sum(), maps)
    finally:
        handle.remove()
        model.train(was_training)
    alpha = grads.mean(dim=(2, 3), keepdim=True)
    cam = (alpha * maps).sum(dim=1, keepdim=True).relu().detach()
    cam = F.interpolate(cam, size=tuple(x.shape[-2:]), mode="bilinear", align_corners=False)[:, 0]
    cam = cam - cam.amin(dim=(1, 2), keepdim=True)
    return cam / (cam.amax(dim=(1, 2), keepdim=True) + EPS)


def overlay_heatmap(image: np.ndarray, mask: np.ndarray, image_weight: float = 0.5) -> np.ndarray:
    """Blend the ``jet`` colouring of ``mask`` into ``image``, as ``pytorch-grad-cam``'s ``show_cam_on_image``
    (RGB colours): ``blend = (1 - image_weight) * jet(mask) + image_weight * image / 255``, scaled by its
    maximum and returned as ``uint8`` (``floor(255 * blend / max(blend))``).

    Args:
        image: An ``HxWx3`` uint8 RGB image.
        mask: An ``HxW`` map with values in ``[0, 1]`` (Grad-CAM's).
        image_weight: The image's share of the blend, in ``[0, 1]``.

    Raises:
        ValueError: shapes, dtype or ``image_weight`` out of these bounds.
    """
    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"image must be an HxWx3 uint8 array, got {image.dtype} {image.shape}")
    if mask.shape != image.shape[:2]:
        raise ValueError(f"mask must have the image's shape {image.shape[:2]}, got {mask.shape}")
    if not 0.0 <= image_weight <= 1.0:
        raise ValueError(f"image_weight must be in [0, 1], got {image_weight}")
    heat = colormaps["jet"](mask)[..., :3]
    blend = (1.0 - image_weight) * heat + image_weight * (image.astype(np.float64) / 255.0)
    return (255 * (blend / max(float(blend.max()), EPS))).astype(np.uint8)


__all__ = ["EPS", "grad_cam", "overlay_heatmap"]
