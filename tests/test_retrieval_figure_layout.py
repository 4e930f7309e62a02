"""The computed layout of ``RetrievalResults.visualize``'s figure (``oml_core.retrieval.figure_grid``), checked on
the drawn figure: no two frames overlap, no title overlaps a frame or another title, every title is inside the
figure, and the images are as large as the layout's formula says."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from oml_core.retrieval import RetrievalResults
from oml_core.retrieval.figure_grid import FRAME_WIDTH
from tests.scripts.figure_frames import rendered


def results(n_queries: int, n_retrieved: int, n_gt: int) -> RetrievalResults:
    """Query ``i`` retrieved gallery positions ``0..n_retrieved-1`` at distances ``0.5, 1.5, ...`` and has the
    ground truth ``0..n_gt-1``, none when ``n_gt`` is 0 (so every row has ``1 + n_retrieved + n_gt`` images)."""
    distances = [torch.arange(n_retrieved, dtype=torch.float32) + 0.5] * n_queries
    retrieved = [torch.arange(n_retrieved)] * n_queries
    return RetrievalResults(distances, retrieved, [torch.arange(n_gt)] * n_queries if n_gt else None)


def figure(n_queries: int, n_retrieved: int, n_gt: int, height: int, width: int) -> Figure:
    """The drawn figure of every query, all images ``height x width`` (a gradient, RGB uint8)."""
    image = np.linspace(0, 255, height * width * 3).reshape(height, width, 3).astype(np.uint8)
    rr = results(n_queries, n_retrieved, n_gt)
    fig = rr.visualize_with_functions(
        list(range(n_queries)),
        lambda i, color: image,
        lambda j, color: image,
        n_galleries_to_show=n_retrieved,
        n_gt_to_show=n_gt,
    )
    rendered(fig)  # draws it: the axes take their final (aspect-kept) positions
    return fig


def frame_extent(fig: Figure, box: Bbox) -> Bbox:
    """An axes' window extent grown by the half of its frame's line that lies outside it (display pixels)."""
    half = FRAME_WIDTH / 2 * fig.dpi / 72
    return Bbox.from_extents(box.x0 - half, box.y0 - half, box.x1 + half, box.y1 + half)


@pytest.mark.parametrize(
    "n_queries, n_retrieved, n_gt, height, width",
    [
        (5, 5, 2, 64, 64),  # the worst-queries figure of EmbeddingMetrics
        (5, 5, 2, 224, 224),
        (1, 1, 0, 64, 64),  # one row of two images
        (7, 3, 1, 30, 300),  # wide images (texts)
        (3, 6, 3, 300, 30),  # tall images
    ],
)
def test_frames_and_titles_never_overlap_and_titles_stay_in_the_figure(
    n_queries: int, n_retrieved: int, n_gt: int, height: int, width: int
) -> None:
    fig = figure(n_queries, n_retrieved, n_gt, height, width)
    assert len(fig.axes) == n_queries * (1 + n_retrieved + n_gt)
    frames = [frame_extent(fig, ax.get_window_extent()) for ax in fig.axes]
    titles = [ax.title.get_window_extent() for ax in fig.axes]
    assert all(title.width > 0 and title.height > 0 for title in titles)
    boxes = frames + titles
    overlapping = [
        (a, b) for (a, box_a), (b, box_b) in combinations(enumerate(boxes), 2) if box_a.overlaps(box_b)
    ]
    assert overlapping == []
    inside = fig.bbox
    assert all(
        inside.x0 <= t.x0 and t.x1 <= inside.x1 and inside.y0 <= t.y0 and t.y1 <= inside.y1 for t in titles
    )
    assert all(
        inside.x0 <= f.x0 and f.x1 <= inside.x1 and inside.y0 <= f.y0 and f.y1 <= inside.y1 for f in frames
    )
    # every title is right above its own image, centred on it
    for ax, title in zip(fig.axes, titles):
        box = ax.get_window_extent()
        assert 0 < title.y0 - box.y1 < 12 * fig.dpi / 72  # within the 6-point pad (and the frame)
        assert (title.x0 + title.x1) / 2 == pytest.approx((box.x0 + box.x1) / 2, abs=1)


def test_square_images_get_the_cells_by_the_formula() -> None:
    # 5 rows x 8 columns: 16 x 11 inches at 100 dpi; pad 0.15 in, title space (6 + 1.2 * 8) / 72 = 0.21667 in
    # width of an axes: (16 - 2 * 0.15 - 7 * 0.15) / 8 = 1.83125 in
    # height: (11 - 2 * 0.15 - 0.21667 - 4 * (0.21667 + 0.15)) / 5 = 1.80333 in: a square image is 180.33 px
    fig = figure(5, 5, 2, 64, 64)
    assert fig.dpi == 100 and tuple(fig.get_size_inches()) == (16.0, 11.0)
    sizes = np.array([ax.get_window_extent().size for ax in fig.axes])
    np.testing.assert_allclose(sizes, 180.333, atol=0.01)
    # the first column starts at the margin, centred in its 1.83125 in cell: 15 + (183.125 - 180.333) / 2 px
    lefts = [ax.get_window_extent().x0 for ax in fig.axes[::8]]
    np.testing.assert_allclose(lefts, 15 + (183.125 - 180.333) / 2, atol=0.01)
    # the bottom row's frames start at the margin: 15 px
    bottoms = [ax.get_window_extent().y0 for ax in fig.axes[-8:]]
    np.testing.assert_allclose(bottoms, 15, atol=0.01)
