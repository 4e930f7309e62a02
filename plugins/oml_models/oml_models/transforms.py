"""OML's torchvision image transforms (registered as ``norm_resize_torch``, ``augs_torch`` ...), on PIL images.

Every factory returns a ``torchvision.transforms.Compose`` that maps a PIL image (or an ``HxWx3`` uint8 array)
to a normalised float tensor ``[3, H, W]``: ``(pixel / 255 - mean[c]) / std[c]``. The random ones draw from
torch's global generator, so ``torch.manual_seed`` makes them reproducible.

``get_transforms_for_pretrained`` (the transforms and image reader of a zoo checkpoint) lives in
:mod:`oml_core.zoo` and is re-exported here, where OML users look for it next to the transforms.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import torchvision.transforms as t
from PIL import Image
from torchvision.transforms import InterpolationMode

from oml_core.builtins.transforms import IMAGENET_MEAN, IMAGENET_STD
from oml_core.utils.images import TImReader, imread_cv2, imread_pil
from oml_core.zoo import get_transforms_for_pretrained
from oml_models.normalisation import CLIP_MEAN, CLIP_STD, PAD_COLOR

#: Image transforms: a callable from an image to the model's input (OML's ``TTransforms``: a torchvision or an
#: albumentations ``Compose``).
TTransforms = Callable[[Any], Any]


def get_im_reader_for_transforms(transforms: TTransforms | None) -> TImReader:
    """The image reader that goes with ``transforms`` (OML's ``oml.transforms.images.utils``): OpenCV's
    :func:`~oml_core.utils.images.imread_cv2` for an albumentations ``Compose`` (as OML pairs them; it needs
    ``oml-models[cv2]``), else :func:`~oml_core.utils.images.imread_pil`. OML gives ``imread_cv2`` for anything
    but a torchvision ``Compose``; here other transforms (and ``None``) get the datasets' default reader."""
    albumentations = sys.modules.get(
        "albumentations"
    )  # an albumentations Compose exists only once it is imported
    if albumentations is not None and isinstance(transforms, albumentations.BaseCompose):
        return imread_cv2
    return imread_pil


def _check_size(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


def _to_normalised_tensor(mean: Sequence[float], std: Sequence[float]) -> list[object]:
    """``ToTensor`` (``[0, 255]`` to ``[0, 1]``, HWC to CHW) then ``Normalize(mean, std)``."""
    return [t.ToTensor(), t.Normalize(mean=mean, std=std)]


def get_normalisation_torch(
    mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD
) -> t.Compose:
    """``ToTensor`` + ``Normalize``: the image keeps its size (registered as ``norm_torch``)."""
    return t.Compose(_to_normalised_tensor(mean, std))


def get_normalisation_resize_torch(
    im_size: int, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD
) -> t.Compose:
    """``Resize((im_size, im_size))`` (bilinear, antialiased) + ``ToTensor`` + ``Normalize``: the validation
    transform of OML (registered as ``norm_resize_torch``); the aspect ratio is not kept.

    Raises:
        ValueError: ``im_size`` is not a positive int.
    """
    _check_size("im_size", im_size)
    return t.Compose([t.Resize(size=(im_size, im_size), antialias=True), *_to_normalised_tensor(mean, std)])


def get_augs_torch(
    im_size: int, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD
) -> t.Compose:
    """OML's training augmentations (registered as ``augs_torch``): ``Resize((im_size, im_size))``,
    ``RandomHorizontalFlip()`` (p = 0.5), ``ColorJitter()`` (OML's, with its default arguments: no change of
    colour), ``ToTensor``, ``Normalize``.

    Raises:
        ValueError: ``im_size`` is not a positive int.
    """
    _check_size("im_size", im_size)
    return t.Compose(
        [
            t.Resize(size=(im_size, im_size), antialias=True),
            t.RandomHorizontalFlip(),
            t.ColorJitter(),
            *_to_normalised_tensor(mean, std),
        ]
    )


def get_augs_hypvit(
    im_size: int = 224,
    min_scale: float = 0.2,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> t.Compose:
    """The training augmentations of Hyp-ViT (registered as ``augs_hypvit_torch``): ``RandomResizedCrop``
    to ``im_size`` of a ``[min_scale, 1]`` share of the area (bicubic), ``RandomHorizontalFlip()``,
    ``ToTensor``, ``Normalize``.

    Raises:
        ValueError: ``im_size`` is not a positive int, or ``min_scale`` is not in ``(0, 1]``.
    """
    _check_size("im_size", im_size)
    if not 0 < min_scale <= 1:
        raise ValueError(f"min_scale must be in (0, 1], got {min_scale!r}")
    return t.Compose(
        [
            t.RandomResizedCrop(im_size, scale=(min_scale, 1.0), interpolation=InterpolationMode.BICUBIC),
            t.RandomHorizontalFlip(),
            *_to_normalised_tensor(mean, std),
        ]
    )


def get_normalisation_resize_hypvit(
    im_size: int = 224,
    crop_size: int = 224,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> t.Compose:
    """The ImageNet evaluation transform (registered as ``norm_resize_hypvit_torch``): ``Resize(im_size)`` of
    the shorter side (bicubic, aspect ratio kept), ``CenterCrop(crop_size)``, ``ToTensor``, ``Normalize``.

    Raises:
        ValueError: ``im_size`` or ``crop_size`` is not a positive int.
    """
    _check_size("im_size", im_size)
    _check_size("crop_size", crop_size)
    return t.Compose(
        [
            t.Resize(im_size, interpolation=InterpolationMode.BICUBIC),
            t.CenterCrop(crop_size),
            *_to_normalised_tensor(mean, std),
        ]
    )


class LongestMaxSize:
    """Resize a PIL image so that its longer side is ``max_size`` (bilinear, aspect ratio kept)."""

    def __init__(self, max_size: int) -> None:
        _check_size("max_size", max_size)
        self.max_size = max_size

    def __call__(self, image: Image.Image) -> Image.Image:
        width, height = image.size
        scale = self.max_size / max(width, height)
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        return image.resize(size, Image.Resampling.BILINEAR)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_size={self.max_size})"


class PadToSquare:
    """Pad a PIL image to ``size x size`` with ``fill``, the image in the centre (the smaller margin first,
    as albumentations' ``PadIfNeeded``); an image already that large is left as it is."""

    def __init__(self, size: int, fill: tuple[int, int, int] = PAD_COLOR) -> None:
        _check_size("size", size)
        self.size, self.fill = size, tuple(fill)

    def __call__(self, image: Image.Image) -> Image.Image:
        width, height = image.size
        if width >= self.size and height >= self.size:
            return image
        canvas = Image.new(image.mode, (max(width, self.size), max(height, self.size)), self.fill)
        canvas.paste(image, ((canvas.width - width) // 2, (canvas.height - height) // 2))
        return canvas

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self.size}, fill={self.fill})"


def get_normalisation_resize_pad(
    im_size: int, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD
) -> t.Compose:
    """Keep the aspect ratio: the longer side resized to ``im_size``, then padded with white to a square
    ``im_size x im_size`` (OML's ``norm_resize_albu``, here on PIL images without albumentations), then
    ``ToTensor`` and ``Normalize``.

    Raises:
        ValueError: ``im_size`` is not a positive int.
    """
    return t.Compose([LongestMaxSize(im_size), PadToSquare(im_size), *_to_normalised_tensor(mean, std)])


def get_normalisation_resize_pad_clip(im_size: int) -> t.Compose:
    """:func:`get_normalisation_resize_pad` with CLIP's mean and std (OML's ``norm_resize_albu_clip``, the
    transforms of the CLIP checkpoints)."""
    return get_normalisation_resize_pad(im_size, mean=CLIP_MEAN, std=CLIP_STD)


def get_unicom_transforms(im_size: int = 224) -> t.Compose:
    """The preprocessing of the Unicom checkpoints (deepglint's ``transform``, registered as
    ``unicom_transforms``): :func:`get_normalisation_resize_hypvit` with ``crop_size = im_size`` and CLIP's mean
    and std.

    Raises:
        ValueError: ``im_size`` is not a positive int.
    """
    return get_normalisation_resize_hypvit(im_size, crop_size=im_size, mean=CLIP_MEAN, std=CLIP_STD)


__all__ = [
    "CLIP_MEAN",
    "CLIP_STD",
    "LongestMaxSize",
    "PAD_COLOR",
    "PadToSquare",
    "TTransforms",
    "get_normalisation_resize_pad",
    "get_normalisation_resize_pad_clip",
    "get_augs_hypvit",
    "get_augs_torch",
    "get_im_reader_for_transforms",
    "get_normalisation_resize_hypvit",
    "get_normalisation_resize_torch",
    "get_normalisation_torch",
    "get_transforms_for_pretrained",
    "get_unicom_transforms",
]
