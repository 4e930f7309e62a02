"""The grid of framed, titled images that :meth:`RetrievalResults.visualize` draws: one row per query, its
layout computed from the figure's size instead of measured by ``tight_layout`` (which lays out every axes' texts
to find their extents), so that a figure costs little more than its axes and images.

Imports matplotlib: only the drawing code imports this module.
"""

from __future__ import annotations

import numpy as np
from matplotlib import rcParams
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec, SubplotSpec

from oml_core.const import TColor

#: Width and height (inches) of the figure per image: a figure of ``R`` rows and ``C`` columns is
#: ``2.0 C x 2.2 R`` inches (OML's size).
CELL_SIZE = (2.0, 2.2)
#: Margin (inches) around the grid and gap between neighbouring frames: ``tight_layout``'s default pad,
#: ``1.08`` font sizes of 10 points.
GRID_PAD = 0.15
#: Font size (points) of every image's title.
TITLE_FONT_SIZE = 8
#: Line width (points) of every image's frame.
FRAME_WIDTH = 4


def title_height() -> float:
    """The height (inches) kept above every image for its title: the title's offset from the axes
    (``rcParams["axes.titlepad"]``, points) plus a line of :data:`TITLE_FONT_SIZE` (1.2 times the size)."""
    return (float(rcParams["axes.titlepad"]) + 1.2 * TITLE_FONT_SIZE) / 72


def image_grid(n_rows: int, n_cols: int, show: bool) -> tuple[Figure, GridSpec]:
    """A figure of ``n_rows x n_cols`` cells (:data:`CELL_SIZE` each) and the grid to place its images in.

    Layout, in inches (``W x H`` the figure, ``p`` :data:`GRID_PAD`, ``t`` :func:`title_height`): a margin
    ``p`` on the left, right and bottom, ``p + t`` on top (the first row's titles); between two columns a gap
    ``p``, between two rows ``t + p`` (the lower row's titles, then the gap). So the axes are
    ``w = (W - 2p - (C - 1) p) / C`` wide and ``h = (H - 2p - t - (R - 1)(t + p)) / R`` high; an image keeps
    its aspect, shrunk into its cell's ``w x h`` box (centred), its title above it, within the box's ``t``.

    Args:
        n_rows: Rows (one per query), at least 1.
        n_cols: Columns (the query, the retrieved and the ground-truth items), at least 1.
        show: Set ``True`` for a ``pyplot`` figure (to show); else a bare ``Figure``, which pyplot's registry
            does not keep alive.

    Returns:
        The figure and its :class:`~matplotlib.gridspec.GridSpec` (``grid[row, col]`` is a cell).
    """
    width, height = CELL_SIZE[0] * n_cols, CELL_SIZE[1] * n_rows
    if show:
        import matplotlib.pyplot as plt

        fig = plt.figure(figsize=(width, height))
    else:
        fig = Figure(figsize=(width, height))
    pad, title = GRID_PAD, title_height()
    axes_width = (width - 2 * pad - (n_cols - 1) * pad) / n_cols
    axes_height = (height - 2 * pad - title - (n_rows - 1) * (title + pad)) / n_rows
    grid = fig.add_gridspec(
        n_rows,
        n_cols,
        left=pad / width,
        right=1 - pad / width,
        bottom=pad / height,
        top=1 - (pad + title) / height,
        wspace=pad / axes_width,  # gaps, as fractions of the axes' mean width and height
        hspace=(title + pad) / axes_height,
    )
    return fig, grid


def draw_framed_image(fig: Figure, cell: SubplotSpec, image: np.ndarray, color: TColor, title: str) -> Axes:
    """Draw ``image`` in ``cell`` of ``fig``: its axes (returned) show it (``imshow``) under ``title``
    (:data:`TITLE_FONT_SIZE`), framed by their four spines in ``color`` (RGB, ``0..255``), :data:`FRAME_WIDTH`
    points wide; the x and y axes are hidden (no ticks, no tick labels)."""
    ax = fig.add_subplot(cell)
    ax.imshow(image)
    ax.set_title(title, fontsize=TITLE_FONT_SIZE)
    ax.xaxis.set_visible(False)
    ax.yaxis.set_visible(False)
    red, green, blue = color
    for spine in ax.spines.values():
        spine.set(edgecolor=(red / 255, green / 255, blue / 255), linewidth=FRAME_WIDTH)
    return ax
