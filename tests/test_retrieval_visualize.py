"""``RetrievalResults.visualize``: one row per query on the mock figures dataset, checked axis by axis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from oml_core.datasets import get_mock_dataset_root
from oml_core.datasets.images import ImageLabeledDataset, get_retrieval_images_datasets
from oml_core.interfaces.datasets import IQueryGalleryDataset
from oml_core.retrieval import RetrievalResults
from oml_core.retrieval.retrieval_results import (
    GT_COLOR,
    IRRELEVANT_COLOR,
    QUERY_COLOR,
    RELEVANT_COLOR,
    UNKNOWN_COLOR,
)


@pytest.fixture(scope="module")
def mock_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return get_mock_dataset_root(cache_dir=tmp_path_factory.mktemp("oml_cache"))


@pytest.fixture(scope="module")
def valid(mock_root: Path) -> Any:
    """The 64 validation images with bounding boxes: 8 labels of 8 consecutive items, all queries and gallery."""
    return get_retrieval_images_datasets(mock_root, dataframe_name="df_with_bboxes.csv")[1]


def line_embeddings(n: int) -> torch.Tensor:
    """Item ``i`` at ``i`` on a line: its neighbours are ``i - 1, i + 1, i - 2, ...`` (ties by position)."""
    return torch.arange(n, dtype=torch.float32)[:, None]


def frame(ax: Axes) -> tuple[float, float, float]:
    colors = {tuple(to_rgb(spine.get_edgecolor())) for spine in ax.spines.values()}
    assert len(colors) == 1, "all four sides of a frame have one colour"
    return colors.pop()


def rgb(color: tuple[int, int, int]) -> tuple[float, float, float]:
    return tuple(c / 255 for c in color)


def test_rows_titles_frames_and_images(valid: Any) -> None:
    rr = RetrievalResults.from_embeddings(line_embeddings(len(valid)), valid, n_items=5)
    n_figures = len(plt.get_fignums())
    fig = rr.visualize([7, 0], valid, n_galleries_to_show=4, n_gt_to_show=2)
    assert isinstance(fig, Figure)
    assert len(plt.get_fignums()) == n_figures  # not kept alive by pyplot
    assert len(fig.axes) == 2 * (1 + 4 + 2)
    titles = [ax.get_title() for ax in fig.axes]
    # item 7 is the last of label 16 (items 0..7): its neighbours 6, 8, 5, 9 alternate right and wrong
    assert titles[:7] == ["Query #7", "#6: 1.000", "#8: 1.000", "#5: 2.000", "#9: 2.000", "GT #0", "GT #1"]
    assert titles[7:] == ["Query #0", "#1: 1.000", "#2: 2.000", "#3: 3.000", "#4: 4.000", "GT #1", "GT #2"]
    expected = [
        QUERY_COLOR,
        RELEVANT_COLOR,
        IRRELEVANT_COLOR,
        RELEVANT_COLOR,
        IRRELEVANT_COLOR,
        GT_COLOR,
        GT_COLOR,
    ]
    expected += [QUERY_COLOR] + [RELEVANT_COLOR] * 4 + [GT_COLOR] * 2
    assert [frame(ax) for ax in fig.axes] == [rgb(c) for c in expected]
    # every image is the dataset's own drawing of that item, its bounding box in the frame's colour
    items = [7, 6, 8, 5, 9, 0, 1, 0, 1, 2, 3, 4, 1, 2]
    for ax, item, color in zip(fig.axes, items, expected):
        image = np.asarray(ax.images[0].get_array())
        assert np.array_equal(image, valid.visualize(item, color))
        x1, y1 = int(valid.df["x_1"][item]), int(valid.df["y_1"][item])
        assert tuple(image[y1, x1]) == color


def test_what_is_shown_is_clipped_to_what_exists(valid: Any) -> None:
    rr = RetrievalResults.from_embeddings(line_embeddings(len(valid)), valid, n_items=3)
    fig = rr.visualize([20], valid, n_galleries_to_show=100, n_gt_to_show=100)
    assert len(fig.axes) == 1 + 3 + 7  # 3 retrieved, 7 other items of the label
    assert [ax.get_title() for ax in fig.axes][-7:] == [f"GT #{i}" for i in (16, 17, 18, 19, 21, 22, 23)]


def test_unknown_ground_truth_draws_black_frames_and_no_gt(valid: Any, capsys: pytest.CaptureFixture) -> None:
    rr = RetrievalResults.from_embeddings(line_embeddings(len(valid)), valid, n_items=2)
    unlabeled = RetrievalResults(rr.distances, rr.retrieved_ids)
    fig = unlabeled.visualize([3], valid, n_galleries_to_show=2, verbose=True)
    assert [ax.get_title() for ax in fig.axes] == ["Query #3", "#2: 1.000", "#4: 1.000"]
    assert [frame(ax) for ax in fig.axes] == [rgb(QUERY_COLOR), rgb(UNKNOWN_COLOR), rgb(UNKNOWN_COLOR)]
    assert "queries [3]" in capsys.readouterr().out


def test_bad_arguments(valid: Any) -> None:
    rr = RetrievalResults.from_embeddings(line_embeddings(len(valid)), valid, n_items=2)
    with pytest.raises(ValueError, match=r"query_ids must be non-empty positions in \[0, 63\], got \[64\]"):
        rr.visualize([1, 64], valid)
    with pytest.raises(ValueError, match="query_ids must be non-empty"):
        rr.visualize([], valid)
    with pytest.raises(ValueError, match="n_galleries_to_show must be an integer >= 1, got 0"):
        rr.visualize([1], valid, n_galleries_to_show=0)
    with pytest.raises(ValueError, match="n_gt_to_show must be an integer >= 0, got -1"):
        rr.visualize([1], valid, n_gt_to_show=-1)
    small = RetrievalResults([torch.zeros(0)], [torch.zeros(0, dtype=torch.long)])
    with pytest.raises(ValueError, match="ImageQueryGalleryLabeledDataset has 64 queries, these results 1"):
        small.visualize([0], valid)


def test_visualize_qg_on_two_datasets(mock_root: Path, valid: Any) -> None:
    df = valid.df
    queries = ImageLabeledDataset(df.iloc[[0, 9]].reset_index(drop=True), dataset_root=mock_root)
    gallery = ImageLabeledDataset(df.iloc[[1, 8, 10, 2]].reset_index(drop=True), dataset_root=mock_root)
    xq, xg = torch.tensor([[0.0], [9.0]]), torch.tensor([[1.0], [8.0], [10.0], [2.0]])
    rr = RetrievalResults.from_embeddings_qg(xq, xg, queries, gallery, n_items=2)
    fig = rr.visualize_qg([1, 0], queries, gallery, n_galleries_to_show=2, n_gt_to_show=1)
    assert [ax.get_title() for ax in fig.axes] == [
        "Query #1", "#1: 1.000", "#2: 1.000", "GT #1",
        "Query #0", "#0: 1.000", "#3: 2.000", "GT #0",
    ]  # fmt: skip
    assert frame(fig.axes[1]) == rgb(RELEVANT_COLOR) and frame(fig.axes[5]) == rgb(RELEVANT_COLOR)
    assert np.array_equal(np.asarray(fig.axes[2].images[0].get_array()), gallery.visualize(2, RELEVANT_COLOR))
    with pytest.raises(ValueError, match="ImageLabeledDataset has 4 items, these results 2 queries"):
        rr.visualize_qg([0], gallery, gallery)


class TensorItems(IQueryGalleryDataset):
    """Items with an image tensor and no ``visualize``: the figure shows the tensor itself."""

    def __init__(self) -> None:
        self.images = torch.arange(3 * 4 * 4 * 3, dtype=torch.float32).reshape(3, 3, 4, 4)

    def __len__(self) -> int:
        return 3

    def __getitem__(self, item: int) -> dict[str, Any]:
        return {self.index_key: item, self.input_tensors_key: self.images[item]}

    def get_query_ids(self) -> torch.LongTensor:
        return torch.tensor([0])

    def get_gallery_ids(self) -> torch.LongTensor:
        return torch.tensor([1, 2])


def test_datasets_without_visualize_show_their_input_tensors() -> None:
    dataset = TensorItems()
    rr = RetrievalResults([torch.tensor([0.5])], [torch.tensor([1])], [torch.tensor([1])])
    fig = rr.visualize([0], dataset, n_gt_to_show=0)
    assert len(fig.axes) == 2
    image = dataset.images[2].permute(1, 2, 0)  # gallery position 1 is item 2
    expected = ((image - image.min()) / (image.max() - image.min())).numpy()
    np.testing.assert_allclose(np.asarray(fig.axes[1].images[0].get_array()), expected)
    assert frame(fig.axes[1]) == rgb(RELEVANT_COLOR)
