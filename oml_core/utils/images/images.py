"""The one image reader of oml (PIL only: no OpenCV, no torchvision): every file PIL opens, in any of its
modes, becomes the same 8-bit RGB image, so that training, validation, prediction, the index and the plots all
see the same pixels.

How each PIL mode becomes 8-bit RGB (:func:`to_rgb8`; ``v`` is a pixel value, ``floor(x + 0.5)`` rounds half up,
results are clipped to ``[0, 255]``):

==============================  ===============================================================================
``RGB``                         as it is
``L``                           ``v`` on the three channels
``1``                           ``0`` or ``255`` on the three channels
``P``, ``PA``                   the palette colour of each index; alpha (``PA``'s band, a ``transparency``
                                entry) is dropped
``LA``, ``RGBA``, ``RGBX``      the colour as stored; alpha (padding) is dropped
``La``, ``RGBa``                premultiplied alpha: the colour ``min(255, floor(255 v / a))`` (``v`` where
                                ``a = 0``), then alpha dropped (PIL opens an RGB TIFF with premultiplied alpha
                                as ``RGBA``, un-premultiplied the same way, ``0`` where ``a = 0``)
``CMYK``                        ``R = floor((255 - C) (255 - K) / 255 + 0.5)``, G from M, B from Y
``YCbCr``                       JFIF (ITU-T T.871), full range: ``R = Y + 1.402 (Cr - 128)``,
                                ``G = Y - 0.344136 (Cb - 128) - 0.714136 (Cr - 128)``, ``B = Y + 1.772 (Cb - 128)``,
                                each ``floor(x + 0.5)``
``LAB``                         CIE L*a*b* (D50 white, as TIFF's CIELab and ICC's PCS) to sRGB: ``L* = 100 L /
                                255``, ``a*, b*`` the file's signed bytes; to XYZ (D50), then linear sRGB by the
                                Bradford-adapted matrix :data:`XYZ_D50_TO_LINEAR_SRGB`, clipped to ``[0, 1]``,
                                sRGB-encoded (``12.92 c`` up to ``0.0031308``, else ``1.055 c^(1/2.4) - 0.055``)
                                and ``floor(255 c + 0.5)``: LittleCMS's unoptimised transform within one level
                                (PIL's ``convert("RGB")`` uses LittleCMS's 8-bit look-up table, up to 20 levels
                                off in dark colours)
``I;16``, ``I;16B``, ``I;16L``  16-bit unsigned: ``v >> 8`` (``floor(v / 256)``, the high byte), on the three
``I;16N``                       channels
``I``                           32-bit signed container: the range of the integer samples the file stores;
                                ``v >> (n - 8)`` with ``n`` the sample's value bits: 16 for unsigned 16-bit
                                samples (PGM/PPM with maxval > 255, 16-bit PNG in Pillows that open it as
                                ``I``), 15 for signed 16-bit (TIFF ``SampleFormat`` 2), 31 for 32-bit samples
                                (the non-negative range of int32, as ``skimage.img_as_ubyte`` and
                                ``torchvision``'s ``convert_image_dtype`` map int32); a negative pixel is refused
``F``                           float intensities in ``[0, 1]``: ``floor(255 v + 0.5)``; a NaN, infinite or
                                out-of-range pixel is refused
==============================  ===============================================================================

Why the 16-bit rule is ``>> 8``: PIL itself decodes 16-bit RGB and RGBA PNGs into 8-bit modes by keeping the
high byte, so the grey 16-bit modes follow the same rule and a 16-bit file reads the same whatever its colour
type; it splits the 16-bit range into 256 equal bins, and an 8-bit image saved as 16 bits (``v * 257``) reads
back exactly as ``v``.

Why float pixels must lie in ``[0, 1]`` (no min-max stretch, no clipping): a stretch depends on each image's
content (a dark image would be brightened, a constant one has no range), so two images of one scene would read
differently; values outside ``[0, 1]`` have a scale that the file does not state. Such an image is refused in
one line rather than guessed at; rescale it (or pass a custom ``f_imread``).

Why alpha is dropped (not composited on a background): it is what OML's ``imread_pillow``
(``convert("RGB")``) does, so the zoo's checkpoints see the pixels they were trained on and oml's embeddings
match OML's; and any background (white, black) would change the colour of every partly transparent pixel in a
way that suits some datasets and not others. Composite in a custom ``f_imread`` when a dataset needs it.

What cannot be converted sensibly (NaN, infinite or out-of-range float pixels, negative integer pixels, a mode
outside the table, e.g. ``HSV``, which no PIL reader opens) raises :class:`ImageConversionError`, one line naming
the file, its mode, how many pixels are at fault and the first of them.
"""

from __future__ import annotations

import io
import os
import re
import types
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from PIL import Image, ImageDraw, UnidentifiedImageError

from oml_core.const import PAD_COLOR, TBBox, TColor

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Linear sRGB from CIE XYZ relative to D50 (the sRGB primaries and D65 white, Bradford-adapted to D50; Bruce
#: Lindbloom's matrix, as in the ICC sRGB profile).
XYZ_D50_TO_LINEAR_SRGB = np.array(
    [
        [3.1338561, -1.6168667, -0.4906146],
        [-0.9787684, 1.9161415, 0.0334540],
        [0.0719453, -0.2289914, 1.4052427],
    ]
)
#: The D50 reference white ``(Xn, Yn, Zn)`` of :data:`XYZ_D50_TO_LINEAR_SRGB` (ICC's PCS white).
D50_WHITE = (0.9642, 1.0, 0.8249)

#: Modes that PIL's ``convert("RGB")`` maps as the table of this module says (PIL's CMYK rounding is
#: ``floor(x + 0.5)``).
_PIL_EXACT_MODES = ("1", "L", "LA", "RGBA", "RGBX", "CMYK")
#: Modes with alpha (``P`` through its ``transparency`` entry) that PIL converts to straight ``RGBA`` first
#: (a palette lookup, or un-premultiplying), whose alpha is then dropped.
_VIA_RGBA_MODES = ("P", "PA", "RGBa")
_UINT16_MODES = ("I;16", "I;16B", "I;16L", "I;16N")
#: The raw modes of PIL's decoders that name the sample's width: ``I;16``, ``I;16BS``, ``I;32S`` ...
_RAW_INTEGER = re.compile(r"^I;(?P<bits>\d+)")
#: PIL's PGM/PPM decoders, which scale a maxval above 255 to the 16-bit range in mode ``I``.
_PPM_CODECS = ("ppm", "ppm_plain")

SUPPORTED_MODES = (
    "RGB",
    *_PIL_EXACT_MODES,
    *_VIA_RGBA_MODES,
    "La",
    "YCbCr",
    "LAB",
    *_UINT16_MODES,
    "I",
    "F",
)


class ImageConversionError(OSError):
    """An image that decodes but whose pixels cannot be converted to 8-bit RGB sensibly (see the module's
    table); the message names the file, its mode and the pixels at fault. An ``OSError``, as every other image
    that cannot be read."""


def imread_pil(path_or_bytes: Path | str | bytes) -> Image.Image:
    """Read an image into memory as an 8-bit RGB :class:`PIL.Image.Image`, whatever its mode (see
    :func:`to_rgb8`, and the module's table for the formula of each mode).

    Args:
        path_or_bytes: A path to an image file, or the encoded bytes of an image (PNG, JPEG, TIFF ...).

    Returns:
        The fully decoded image in ``RGB`` mode; no file handle stays open.

    Raises:
        FileNotFoundError: The path does not exist (the message names the file).
        IsADirectoryError: The path is a directory (the message names it and says so).
        ImageConversionError: The pixels cannot be converted to 8-bit RGB (NaN, out-of-range, an unsupported
            mode; the message names the file, the mode and the first pixel at fault).
        OSError: The path is not a regular file or the file is not a readable image (the message names the
            file).
        TypeError: The argument is neither a path nor bytes.
    """
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
        source = f"<{len(data)} bytes>"
        try:
            with Image.open(io.BytesIO(data)) as image:
                return to_rgb8(image, source)
        except ImageConversionError:
            raise
        except (UnidentifiedImageError, OSError, ValueError) as e:
            raise OSError(f"cannot decode an image from {len(data)} bytes: {e}") from e

    if not isinstance(path_or_bytes, (str, Path)):
        raise TypeError(f"imread_pil expects a path (str, Path) or bytes, got {type(path_or_bytes).__name__}")

    path = _check_image_file(path_or_bytes)
    try:
        # one read: PIL parses a small image from memory faster than from a file it reads piece by piece
        with open(path, "rb") as file:
            data = file.read()
        with Image.open(io.BytesIO(data)) as image:
            return to_rgb8(image, path)
    except ImageConversionError:
        raise
    except (UnidentifiedImageError, OSError, ValueError) as e:
        raise OSError(f"cannot read the image file '{path}': {e}") from e


def imread_pillow(im_src: Path | str | bytes) -> Image.Image:
    """OML's name and parameter of :func:`imread_pil` (``oml.utils.images.images.imread_pillow``): the image at
    the path (or of the encoded bytes) ``im_src`` as an 8-bit RGB PIL image."""
    return imread_pil(im_src)


def figure_to_array(fig: Figure) -> np.ndarray:
    """The RGB pixels (``H x W x 3``, uint8) of a matplotlib figure, drawn with the Agg backend (the figure stays
    open). matplotlib is imported by this function only."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def figure_to_nparray(fig: Figure) -> np.ndarray:
    """OML's ``figure_to_nparray``: the RGB pixels of ``fig`` (:func:`figure_to_array`), then the figure closed
    (``plt.close(fig)``), as OML's."""
    import matplotlib.pyplot as plt

    pixels = figure_to_array(fig)
    plt.close(fig)
    return pixels


def _check_image_file(path_or_str: Path | str) -> str:
    """``path_or_str`` as a ``str`` (os.path and the decoders take it faster than a ``Path``), checked to be a
    regular file.

    Raises:
        FileNotFoundError, IsADirectoryError, OSError: it does not exist, is a directory, is a special file
            (the message names it).
    """
    path = os.fspath(path_or_str)
    if not os.path.isfile(path):  # one look on the way of every image; the others only to say what is wrong
        if not os.path.exists(path):
            raise FileNotFoundError(f"image file not found: '{path}'")
        if os.path.isdir(path):
            raise IsADirectoryError(f"'{path}' is a directory, not an image file")
        raise OSError(f"not an image file (it is a special file): '{path}'")
    return path


def to_rgb8(image: Image.Image, source: str | None = None) -> Image.Image:
    """``image`` as a new 8-bit ``RGB`` image, each mode converted as the module's table says.

    An image fresh from ``Image.open`` (not yet loaded) also tells the width of its integer samples, which
    mode ``I`` needs (see the table); a loaded ``I`` image is taken as holding 32-bit samples.

    Args:
        image: Any PIL image of a mode in :data:`SUPPORTED_MODES`.
        source: Names the image in the messages (its file); ``None``: the image's ``filename``, if any.

    Returns:
        A new ``RGB`` image of the same size.

    Raises:
        ImageConversionError: NaN, infinite or out-of-range float pixels, negative integer pixels, or a mode
            outside :data:`SUPPORTED_MODES` (one line naming ``source``, the mode and the first pixel at fault).
    """
    mode = image.mode
    if mode == "RGB" or mode in _PIL_EXACT_MODES:  # the common case first: no message to prepare
        return image.convert("RGB")
    where = _describe(image, source)
    if mode not in SUPPORTED_MODES:
        raise ImageConversionError(
            f"cannot convert {where} to 8-bit RGB: PIL mode {mode!r} is not supported "
            f"(supported: {', '.join(SUPPORTED_MODES)})"
        )
    if mode in _VIA_RGBA_MODES:
        return image.convert("RGBA").convert("RGB")
    if mode == "La":
        return image.convert("LA").convert("RGB")
    if mode == "YCbCr":
        return _rgb_image(_ycbcr_to_rgb(np.asarray(image, dtype=np.float64)))
    if mode == "LAB":
        return _rgb_image(_lab_to_rgb(np.asarray(image)))
    if mode == "F":
        return _rgb_image(_float_to_uint8(np.asarray(image, dtype=np.float64), where))
    value_bits = _integer_value_bits(image)
    return _rgb_image(_integer_to_uint8(np.asarray(image).astype(np.int64), value_bits, where))


def _describe(image: Image.Image, source: str | None) -> str:
    """``the image '<file>' (mode I;16)`` for the messages."""
    name = source if source is not None else getattr(image, "filename", "") or "<in-memory image>"
    return f"the image '{name}' (mode {image.mode})"


def _integer_value_bits(image: Image.Image) -> int:
    """How many value bits the samples of an integer-mode image have: 16 for ``I;16*``; for ``I``, what the
    decoder's raw mode names (PIL keeps it in ``image.tile`` until the image is loaded): 16 for an unsigned
    16-bit sample and for the PGM/PPM decoders (they scale to 16 bits), 15 for a signed 16-bit one, else 31."""
    if image.mode in _UINT16_MODES:
        return 16
    tile = getattr(image, "tile", None) or []
    if not tile:
        return 31
    codec, args = tile[0][0], tile[0][3]
    if codec in _PPM_CODECS:
        return 16
    rawmode = args if isinstance(args, str) else args[0] if args and isinstance(args[0], str) else ""
    match = _RAW_INTEGER.match(rawmode)
    if match is None or match.group("bits") != "16":
        return 31
    return 15 if rawmode.endswith("S") else 16


def _integer_to_uint8(values: np.ndarray, value_bits: int, where: str) -> np.ndarray:
    """``values >> (value_bits - 8)``; negative values are refused."""
    negative = values < 0
    if negative.any():
        raise ImageConversionError(
            f"cannot convert {where} to 8-bit RGB: {_bad_pixels(negative, values, 'negative')}; integer pixels "
            f"are read as intensities in [0, {2**value_bits - 1}]"
        )
    return (values >> (value_bits - 8)).astype(np.uint8)


def _float_to_uint8(values: np.ndarray, where: str) -> np.ndarray:
    """``floor(255 v + 0.5)`` for ``v`` in ``[0, 1]``; anything else (NaN, infinite, out of range) is refused."""
    with np.errstate(invalid="ignore"):
        bad = ~((values >= 0.0) & (values <= 1.0))  # NaN compares false: bad
    if bad.any():
        raise ImageConversionError(
            f"cannot convert {where} to 8-bit RGB: {_bad_pixels(bad, values, 'not a finite number in [0, 1]')}; "
            f"float pixels are read as intensities in [0, 1] (scaled by 255)"
        )
    return np.floor(values * 255.0 + 0.5).astype(np.uint8)


def _bad_pixels(bad: np.ndarray, values: np.ndarray, what: str) -> str:
    """``"3 of 64 pixels are <what> (the first at x=5, y=0: nan)"``: how many pixels ``bad`` marks, and the
    first of them in row-major order."""
    y, x = (int(i) for i in np.argwhere(bad)[0])
    count = int(bad.sum())
    verb = "is" if count == 1 else "are"
    return f"{count} of {bad.size} pixels {verb} {what} (the first at x={x}, y={y}: {values[y, x]})"


def _ycbcr_to_rgb(ycbcr: np.ndarray) -> np.ndarray:
    """JFIF's full-range YCbCr to RGB (see the module's table), rounded half up and clipped."""
    y, cb, cr = ycbcr[..., 0], ycbcr[..., 1] - 128.0, ycbcr[..., 2] - 128.0
    rgb = np.stack([y + 1.402 * cr, y - 0.344136 * cb - 0.714136 * cr, y + 1.772 * cb], axis=-1)
    return _round_clip(rgb)


def _lab_to_rgb(lab: np.ndarray) -> np.ndarray:
    """CIE L*a*b* (D50) to 8-bit sRGB (see the module's table). ``lab`` is ``np.asarray`` of a ``LAB`` image:
    ``L`` in ``0..255`` and ``a*, b*`` as signed bytes (TIFF's CIELab, PIL's raw ``LAB``)."""
    lightness = lab[..., 0].astype(np.float64) * (100.0 / 255.0)
    a_star = lab[..., 1].astype(np.int8).astype(np.float64)
    b_star = lab[..., 2].astype(np.int8).astype(np.float64)
    f_y = (lightness + 16.0) / 116.0
    f_xyz = np.stack([f_y + a_star / 500.0, f_y, f_y - b_star / 200.0], axis=-1)
    delta = 6.0 / 29.0
    xyz = np.where(f_xyz > delta, f_xyz**3, 3.0 * delta**2 * (f_xyz - 4.0 / 29.0)) * np.array(D50_WHITE)
    linear = np.clip(xyz @ XYZ_D50_TO_LINEAR_SRGB.T, 0.0, 1.0)
    encoded = np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * linear ** (1.0 / 2.4) - 0.055)
    return _round_clip(encoded * 255.0)


def _round_clip(values: np.ndarray) -> np.ndarray:
    """``floor(v + 0.5)`` clipped to ``[0, 255]``, as uint8."""
    return np.clip(np.floor(values + 0.5), 0, 255).astype(np.uint8)


def _rgb_image(pixels: np.ndarray) -> Image.Image:
    """An ``RGB`` image of ``HxWx3`` uint8 pixels, or of ``HxW`` ones put on the three channels."""
    if pixels.ndim == 2:
        pixels = np.repeat(pixels[:, :, None], 3, axis=2)
    return Image.fromarray(np.ascontiguousarray(pixels))


#: An image as the readers return it: a PIL image (:func:`imread_pil`) or an ``HxWx3`` uint8 array
#: (:func:`imread_cv2`) (OML's ``TImage``).
TImage = Image.Image | np.ndarray
#: A function reading an image from a path or from its encoded bytes (OML's ``TImReader``).
TImReader = Callable[[Path | str | bytes], TImage]

#: What installs OpenCV for :func:`imread_cv2` (an optional extra of oml-models).
CV2_EXTRA = "oml-models[cv2]"


def _opencv() -> types.ModuleType:
    """The ``cv2`` module (OpenCV is optional: only :func:`imread_cv2` needs it).

    Raises:
        ModuleNotFoundError: OpenCV is not installed; the message names the extra that installs it.
    """
    try:
        import cv2  # an optional dependency, imported when a function that needs it is called
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(
            f'imread_cv2 needs OpenCV (opencv-python-headless): pip install "{CV2_EXTRA}"', name="cv2"
        ) from e
    return cv2


def imread_cv2(im_src: Path | str | bytes) -> np.ndarray:
    """Read an image with OpenCV into an ``HxWx3`` uint8 RGB array (OML's reader for albumentations'
    transforms; needs ``pip install "oml-models[cv2]"``).

    The file is decoded as it is stored (``cv2.IMREAD_UNCHANGED``: no EXIF rotation, as :func:`imread_pil`),
    then: BGR becomes RGB; a grey image is put on the three channels; alpha is dropped (as OML's, and as
    :func:`imread_pil` does); 16-bit samples keep their high byte (``v >> 8``, the rule of :func:`to_rgb8`).
    So an 8-bit image reads the same as with :func:`imread_pil` (``np.asarray(imread_pil(x))``), up to the JPEG
    decoder. OML's returns 16-bit arrays as they are and fails on grey images; here every image becomes 8-bit
    RGB, so that the transforms and the datasets see one kind of pixels.

    Args:
        im_src: A path to an image file, or the encoded bytes of an image.

    Returns:
        The pixels, ``HxWx3``, uint8, RGB.

    Raises:
        ModuleNotFoundError: OpenCV is not installed (the message names the extra).
        FileNotFoundError, IsADirectoryError: The path does not exist, or is a directory.
        OSError: OpenCV cannot decode the file or the bytes (the message names the file).
        ImageConversionError: OpenCV decodes pixels of another type than 8 or 16 bits (float images).
        TypeError: The argument is neither a path nor bytes.
    """
    cv2 = _opencv()
    if isinstance(im_src, (bytes, bytearray, memoryview)):
        encoded = np.frombuffer(bytes(im_src), dtype=np.uint8)
        source = f"<{encoded.size} bytes>"
        failure = f"cannot decode an image from {encoded.size} bytes"
    elif isinstance(im_src, (str, Path)):
        path = _check_image_file(im_src)
        encoded = np.fromfile(path, dtype=np.uint8)  # a path of any characters, which cv2.imread may not open
        source, failure = f"'{path}'", f"cannot read the image file '{path}'"
    else:
        raise TypeError(f"imread_cv2 expects a path (str, Path) or bytes, got {type(im_src).__name__}")
    pixels = cv2.imdecode(encoded, cv2.IMREAD_UNCHANGED) if encoded.size else None
    if pixels is None:
        raise OSError(f"{failure}: OpenCV cannot decode it")
    return _opencv_to_rgb8(cv2, pixels, source)


def _opencv_to_rgb8(cv2: types.ModuleType, pixels: np.ndarray, source: str) -> np.ndarray:
    """OpenCV's decoded ``pixels`` (BGR, BGRA or grey; 8 or 16 bits) as ``HxWx3`` uint8 RGB."""
    if pixels.dtype == np.uint16:
        pixels = (pixels >> 8).astype(np.uint8)
    elif pixels.dtype != np.uint8:
        raise ImageConversionError(
            f"cannot convert the image {source} to 8-bit RGB: OpenCV decodes it as {pixels.dtype} pixels; "
            f"imread_cv2 reads 8- and 16-bit images (imread_pil reads float ones in [0, 1])"
        )
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    conversions = {1: cv2.COLOR_GRAY2RGB, 3: cv2.COLOR_BGR2RGB, 4: cv2.COLOR_BGRA2RGB}
    if channels not in conversions:
        raise ImageConversionError(
            f"cannot convert the image {source} to 8-bit RGB: it has {channels} channels (1, 3 or 4 expected)"
        )
    return cv2.cvtColor(pixels, conversions[channels])


def tensor_to_numpy_image(img: torch.Tensor) -> np.ndarray:
    """A ``CxHxW`` tensor (e.g. a normalised model input) as an ``HxWxC`` uint8 image for drawing, stretched to
    the full range: ``floor(255 (v - min) / (max - min))`` over the whole tensor (OML's name and rule); a
    constant tensor gives zeros (OML's divides by zero there).
    """
    array = img.detach().cpu().permute(1, 2, 0).numpy().astype(np.float64)
    array = array - array.min()
    top = array.max()
    if top > 0:
        array = array / top * 255.0
    return array.astype(np.uint8)


def square_pad(img: np.ndarray) -> np.ndarray:
    """``img`` (``HxW`` or ``HxWx3``) in the centre of a square of side ``max(H, W)`` filled with
    :data:`~oml_core.const.PAD_COLOR` (white); the odd pixel of a margin goes to the bottom or the right
    (OML's name and layout, albumentations' ``pad``)."""
    height, width = img.shape[:2]
    side = max(height, width)
    fill = PAD_COLOR if img.ndim == 3 else PAD_COLOR[0]
    canvas = np.empty((side, side, *img.shape[2:]), dtype=img.dtype)
    canvas[...] = fill
    top, left = (side - height) // 2, (side - width) // 2
    canvas[top : top + height, left : left + width] = img
    return canvas


def draw_bbox(im: np.ndarray, bbox: TBBox | None, color: TColor) -> np.ndarray:
    """A copy of the ``HxWx3`` uint8 image ``im`` with the box ``bbox`` (``x1, y1, x2, y2``; ``None``: the whole
    image) outlined in ``color``, ``max(3, int(0.05 (H + W) / 2))`` pixels thick, drawn inside the box (OML's
    name and thickness; OML's OpenCV line straddles the box's edge)."""
    image = Image.fromarray(np.ascontiguousarray(im))
    height, width = im.shape[:2]
    x1, y1, x2, y2 = (0, 0, width, height) if bbox is None else (int(v) for v in bbox)
    thickness = max(3, int(0.05 * (height + width) / 2))
    ImageDraw.Draw(image).rectangle((x1, y1, x2, y2), outline=tuple(int(c) for c in color), width=thickness)
    return np.asarray(image).copy()


#: Suffixes (any case) of the files taken as images from a folder (OML's image extensions).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def find_images(folder: Path) -> list[Path]:
    """The image files (:data:`IMAGE_SUFFIXES`, any case) under ``folder``, searched recursively, sorted by
    path."""
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())


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
    "figure_to_array",
    "figure_to_nparray",
    "imread_cv2",
    "imread_pil",
    "imread_pillow",
    "square_pad",
    "tensor_to_numpy_image",
    "to_rgb8",
]
