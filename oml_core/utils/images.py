"""Reading images with PIL (no OpenCV, no torchvision)."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image, UnidentifiedImageError


def imread_pil(path_or_bytes: Path | str | bytes) -> Image.Image:
    """Read an image into memory as an RGB :class:`PIL.Image.Image`.

    Args:
        path_or_bytes: A path to an image file, or the encoded bytes of an image (PNG, JPEG ...).

    Returns:
        The fully decoded image in ``RGB`` mode (palette, greyscale and RGBA images are converted);
        no file handle stays open.

    Raises:
        FileNotFoundError: The path does not exist (the message names the file).
        OSError: The path is a directory or the file is not a readable image (the message names the file).
        TypeError: The argument is neither a path nor bytes.
    """
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
        try:
            with Image.open(io.BytesIO(data)) as image:
                return image.convert("RGB")
        except (UnidentifiedImageError, OSError, ValueError) as e:
            raise OSError(f"cannot decode an image from {len(data)} bytes: {e}") from e

    if not isinstance(path_or_bytes, (str, Path)):
        raise TypeError(f"imread_pil expects a path (str, Path) or bytes, got {type(path_or_bytes).__name__}")

    path = Path(path_or_bytes)
    if not path.exists():
        raise FileNotFoundError(f"image file not found: '{path}'")
    if not path.is_file():
        raise OSError(f"not an image file (it is a directory or a special file): '{path}'")
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (UnidentifiedImageError, OSError, ValueError) as e:
        raise OSError(f"cannot read the image file '{path}': {e}") from e


#: Suffixes (any case) of the files taken as images from a folder (OML's image extensions).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def find_images(folder: Path) -> list[Path]:
    """The image files (:data:`IMAGE_SUFFIXES`, any case) under ``folder``, searched recursively, sorted by
    path."""
    return sorted(p for p in folder.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())


__all__ = ["IMAGE_SUFFIXES", "find_images", "imread_pil"]
