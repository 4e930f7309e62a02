"""Audio drawn end to end: the worst-query plots of ``EmbeddingMetrics.visualize`` and ``RetrievalResults.visualize``
on the mock clips (every panel the dataset's spectrogram thumbnail of the right clip, its frame rendered in the
manual's colour), and ``RetrievalResults.visualize_as_html`` with a player per block. Embeddings are made by hand:
clip ``i`` at ``i`` on a line, so its neighbours are ``i - 1, i + 1, i - 2, ...`` (ties by gallery position)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from oml_audio import AudioQueryGalleryLabeledDataset, get_mock_audios_dataset

from oml_core.metrics import EmbeddingMetrics
from oml_core.retrieval import RetrievalResults
from tests.scripts.figure_frames import frames

BLUE, GREEN, RED, GREY = (0, 0, 255), (0, 255, 0), (255, 0, 0), (120, 120, 120)


@pytest.fixture(scope="module")
def mock_clips(tmp_path_factory: pytest.TempPathFactory) -> AudioQueryGalleryLabeledDataset:
    """The 24 validation clips of the mock set: labels 4..7, 6 consecutive clips each, all queries and gallery."""
    df_val = get_mock_audios_dataset(tmp_path_factory.mktemp("mock_audio"), global_paths=True)[1]
    return AudioQueryGalleryLabeledDataset(df_val)


def line(n: int) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32)[:, None]


def test_the_worst_queries_of_every_metric_are_drawn_as_spectrograms(mock_clips) -> None:
    metric = EmbeddingMetrics(
        mock_clips, cmc_top_k=(1,), precision_top_k=(), map_top_k=(3,), pcf_variance=(), verbose=False
    )
    metric.setup()
    metric.update(line(len(mock_clips)), torch.arange(len(mock_clips)))
    metric.compute_metrics()
    figures, titles = metric.visualize()
    assert titles == ["top 5 worst by OVERALL_cmc_1", "top 5 worst by OVERALL_map_3"]
    # a row per query: the query, its 3 retrieved clips (the most the metrics asked for) and 2 ground truths
    assert [len(fig.axes) for fig in figures] == [5 * (1 + 3 + 2)] * 2
    cmc = figures[0]
    # the first clip of labels 5, 6, 7 finds the last clip of the label before at 1 first: cmc@1 = 0 for the
    # queries 6, 12, 18; then the queries of cmc@1 = 1 by id: 0, 1
    queries = [ax.get_title() for ax in cmc.axes[::6]]
    assert queries == ["Query #6", "Query #12", "Query #18", "Query #0", "Query #1"]
    first_row = cmc.axes[:6]
    assert [ax.get_title() for ax in first_row] == [
        "Query #6", "#5: 1.000", "#7: 1.000", "#4: 2.000", "GT #7", "GT #8",
    ]  # fmt: skip
    colors = [BLUE, RED, GREEN, RED, GREY, GREY]
    assert frames(cmc)[:6] == [{color} for color in colors]
    for ax, item, color in zip(first_row, [6, 5, 7, 4, 7, 8], colors):
        thumbnail = np.asarray(ax.images[0].get_array())
        assert np.array_equal(thumbnail, mock_clips.visualize(item, color))
        assert thumbnail.shape == (128, 128, 3) and (thumbnail[:4] == color).all()


def test_retrieval_results_draw_the_clips_of_the_queries_asked(mock_clips) -> None:
    rr = RetrievalResults.from_embeddings(line(len(mock_clips)), mock_clips, n_items=3)
    fig = rr.visualize([23, 12], mock_clips, n_galleries_to_show=2, n_gt_to_show=1)
    assert len(fig.axes) == 2 * (1 + 2 + 1)
    assert [ax.get_title() for ax in fig.axes] == [
        "Query #23", "#22: 1.000", "#21: 2.000", "GT #18",
        "Query #12", "#11: 1.000", "#13: 1.000", "GT #13",
    ]  # fmt: skip
    assert frames(fig) == [{BLUE}, {GREEN}, {GREEN}, {GREY}, {BLUE}, {RED}, {GREEN}, {GREY}]
    # a tone, a chirp and a noise burst are different pictures: the clips drawn are their own
    thumbnails = [np.asarray(ax.images[0].get_array())[4:-4, 4:-4] for ax in fig.axes]
    assert not np.array_equal(thumbnails[5], thumbnails[6])


def test_html_has_a_thumbnail_and_a_player_per_block_framed_by_relevance(mock_clips) -> None:
    rr = RetrievalResults.from_embeddings(line(len(mock_clips)), mock_clips, n_items=2)
    html = rr.visualize_as_html([12], mock_clips, n_galleries_to_show=2, n_gt_to_show=1)
    assert html.count("<audio controls") == html.count("data:image/png;base64,") == 1 + 2 + 1
    borders = re.findall(r"border: 5px solid (rgb\(\d+, \d+, \d+\))", html)
    assert borders == ["rgb(0, 0, 255)", "rgb(255, 0, 0)", "rgb(0, 255, 0)", "rgb(120, 120, 120)"]
    assert re.findall(r'data-relevant="(\w+)"', html) == ["false", "true"]
    assert re.findall(r'data-kind="(\w+)"', html) == ["query", "retrieved", "retrieved", "gt"]
