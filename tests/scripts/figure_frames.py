"""The colours of the frames that the worst-query and retrieval plots draw, read from the rendered figure: used by
the visualisation tests of the core and of the texts and audio plugins."""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def rendered(fig: Figure) -> np.ndarray:
    """The figure drawn by Agg, ``[H, W, 3]`` uint8."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def frame_pixels(image: np.ndarray, ax: Axes) -> set[tuple[int, ...]]:
    """The colours of the rendered figure ``image`` at the middle of the four sides of ``ax``'s frame."""
    box = ax.get_window_extent()  # display pixels, origin at the bottom left
    height = image.shape[0]
    middle_row, middle_col = round(height - (box.y0 + box.y1) / 2), round((box.x0 + box.x1) / 2)
    points = [
        (middle_row, round(box.x0)),  # left
        (middle_row, round(box.x1)),  # right
        (round(height - box.y1), middle_col),  # top
        (round(height - box.y0), middle_col),  # bottom
    ]
    return {tuple(int(v) for v in image[row, col]) for row, col in points}


def frames(fig: Figure) -> list[set[tuple[int, ...]]]:
    """:func:`frame_pixels` of every axes of ``fig``, in order."""
    image = rendered(fig)
    return [frame_pixels(image, ax) for ax in fig.axes]
