"""Keep-aspect-ratio resizing ("karesize") of images and bounding boxes, and its inverse (OML's
``oml.utils.images.images_resize``).

``karesize_image(image, new_hw)`` scales the image by ``s = min(new_h / h, new_w / w)`` to
``(int(s h), int(s w))`` and pads it with zeros to ``new_hw``, centred: ``pad_left = (new_w - int(s w)) // 2``,
``pad_top = (new_h - int(s h)) // 2``, the odd pixel of a margin on the right or the bottom
(:func:`get_karesize_param`). A box ``[x1, y1, x2, y2]`` of the source image is then
``[s x1 + pad_left, s y1 + pad_top, s x2 + pad_left, s y2 + pad_top]`` (:func:`karesize_bboxes`); the inverses
undo both (:func:`inverse_karesize_image` crops the padding and resizes back, so it is exact up to the
interpolation; :func:`inverse_karesize_bboxes` is exact).

Images are numpy arrays (``HxW`` or ``HxWxC``) or tensors (``HxW``, ``CxHxW``, ``BxCxHxW``), resized bicubically
by torch (no OpenCV): a tensor as OML's (``align_corners=True``), an array with pixel centres as OpenCV's
``INTER_CUBIC`` that OML uses for arrays (``align_corners=False``). Tensors stay on their device and keep their
gradients. The result keeps the input's dtype: the interpolation's overshoot is clipped to the input's range,
integers are rounded, a boolean mask is thresholded at one half.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from oml_core.utils.errors import OmlTypeError, OmlValueError

#: ``(height, width)`` of an image.
SizeHW = tuple[int, int]
#: ``N x 4`` boxes ``[[x1, y1, x2, y2], ...]`` (left, top, right, bottom).
BboxesType = torch.Tensor | np.ndarray
#: An array ``HxW`` / ``HxWxC`` or a tensor ``HxW`` / ``CxHxW`` / ``BxCxHxW``.
ImageType = torch.Tensor | np.ndarray


def get_image_hw(image: ImageType) -> SizeHW:
    """``(height, width)`` of an array (its first two axes) or a tensor (its last two).

    Raises:
        OmlTypeError: ``image`` is neither a numpy array nor a tensor.
    """
    if isinstance(image, np.ndarray):
        return int(image.shape[0]), int(image.shape[1])
    if isinstance(image, torch.Tensor):
        return int(image.shape[-2]), int(image.shape[-1])
    raise OmlTypeError(f"expected a numpy array or a torch tensor as the image, got {type(image).__name__}")


def get_karesize_param(src_hw: SizeHW, new_hw: SizeHW) -> tuple[float, SizeHW, list[int]]:
    """``(scale, resized_hw, [pad_left, pad_right, pad_top, pad_bottom])`` of fitting ``src_hw`` into ``new_hw``
    (see the module's docstring)."""
    scale = min(new_hw[0] / src_hw[0], new_hw[1] / src_hw[1])
    resized_hw = (int(scale * src_hw[0]), int(scale * src_hw[1]))
    pad_left = (new_hw[1] - resized_hw[1]) // 2
    pad_top = (new_hw[0] - resized_hw[0]) // 2
    pad_right = new_hw[1] - resized_hw[1] - pad_left
    pad_bottom = new_hw[0] - resized_hw[0] - pad_top
    return scale, resized_hw, [pad_left, pad_right, pad_top, pad_bottom]


def _resize_bchw(pixels: torch.Tensor, new_size_hw: SizeHW, align_corners: bool) -> torch.Tensor:
    """Bicubic resize of a ``BxCxHxW`` tensor to ``new_size_hw``, clipped to its own range and cast back to its
    dtype (integers rounded, booleans thresholded at 0.5)."""
    dtype = pixels.dtype
    source = pixels.float() if not pixels.is_floating_point() else pixels
    resized = F.interpolate(source, size=tuple(new_size_hw), mode="bicubic", align_corners=align_corners)
    resized = resized.clamp(source.min().item(), source.max().item())
    if dtype == torch.bool:
        return resized >= 0.5
    if not dtype.is_floating_point:
        resized = resized.round()
    return resized.to(dtype)


def resize_tensor(tensor: torch.Tensor, new_size_hw: SizeHW) -> torch.Tensor:
    """``tensor`` (``HxW``, ``CxHxW`` or ``BxCxHxW``) resized to ``new_size_hw`` (bicubic, ``align_corners=True``
    as OML's; see the module's docstring for the dtype).

    Raises:
        OmlTypeError: ``tensor`` is not a tensor.
        OmlValueError: it has fewer than 2 or more than 4 dimensions.
    """
    if not isinstance(tensor, torch.Tensor):
        raise OmlTypeError(f"resize_tensor expects a torch tensor, got {type(tensor).__name__}")
    if not 2 <= tensor.ndim <= 4:
        raise OmlValueError(
            f"resize_tensor expects an HxW, CxHxW or BxCxHxW tensor, got the shape {tuple(tensor.shape)}"
        )
    missing = 4 - tensor.ndim
    resized = _resize_bchw(tensor[(None,) * missing], new_size_hw, align_corners=True)
    return resized[(0,) * missing]


def resize_ndarray(array: np.ndarray, new_size_hw: SizeHW) -> np.ndarray:
    """``array`` (``HxW`` or ``HxWxC``) resized to ``new_size_hw`` (bicubic with OpenCV's pixel centres; see the
    module's docstring for the dtype).

    Raises:
        OmlTypeError: ``array`` is not a numpy array.
        OmlValueError: it has fewer than 2 or more than 3 dimensions.
    """
    if not isinstance(array, np.ndarray):
        raise OmlTypeError(f"resize_ndarray expects a numpy array, got {type(array).__name__}")
    if not 2 <= array.ndim <= 3:
        raise OmlValueError(f"resize_ndarray expects an HxW or HxWxC array, got the shape {array.shape}")
    channels_first = torch.from_numpy(np.ascontiguousarray(array[..., None] if array.ndim == 2 else array))
    resized = _resize_bchw(channels_first.permute(2, 0, 1)[None], new_size_hw, align_corners=False)
    result = resized[0].permute(1, 2, 0).numpy()
    return result[..., 0] if array.ndim == 2 else result


def _check_image(image: ImageType) -> None:
    if not isinstance(image, (np.ndarray, torch.Tensor)):
        raise OmlTypeError(
            f"expected a numpy array or a torch tensor as the image, got {type(image).__name__}"
        )


def karesize_image(image: ImageType, new_hw: SizeHW) -> ImageType:
    """``image`` resized to ``new_hw`` keeping its aspect ratio, padded with zeros (see the module's docstring);
    the image itself when it already has that size.

    Raises:
        OmlTypeError: ``image`` is neither a numpy array nor a tensor.
        OmlValueError: it has a number of dimensions the resize does not take.
    """
    _check_image(image)
    src_hw = get_image_hw(image)
    if tuple(new_hw) == src_hw:
        return image
    _, resized_hw, (pad_left, pad_right, pad_top, pad_bottom) = get_karesize_param(src_hw, new_hw)
    if isinstance(image, torch.Tensor):
        return F.pad(resize_tensor(image, resized_hw), [pad_left, pad_right, pad_top, pad_bottom])
    padding = [(pad_top, pad_bottom), (pad_left, pad_right)] + [(0, 0)] * (image.ndim - 2)
    return np.pad(resize_ndarray(image, resized_hw), padding)


def inverse_karesize_image(image: ImageType, src_hw: SizeHW) -> ImageType:
    """The inverse of :func:`karesize_image`: the padding of ``image`` (made from a ``src_hw`` image) cropped off
    and the rest resized to ``src_hw``; the image itself when it already has that size.

    Raises:
        OmlTypeError: ``image`` is neither a numpy array nor a tensor.
        OmlValueError: it has a number of dimensions the resize does not take.
    """
    _check_image(image)
    current_hw = get_image_hw(image)
    if tuple(src_hw) == current_hw:
        return image
    _, (height, width), (pad_left, _, pad_top, _) = get_karesize_param(src_hw, current_hw)
    if isinstance(image, torch.Tensor):
        return resize_tensor(image[..., pad_top : pad_top + height, pad_left : pad_left + width], src_hw)
    return resize_ndarray(image[pad_top : pad_top + height, pad_left : pad_left + width], src_hw)


def _check_bboxes(bboxes: BboxesType) -> None:
    if not isinstance(bboxes, (np.ndarray, torch.Tensor)):
        raise OmlTypeError(
            f"expected the boxes as a numpy array or a torch tensor, got {type(bboxes).__name__}"
        )
    if bboxes.ndim != 2 or bboxes.shape[1] != 4:
        raise OmlValueError(f"expected N x 4 boxes [x1, y1, x2, y2], got the shape {tuple(bboxes.shape)}")


def _offsets(bboxes: BboxesType, pad_left: int, pad_top: int) -> BboxesType:
    """``[[pad_left, pad_top, pad_left, pad_top]]`` of the boxes' kind (and device)."""
    offsets = [[pad_left, pad_top, pad_left, pad_top]]
    if isinstance(bboxes, torch.Tensor):
        return torch.tensor(offsets, device=bboxes.device)
    return np.array(offsets)


def karesize_bboxes(src_bboxes: BboxesType, src_hw: SizeHW, new_hw: SizeHW) -> BboxesType:
    """The boxes of a ``src_hw`` image on that image karesized to ``new_hw``: ``s b + [pad_left, pad_top,
    pad_left, pad_top]`` (a new array or tensor, float; see the module's docstring).

    Raises:
        OmlTypeError: the boxes are neither a numpy array nor a tensor.
        OmlValueError: they are not ``N x 4``.
    """
    _check_bboxes(src_bboxes)
    scale, _, (pad_left, _, pad_top, _) = get_karesize_param(src_hw, new_hw)
    return src_bboxes * scale + _offsets(src_bboxes, pad_left, pad_top)


def inverse_karesize_bboxes(cur_bboxes: BboxesType, curr_hw: SizeHW, src_hw: SizeHW) -> BboxesType:
    """The inverse of :func:`karesize_bboxes`: boxes on a ``curr_hw`` image karesized from ``src_hw``, back on the
    ``src_hw`` image: ``(b - [pad_left, pad_top, pad_left, pad_top]) / s``.

    Raises:
        OmlTypeError: the boxes are neither a numpy array nor a tensor.
        OmlValueError: they are not ``N x 4``.
    """
    _check_bboxes(cur_bboxes)
    scale, _, (pad_left, _, pad_top, _) = get_karesize_param(src_hw, curr_hw)
    return (cur_bboxes - _offsets(cur_bboxes, pad_left, pad_top)) / scale


__all__ = [
    "BboxesType",
    "ImageType",
    "SizeHW",
    "get_image_hw",
    "get_karesize_param",
    "inverse_karesize_bboxes",
    "inverse_karesize_image",
    "karesize_bboxes",
    "karesize_image",
    "resize_ndarray",
    "resize_tensor",
]
