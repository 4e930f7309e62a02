"""Drawing a text as a picture, for the worst-query plots and ``visualize_as_html``: the core's
:func:`~oml_core.utils.misc.visualize_text` (OML's name), framed, at this plugin's size."""

from __future__ import annotations

import numpy as np

from oml_core.utils.misc import CHARS_PER_LINE, MAX_LINES, visualize_text

#: The size (pixels) of a drawn text.
TEXT_IMAGE_SIZE = 224


def draw_text(text: str, color: tuple[int, int, int], size: int = TEXT_IMAGE_SIZE) -> np.ndarray:
    """``text`` wrapped at :data:`CHARS_PER_LINE` characters (at most :data:`MAX_LINES` lines), black on white,
    framed by ``color``, as a ``size x size x 3`` uint8 image (:func:`~oml_core.utils.misc.visualize_text`)."""
    return visualize_text(text, color, draw_bbox=True, size=size)


__all__ = ["CHARS_PER_LINE", "MAX_LINES", "TEXT_IMAGE_SIZE", "draw_text"]
