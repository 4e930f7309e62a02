"""Images: reading (:mod:`~oml_core.utils.images.images`) and keep-aspect-ratio resizing
(:mod:`~oml_core.utils.images.images_resize`), at OML's module paths (``oml.utils.images.images``,
``oml.utils.images.images_resize``).

The package re-exports the readers' module, so ``from oml_core.utils.images import imread_pil`` works as
``from oml_core.utils.images.images import imread_pil`` does.
"""

from oml_core.utils.images.images import (
    CV2_EXTRA,
    D50_WHITE,
    IMAGE_SUFFIXES,
    SUPPORTED_MODES,
    XYZ_D50_TO_LINEAR_SRGB,
    ImageConversionError,
    TImage,
    TImReader,
    draw_bbox,
    find_images,
    imread_cv2,
    imread_pil,
    imread_pillow,
    square_pad,
    tensor_to_numpy_image,
    to_rgb8,
)

__all__ = [
    "CV2_EXTRA",
    "D50_WHITE",
    "IMAGE_SUFFIXES",
    "SUPPORTED_MODES",
    "XYZ_D50_TO_LINEAR_SRGB",
    "ImageConversionError",
    "TImReader",
    "TImage",
    "draw_bbox",
    "find_images",
    "imread_cv2",
    "imread_pil",
    "imread_pillow",
    "square_pad",
    "tensor_to_numpy_image",
    "to_rgb8",
]
