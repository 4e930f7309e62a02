"""Query/gallery datasets of stored embeddings: retrieval metrics of embeddings without images or dataframes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from oml_core.datasets import EmbeddingsQueryGalleryDataset, EmbeddingsQueryGalleryLabeledDataset
from oml_core.metrics import EmbeddingMetrics

# item:          0     1     2     3     4
X = torch.tensor([0.0, 1.0, 3.0, 5.5, 2.5]).unsqueeze(1)
LABELS = [0, 0, 1, 1, 0]
IS_QUERY = [True, False, True, False, False]
IS_GALLERY = [True, True, True, True, True]


def _metrics(dataset: EmbeddingsQueryGalleryLabeledDataset) -> dict:
    metric = EmbeddingMetrics(
        dataset, cmc_top_k=(1, 3), precision_top_k=(3,), map_top_k=(3,), pcf_variance=(), verbose=False
    )
    metric.setup(num_samples=len(dataset))
    metric.update(embeddings=dataset.embeddings, indices=torch.arange(len(dataset)))
    return metric.compute_metrics()


def test_embedding_metrics_of_stored_embeddings_by_hand():
    """Query 0 (x=0, label 0) retrieves 1 (d=1, hit), 4 (2.5, hit), 2 (3, miss): cmc@1 1, precision@3 2/2,
    map@3 (1/1 + 2/2) / 2 = 1. Query 2 (x=3, label 1) retrieves 4 (0.5, miss), 1 (2, miss), 3 (2.5, hit): cmc@1
    0, cmc@3 1, precision@3 1/min(3, 1) = 1, map@3 (1/3) / 1. Each query never retrieves itself."""
    dataset = EmbeddingsQueryGalleryLabeledDataset(X, LABELS, IS_QUERY, IS_GALLERY, categories=list("aabbb"))
    metrics = _metrics(dataset)
    overall = metrics["OVERALL"]
    assert float(overall["cmc"][1]) == pytest.approx(0.5)
    assert float(overall["cmc"][3]) == pytest.approx(1.0)
    assert float(overall["precision"][3]) == pytest.approx(1.0)
    assert float(overall["map"][3]) == pytest.approx((1 + 1 / 3) / 2)
    assert float(metrics["a"]["cmc"][1]) == pytest.approx(1.0)  # query 0's category
    assert float(metrics["b"]["map"][3]) == pytest.approx(1 / 3)  # query 2's


def test_a_sequence_hides_the_items_of_the_querys_own_sequence():
    """Items 2 and 3 share a sequence: query 2 has no relevant item left, so only query 0 counts as one with
    ground truth; query 2 retrieves 4, 1, 0 (all misses) and scores 0 by the metrics' rule."""
    dataset = EmbeddingsQueryGalleryLabeledDataset(X, LABELS, IS_QUERY, IS_GALLERY, sequence=[0, 1, 2, 2, 4])
    overall = _metrics(dataset)["OVERALL"]
    assert float(overall["cmc"][3]) == pytest.approx(0.5)


def test_the_items_and_the_split():
    dataset = EmbeddingsQueryGalleryLabeledDataset(
        X.numpy(), np.array(LABELS), torch.tensor([1, 0, 1, 0, 0]), IS_GALLERY
    )
    assert len(dataset) == 5
    item = dataset[-1]
    assert (
        item["idx"] == 4 and item["labels"] == 0 and torch.equal(item["input_tensors"], torch.tensor([2.5]))
    )
    assert dataset.get_query_ids().tolist() == [0, 2]
    assert dataset.get_gallery_ids().tolist() == [0, 1, 2, 3, 4]
    assert dataset.get_label2category() is None
    with pytest.raises(IndexError, match="item 5 is out of range for 5 embeddings"):
        dataset[5]
    unlabeled = EmbeddingsQueryGalleryDataset(X, IS_QUERY, IS_GALLERY)
    assert set(unlabeled[1]) == {"input_tensors", "idx"}
    categorised = EmbeddingsQueryGalleryLabeledDataset(
        X, LABELS, IS_QUERY, IS_GALLERY, categories=list("abcde")
    )
    assert categorised.get_label2category() == {0: "a", 1: "c"}  # the first category of each label


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"embeddings": torch.zeros(5)},
            r"embeddings must be a 2-D float tensor \[n_items, dim\], got .* \(5,\)",
        ),
        ({"embeddings": torch.zeros(5, 2, dtype=torch.long)}, "embeddings must be a 2-D float tensor"),
        ({"embeddings": torch.full((5, 1), float("nan"))}, "embeddings must be finite"),
        ({"labels": [0, 0, 1]}, r"labels must hold one value per embedding \(5\), got shape \(3,\)"),
        ({"labels": [0.5] * 5}, "labels must be integers, got dtype float64"),
        ({"is_query": [True] * 4}, r"is_query must hold one value per embedding \(5\)"),
        ({"is_gallery": [0, 1, 2, 1, 1]}, r"is_gallery must hold booleans \(or 0 and 1\)"),
        ({"categories": ["a"]}, r"categories must hold one value per embedding \(5\)"),
        ({"sequence": [[0, 1]] * 5}, r"sequence must hold one value per embedding \(5\), got shape \(5, 2\)"),
    ],
)
def test_bad_inputs_name_the_argument(kwargs, message):
    args = {"embeddings": X, "labels": LABELS, "is_query": IS_QUERY, "is_gallery": IS_GALLERY, **kwargs}
    with pytest.raises(ValueError, match=message):
        EmbeddingsQueryGalleryLabeledDataset(**args)
