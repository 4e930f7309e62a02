"""``RetrievalResults.visualize`` (one row per query on the mock figures dataset, checked axis by axis and pixel
by pixel) and ``RetrievalResults.visualize_as_html`` (checked block by block)."""

from __future__ import annotations

import base64
import io
import sys
import types
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from PIL import Image

from oml_core.datasets import get_mock_dataset_root
from oml_core.datasets.images import (
    ImageLabeledDataset,
    ImageQueryGalleryLabeledDataset,
    get_retrieval_images_datasets,
)
from oml_core.interfaces.datasets import IQueryGalleryDataset
from oml_core.retrieval import RetrievalResults
from oml_core.retrieval.retrieval_results import (
    GT_COLOR,
    IRRELEVANT_COLOR,
    QUERY_COLOR,
    RELEVANT_COLOR,
    UNKNOWN_COLOR,
)
from tests.scripts.figure_frames import frame_pixels, rendered


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


# ------------------------------------------------------------------------------ colours of the manual
def test_the_colours_are_the_manuals_with_omls_values() -> None:
    # the manual: "A query (blue) ... they are all red because they are irrelevant ... ground truths (grey)"
    assert QUERY_COLOR == (0, 0, 255)  # OML's BLUE
    assert GT_COLOR == (120, 120, 120)  # OML's GRAY
    assert RELEVANT_COLOR == (0, 255, 0)  # OML's GREEN
    assert IRRELEVANT_COLOR == (255, 0, 0)  # OML's RED
    assert UNKNOWN_COLOR == (0, 0, 0)  # OML's BLACK


def test_rendered_frames_are_blue_query_grey_gt_green_and_red_retrieved(valid: Any) -> None:
    rr = RetrievalResults.from_embeddings(line_embeddings(len(valid)), valid, n_items=5)
    # query 7 (label of items 0..7): retrieved 6 (relevant), 8 (not), then its first ground truth, item 0
    fig = rr.visualize([7], valid, n_galleries_to_show=2, n_gt_to_show=1)
    image = rendered(fig)
    assert [ax.get_title() for ax in fig.axes] == ["Query #7", "#6: 1.000", "#8: 1.000", "GT #0"]
    assert [frame_pixels(image, ax) for ax in fig.axes] == [
        {(0, 0, 255)},  # the query: blue
        {(0, 255, 0)},  # relevant: green
        {(255, 0, 0)},  # irrelevant: red
        {(120, 120, 120)},  # ground truth: grey
    ]


# --------------------------------------------------------------------------------- visualize_as_html
class Blocks(HTMLParser):
    """The rows and blocks of ``visualize_as_html``'s output: ``rows[r]`` is ``{"query": ..., "items":
    [{"kind", "position", "distance", "relevant", "title", "border", "image"}, ...]}``."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, Any]] = []
        self.item: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if "oml-row" in classes:
            self.rows.append({"query": int(a["data-query"]), "items": []})
        elif "oml-item" in classes:
            self.item = {k[5:]: v for k, v in a.items() if k.startswith("data-")}
            self.item["title"] = None
            self.rows[-1]["items"].append(self.item)
        elif "oml-frame" in classes:
            self.item["border"] = a["style"].split("px solid ")[1].split(";")[0]
        elif tag == "img":
            prefix = "data:image/png;base64,"
            assert a["src"].startswith(prefix)
            png = base64.b64decode(a["src"][len(prefix) :])
            self.item["image"] = np.asarray(Image.open(io.BytesIO(png)))

    def handle_data(self, data: str) -> None:
        if self.item is not None and self.item["title"] is None and data.strip():
            self.item["title"] = data.strip()


def parse(html: str) -> list[dict[str, Any]]:
    parser = Blocks()
    parser.feed(html)
    return parser.rows


def test_html_rows_blocks_distances_markings_and_images(valid: Any) -> None:
    rr = RetrievalResults.from_embeddings(line_embeddings(len(valid)), valid, n_items=5)
    html = rr.visualize_as_html([7, 0], valid, n_galleries_to_show=4, n_gt_to_show=2)
    assert html.startswith('<div class="oml-retrieval-results">') and "<html" not in html
    rows = parse(html)
    assert [row["query"] for row in rows] == [7, 0]
    seven, zero = (row["items"] for row in rows)
    assert [b["kind"] for b in seven] == ["query"] + ["retrieved"] * 4 + ["gt"] * 2
    assert [b["title"] for b in seven] == [
        "Query #7", "#6: 1.000", "#8: 1.000", "#5: 2.000", "#9: 2.000", "GT #0", "GT #1",
    ]  # fmt: skip
    assert [b.get("position") for b in seven] == [None, "6", "8", "5", "9", "0", "1"]
    assert [b.get("distance") for b in seven[1:5]] == ["1.0", "1.0", "2.0", "2.0"]
    assert [b.get("relevant") for b in seven[1:5]] == ["true", "false", "true", "false"]
    blue, green, red, grey = "rgb(0, 0, 255)", "rgb(0, 255, 0)", "rgb(255, 0, 0)", "rgb(120, 120, 120)"
    assert [b["border"] for b in seven] == [blue, green, red, green, red, grey, grey]
    assert [b["title"] for b in zero] == [
        "Query #0", "#1: 1.000", "#2: 2.000", "#3: 3.000", "#4: 4.000", "GT #1", "GT #2",
    ]  # fmt: skip
    assert [b.get("relevant") for b in zero[1:5]] == ["true"] * 4
    assert [b["border"] for b in zero] == [blue] + [green] * 4 + [grey] * 2
    # every embedded image is the dataset's drawing of that item with its bounding box in the block's colour
    colors = [
        QUERY_COLOR,
        RELEVANT_COLOR,
        IRRELEVANT_COLOR,
        RELEVANT_COLOR,
        IRRELEVANT_COLOR,
        GT_COLOR,
        GT_COLOR,
    ]
    for block, item, color in zip(seven, [7, 6, 8, 5, 9, 0, 1], colors):
        assert np.array_equal(block["image"], valid.visualize(item, color))


def solid_images(folder: Path, n: int) -> list[str]:
    """``n`` real 8x6 PNG files, image ``i`` of the solid colour ``(40 * i, 100, 200)``."""
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(n):
        Image.new("RGB", (8, 6), (40 * i, 100, 200)).save(folder / f"{i}.png")
        names.append(f"{i}.png")
    return names


@pytest.fixture()
def six_images(tmp_path: Path) -> ImageQueryGalleryLabeledDataset:
    """Items 0, 1 are the queries, items 2..5 the gallery (gallery position ``p`` is item ``p + 2``)."""
    df = pd.DataFrame(
        {
            "label": [0, 1, 0, 1, 0, 2],
            "path": solid_images(tmp_path / "images", 6),
            "is_query": [True, True, False, False, False, False],
            "is_gallery": [False, False, True, True, True, True],
        }
    )
    return ImageQueryGalleryLabeledDataset(df, dataset_root=tmp_path / "images")


def test_html_maps_gallery_positions_to_items_and_pads_short_rows(
    six_images: ImageQueryGalleryLabeledDataset, tmp_path: Path
) -> None:
    rr = RetrievalResults.from_embeddings(
        torch.tensor([[0.0], [10.0], [0.5], [9.0], [3.0], [50.0]]), six_images, 3
    )
    short = RetrievalResults(
        [rr.distances[0][:1], rr.distances[1]], [rr.retrieved_ids[0][:1], rr.retrieved_ids[1]], rr.gt_ids
    )
    path = tmp_path / "out" / "results.html"
    path.parent.mkdir()
    html = short.visualize_as_html([0, 1], six_images, n_galleries_to_show=3, n_gt_to_show=5, save_path=path)
    first, second = (row["items"] for row in parse(html))
    # query 0 (item 0, label 0) at 0.0 retrieved only gallery position 0 (item 2, label 0) at 0.5
    assert [b["kind"] for b in first] == ["query", "retrieved", "placeholder", "placeholder", "gt", "gt"]
    assert (first[1]["position"], first[1]["distance"], first[1]["relevant"]) == ("0", "0.5", "true")
    assert [b.get("position") for b in first[4:]] == ["0", "2"]  # items 2 and 4: label 0
    # query 1 (item 1, label 1) at 10.0: positions 1 (9.0), 2 (3.0), 0 (0.5); its ground truth is position 1
    assert [b["kind"] for b in second] == ["query", "retrieved", "retrieved", "retrieved", "gt"]
    assert [(b["position"], b["distance"], b["relevant"]) for b in second[1:4]] == [
        ("1", "1.0", "true"), ("2", "7.0", "false"), ("0", "9.5", "false"),
    ]  # fmt: skip
    # the embedded images are the items' files: item i is solid (40 i, 100, 200)
    shown_items = [b["image"][0, 0].tolist() for b in second if "image" in b]
    assert shown_items == [[40 * i, 100, 200] for i in (1, 3, 4, 2, 3)]
    assert second[0]["image"].shape == (6, 8, 3)
    # the file is a whole page holding the same fragment, and nothing else is left in its folder
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and html in page and page.rstrip().endswith("</html>")
    assert "oml-legend" in page and [p.name for p in path.parent.iterdir()] == ["results.html"]


def test_html_without_ground_truth_marks_unknown_in_black(
    six_images: ImageQueryGalleryLabeledDataset,
) -> None:
    rr = RetrievalResults(
        [torch.tensor([0.25, 1.5]), torch.tensor([2.0])], [torch.tensor([3, 1]), torch.tensor([0])]
    )
    rows = parse(rr.visualize_as_html([1, 0], six_images, n_gt_to_show=2))
    assert [[b["kind"] for b in row["items"]] for row in rows] == [
        ["query", "retrieved", "placeholder"],
        ["query", "retrieved", "retrieved"],
    ]
    retrieved = [b for row in rows for b in row["items"] if b["kind"] == "retrieved"]
    assert [(b["position"], b["distance"], b["relevant"], b["border"]) for b in retrieved] == [
        ("0", "2.0", "unknown", "rgb(0, 0, 0)"),
        ("3", "0.25", "unknown", "rgb(0, 0, 0)"),
        ("1", "1.5", "unknown", "rgb(0, 0, 0)"),
    ]
    assert [b["title"] for b in retrieved] == ["#0: 2.000", "#3: 0.250", "#1: 1.500"]


def test_html_uses_a_datasets_own_html_blocks(six_images: ImageQueryGalleryLabeledDataset) -> None:
    calls = []

    class AudioLike(ImageQueryGalleryLabeledDataset):  # OML's IHTMLVisualizableDataset: audio datasets
        def visualize_as_html(self, item: int, title: str, color: tuple[int, int, int]) -> str:
            calls.append((item, title, color))
            return f"<p>item {item}</p>"

    dataset = AudioLike(six_images.df, dataset_root=six_images.dataset_root)
    rr = RetrievalResults(
        [torch.tensor([1.0])] * 2, [torch.tensor([1])] * 2, [torch.tensor([1]), torch.tensor([0])]
    )
    html = rr.visualize_as_html([0], dataset, n_gt_to_show=1)
    assert calls == [(0, "Query #0", QUERY_COLOR), (3, "#1: 1.000", RELEVANT_COLOR), (3, "GT #1", GT_COLOR)]
    assert [b["title"] for b in parse(html)[0]["items"]] == ["item 0", "item 3", "item 3"]


def test_html_show_and_bad_arguments(
    six_images: ImageQueryGalleryLabeledDataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    rr = RetrievalResults([torch.tensor([1.0])] * 2, [torch.tensor([1])] * 2, [torch.tensor([1])] * 2)
    with pytest.raises(ValueError, match=r"query_ids must be non-empty positions in \[0, 1\], got \[2\]"):
        rr.visualize_as_html([0, 2], six_images)
    with pytest.raises(ValueError, match="n_galleries_to_show must be an integer >= 1, got 0"):
        rr.visualize_as_html([0], six_images, n_galleries_to_show=0)
    with pytest.raises(ValueError, match="ImageQueryGalleryLabeledDataset has 2 queries, these results 1"):
        RetrievalResults([torch.zeros(0)], [torch.zeros(0, dtype=torch.long)]).visualize_as_html(
            [0], six_images
        )
    monkeypatch.setitem(sys.modules, "IPython", None)  # not installed
    monkeypatch.setitem(sys.modules, "IPython.display", None)
    with pytest.raises(ImportError, match=r"needs IPython \(pip install ipython\)"):
        rr.visualize_as_html([0], six_images, show=True)
    shown = []
    display = types.ModuleType("IPython.display")
    display.HTML = lambda text: ("HTML", text)
    display.display = shown.append
    monkeypatch.setitem(sys.modules, "IPython", types.ModuleType("IPython"))
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    html = rr.visualize_as_html([0], six_images, show=True)
    assert shown == [("HTML", html)]
