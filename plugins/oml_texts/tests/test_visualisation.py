"""Texts drawn end to end: the worst-query plots of ``EmbeddingMetrics.visualize`` and ``RetrievalResults.visualize``
on the mock texts (every panel the dataset's drawing of the right text, its frame rendered in the manual's colour),
and ``RetrievalResults.visualize_as_html`` showing the texts themselves, escaped. Embeddings are made by hand: item
``i`` at ``i`` on a line, so its neighbours are ``i - 1, i + 1, i - 2, ...`` (ties by gallery position)."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from oml_texts import TextQueryGalleryLabeledDataset, get_mock_texts_dataset

from oml_core.metrics import EmbeddingMetrics
from oml_core.retrieval import RetrievalResults
from tests.scripts.figure_frames import frames

BLUE, GREEN, RED, GREY = (0, 0, 255), (0, 255, 0), (255, 0, 0), (120, 120, 120)


@pytest.fixture(scope="module")
def mock_texts(minilm_tokenizer: Any) -> TextQueryGalleryLabeledDataset:
    """The 30 validation texts of the mock set: labels 18..23, 5 consecutive items each, all queries and gallery."""
    return TextQueryGalleryLabeledDataset(get_mock_texts_dataset()[1], minilm_tokenizer, max_length=16)


def line(n: int) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32)[:, None]


def test_the_worst_queries_of_every_metric_are_drawn_as_their_texts(mock_texts) -> None:
    metric = EmbeddingMetrics(
        mock_texts, cmc_top_k=(1,), precision_top_k=(5,), map_top_k=(), pcf_variance=(), verbose=False
    )
    metric.setup()
    metric.update(line(len(mock_texts)), torch.arange(len(mock_texts)))
    metric.compute_metrics()
    figures, titles = metric.visualize()
    assert titles == ["top 5 worst by OVERALL_cmc_1", "top 5 worst by OVERALL_precision_5"]
    # a row per query: the query, 5 retrieved texts and 2 ground truths
    assert [len(fig.axes) for fig in figures] == [5 * (1 + 5 + 2)] * 2
    cmc = figures[0]
    # the first text of each label but the first finds the last text of the label before at 1 (before its own
    # next one, at 1 too): cmc@1 = 0 for the queries 5, 10, 15, 20, 25, and 1 for all the others
    queries = [ax.get_title() for ax in cmc.axes[::8]]
    assert queries == ["Query #5", "Query #10", "Query #15", "Query #20", "Query #25"]
    first_row = cmc.axes[:8]
    assert [ax.get_title() for ax in first_row] == [
        "Query #5", "#4: 1.000", "#6: 1.000", "#3: 2.000", "#7: 2.000", "#2: 3.000", "GT #6", "GT #7",
    ]  # fmt: skip
    colors = [BLUE, RED, GREEN, RED, GREEN, RED, GREY, GREY]
    assert frames(cmc)[:8] == [{color} for color in colors]
    # every panel is the dataset's drawing of that text: the query's own, framed in the panel's colour
    for ax, item, color in zip(first_row, [5, 4, 6, 3, 7, 2, 6, 7], colors):
        picture = np.asarray(ax.images[0].get_array())
        assert np.array_equal(picture, mock_texts.visualize(item, color))
        assert picture[0, 0].tolist() == list(color)


def test_retrieval_results_draw_the_texts_of_the_queries_asked(mock_texts) -> None:
    rr = RetrievalResults.from_embeddings(line(len(mock_texts)), mock_texts, n_items=4)
    fig = rr.visualize([29, 0], mock_texts, n_galleries_to_show=3, n_gt_to_show=1)
    assert len(fig.axes) == 2 * (1 + 3 + 1)
    assert [ax.get_title() for ax in fig.axes] == [
        "Query #29", "#28: 1.000", "#27: 2.000", "#26: 3.000", "GT #25",
        "Query #0", "#1: 1.000", "#2: 2.000", "#3: 3.000", "GT #1",
    ]  # fmt: skip
    assert frames(fig) == [{BLUE}, {GREEN}, {GREEN}, {GREEN}, {GREY}] * 2
    texts = [np.asarray(ax.images[0].get_array()) for ax in fig.axes]
    assert np.array_equal(texts[1], mock_texts.visualize(28, GREEN))
    assert not np.array_equal(texts[1], texts[2])  # two texts, two pictures


class TextBlocks(HTMLParser):
    """The blocks of ``visualize_as_html``: ``[{"kind", "relevant", "title", "border", "text"}, ...]``, the
    title and the text unescaped (as a browser shows them)."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[dict[str, Any]] = []
        self.inside: str | None = None  # "title" or "text" while in one

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if "oml-item" in classes:
            self.blocks.append({"kind": a["data-kind"], "relevant": a.get("data-relevant"), "text": ""})
            self.inside = "title"
        elif "oml-frame" in classes:
            self.blocks[-1]["border"] = a["style"].split("px solid ")[1].split(";")[0]
        elif "oml-text" in classes:
            self.inside = "text"

    def handle_endtag(self, tag: str) -> None:
        if self.inside == "title" and tag == "div":
            self.inside = None
        elif self.inside == "text":
            self.inside = None

    def handle_data(self, data: str) -> None:
        if self.inside == "title":
            self.blocks[-1]["title"] = data
        elif self.inside == "text":
            self.blocks[-1]["text"] += data


def test_html_shows_the_texts_escaped_in_frames_of_their_relevance(minilm_tokenizer) -> None:
    texts = ["red <b>shoe</b> & lace", "red shoe", "blue hat", "blue cap"]
    df = pd.DataFrame({"label": [0, 0, 1, 1], "text": texts, "is_query": True, "is_gallery": True})
    dataset = TextQueryGalleryLabeledDataset(df, minilm_tokenizer, max_length=8)
    # "red shoe" at 1: the other red item at 1 (relevant), then "blue hat" at 3 and "blue cap" at 3.5 (not)
    embeddings = torch.tensor([[0.0], [1.0], [3.0], [3.5]])
    rr = RetrievalResults.from_embeddings(embeddings, dataset, n_items=3)
    html = rr.visualize_as_html([1, 0], dataset, n_galleries_to_show=3, n_gt_to_show=1)
    assert "red &lt;b&gt;shoe&lt;/b&gt; &amp; lace" in html and "<b>" not in html
    parser = TextBlocks()
    parser.feed(html)
    blue, green, red, grey = "rgb(0, 0, 255)", "rgb(0, 255, 0)", "rgb(255, 0, 0)", "rgb(120, 120, 120)"
    shown = [(b["kind"], b["title"], b["border"], b["text"]) for b in parser.blocks]
    assert shown == [
        ("query", "Query #1", blue, "red shoe"),
        ("retrieved", "#0: 1.000", green, "red <b>shoe</b> & lace"),
        ("retrieved", "#2: 2.000", red, "blue hat"),
        ("retrieved", "#3: 2.500", red, "blue cap"),
        ("gt", "GT #0", grey, "red <b>shoe</b> & lace"),
        ("query", "Query #0", blue, "red <b>shoe</b> & lace"),
        ("retrieved", "#1: 1.000", green, "red shoe"),
        ("retrieved", "#2: 3.000", red, "blue hat"),
        ("retrieved", "#3: 3.500", red, "blue cap"),
        ("gt", "GT #1", grey, "red shoe"),
    ]
    assert [b["relevant"] for b in parser.blocks[1:4]] == ["true", "false", "false"]
    assert "data:image/png" not in html  # texts, not pictures of them
