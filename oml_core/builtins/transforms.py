"""Basic image transforms that need only PIL, numpy and torch (no torchvision).

The torchvision/albumentations transforms of OML (``norm_resize_torch``, ``augs_torch`` ...) are provided
by the ``oml-models`` plugin; these keep the core usable on its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image

from oml_core.utils.images import to_rgb8

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _to_pil(image: Image.Image | np.ndarray) -> Image.Image:
    if isinstance(image, Image.Image):
        return to_rgb8(image)
    if isinstance(image, np.ndarray) and image.ndim == 3 and image.shape[2] == 3 and image.dtype == np.uint8:
        return Image.fromarray(image)
    raise TypeError(
        f"expected a PIL image or an HxWx3 uint8 array, got {type(image).__name__} "
        f"{getattr(image, 'shape', '')} {getattr(image, 'dtype', '')}"
    )


class NormaliseResize:
    """Resize to ``(im_size, im_size)`` (bilinear, as ``torchvision.transforms.Resize`` on PIL images), scale
    to ``[0, 1]`` and normalise per channel: ``out[c] = (pixel / 255 - mean[c]) / std[c]``.

    Returns a float tensor ``[3, im_size, im_size]``.
    """

    #: How the image is resized (PIL's bilinear filter), as ``oml export`` describes the preprocessing.
    interpolation = "bilinear"

    def __init__(
        self, im_size: int, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD
    ):
        if im_size <= 0:
            raise ValueError(f"im_size must be positive, got {im_size}")
        self.im_size = im_size
        self.mean = torch.tensor(mean, dtype=torch.float32).view(3, 1, 1)
        self.std = torch.tensor(std, dtype=torch.float32).view(3, 1, 1)

    def __call__(self, image: Image.Image | np.ndarray) -> torch.Tensor:
        pil = _to_pil(image).resize((self.im_size, self.im_size), Image.BILINEAR)  # type: ignore[attr-defined]  # set via globals() in PIL, unseen by its types
        array = np.asarray(pil, dtype=np.float32) / 255.0
        tensor = torch.from_numpy(array.copy()).permute(2, 0, 1)
        return (tensor - self.mean) / self.std

    def __repr__(self) -> str:
        return f"NormaliseResize(im_size={self.im_size})"


class RandomFlipNormaliseResize(NormaliseResize):
    """:class:`NormaliseResize` after a horizontal flip with probability ``p``.

    The coin comes from torch's global generator, which Lightning seeds per worker (``seed_everything``),
    so a seeded run is reproducible.
    """

    def __init__(
        self,
        im_size: int,
        p: float = 0.5,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
    ):
        super().__init__(im_size, mean, std)
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p must be in [0, 1], got {p}")
        self.p = p

    def __call__(self, image: Image.Image | np.ndarray) -> torch.Tensor:
        tensor = super().__call__(image)
        if torch.rand(()) < self.p:
            tensor = tensor.flip(-1)
        return tensor

    def __repr__(self) -> str:
        return f"RandomFlipNormaliseResize(im_size={self.im_size}, p={self.p})"


def get_normalisation_resize(
    im_size: int = 224, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD
) -> NormaliseResize:
    """Validation transform: resize + normalise (see :class:`NormaliseResize`)."""
    return NormaliseResize(im_size, mean, std)


def get_augs_flip(
    im_size: int = 224,
    p: float = 0.5,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
) -> RandomFlipNormaliseResize:
    """Training transform: random horizontal flip + resize + normalise."""
    return RandomFlipNormaliseResize(im_size, p, mean, std)
