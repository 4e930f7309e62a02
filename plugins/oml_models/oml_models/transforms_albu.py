"""OML's albumentations transforms (registered as ``norm_albu``, ``norm_resize_albu``, ``norm_resize_albu_clip``),
built with the real library: ``pip install "oml-models[albu]"``.

Each factory returns an :class:`AlbuCompose`, an ``albumentations.Compose`` (``albumentations.save`` and
``isinstance(t, albu.Compose)`` work as on OML's) that also takes the image positionally, as every transform of
the datasets is called: ``t(image)`` is ``t(image=np.asarray(image))["image"]``, a PIL image being made an
``HxWx3`` uint8 array first (:func:`~oml_core.utils.images.to_rgb8`). So the transforms work with either reader
(:func:`~oml_core.utils.images.imread_pil`, the datasets' default, or OML's
:func:`~oml_core.utils.images.imread_cv2`); both give the same array for an 8-bit image.

Each maps an ``HxWx3`` uint8 image to a float tensor ``[3, H, W]``: ``(pixel / 255 - mean[c]) / std[c]``
(``albumentations.Normalize`` then ``ToTensorV2``). The torchvision counterpart of ``norm_resize_albu``, which
needs no albumentations, is ``norm_resize_pad`` (:func:`oml_models.transforms.get_normalisation_resize_pad`): the
zoo's checkpoints use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PIL import Image

from oml_core.builtins.transforms import IMAGENET_MEAN, IMAGENET_STD
from oml_core.utils.images import to_rgb8
from oml_models.extras import requires_extra
from oml_models.normalisation import CLIP_MEAN, CLIP_STD, PAD_COLOR

with requires_extra("albumentations", "OML's albumentations transforms (norm_albu, norm_resize_albu, ...)"):
    import albumentations as albu
    import cv2
    from albumentations.pytorch import ToTensorV2


class AlbuCompose(albu.Compose):
    """``albumentations.Compose`` that also takes one image positionally (see the module's docstring).

    ``t(image=array, ...)`` is albumentations' call (a dict of the targets); ``t(image)`` returns the
    transformed image only, for a PIL image or an ``HxWx3`` array.
    """

    def __call__(self, *args: Any, **data: Any) -> Any:
        if not args:
            return super().__call__(**data)
        if len(args) != 1 or data:
            raise TypeError(
                "an albumentations transform takes one image positionally, or its targets by name "
                "(image=..., mask=...), not both"
            )
        image = args[0]
        array = np.asarray(to_rgb8(image)) if isinstance(image, Image.Image) else image
        return super().__call__(image=array)["image"]


def get_normalisation_albu(
    mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD
) -> AlbuCompose:
    """``Normalize(mean, std)`` + ``ToTensorV2``: the image keeps its size (registered as ``norm_albu``)."""
    return AlbuCompose([albu.Normalize(mean=mean, std=std), ToTensorV2()])


def get_normalisation_resize_albu(
    im_size: int, mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD
) -> AlbuCompose:
    """``LongestMaxSize(im_size)`` (the longer side to ``im_size``, bilinear), ``PadIfNeeded`` to
    ``im_size x im_size`` with white (:data:`~oml_models.normalisation.PAD_COLOR`) around the image in the
    centre, ``Normalize(mean, std)``, ``ToTensorV2`` (registered as ``norm_resize_albu``).

    Raises:
        ValueError: ``im_size`` is not a positive int.
    """
    if isinstance(im_size, bool) or not isinstance(im_size, int) or im_size <= 0:
        raise ValueError(f"im_size must be a positive int, got {im_size!r}")
    return AlbuCompose(
        [
            albu.LongestMaxSize(max_size=im_size),
            albu.PadIfNeeded(
                min_height=im_size, min_width=im_size, border_mode=cv2.BORDER_CONSTANT, fill=PAD_COLOR
            ),
            albu.Normalize(mean=mean, std=std),
            ToTensorV2(),
        ]
    )


def get_normalisation_resize_albu_clip(im_size: int) -> AlbuCompose:
    """:func:`get_normalisation_resize_albu` with CLIP's mean and std (registered as ``norm_resize_albu_clip``)."""
    return get_normalisation_resize_albu(im_size, mean=CLIP_MEAN, std=CLIP_STD)


__all__ = [
    "AlbuCompose",
    "get_normalisation_albu",
    "get_normalisation_resize_albu",
    "get_normalisation_resize_albu_clip",
]
