"""Drawing a text as a picture, for the worst-query plots and ``visualize_as_html`` (OML's ``visualize_text``)."""

from __future__ import annotations

import textwrap

import numpy as np
from PIL import Image, ImageDraw, ImageFont

#: The size (pixels) of a drawn text.
TEXT_IMAGE_SIZE = 224
#: The characters per line of a drawn text, and the lines shown (the last one ends with "..." when cut).
CHARS_PER_LINE = 34
MAX_LINES = 16
FRAME = 4


def draw_text(text: str, color: tuple[int, int, int], size: int = TEXT_IMAGE_SIZE) -> np.ndarray:
    """``text`` wrapped at :data:`CHARS_PER_LINE` characters (at most :data:`MAX_LINES` lines), black on white,
    framed by ``color`` (:data:`FRAME` pixels), as a ``size x size x 3`` uint8 image."""
    lines = textwrap.wrap(text, CHARS_PER_LINE) or [""]
    if len(lines) > MAX_LINES:
        lines = [*lines[: MAX_LINES - 1], lines[MAX_LINES - 1][: CHARS_PER_LINE - 3] + "..."]
    image = Image.new("RGB", (size, size), color)
    draw = ImageDraw.Draw(image)
    draw.rectangle((FRAME, FRAME, size - 1 - FRAME, size - 1 - FRAME), fill=(255, 255, 255))
    draw.multiline_text(
        (2 * FRAME, 2 * FRAME), "\n".join(lines), fill=(0, 0, 0), font=ImageFont.load_default()
    )
    return np.asarray(image, dtype=np.uint8).copy()


__all__ = ["CHARS_PER_LINE", "MAX_LINES", "TEXT_IMAGE_SIZE", "draw_text"]
