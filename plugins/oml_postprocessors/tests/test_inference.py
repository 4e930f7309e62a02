"""Batched pairwise inference and ``PairDataset``."""

from __future__ import annotations

import pytest
import torch
from oml_postprocessors import PairDataset, pairwise_inference
from oml_postprocessors.inference import model_device
from torch import nn

from oml_core.datasets import EmbeddingPairsDataset


@pytest.mark.parametrize("batch_size", [1, 3, 100])
def test_scores_every_pair_in_order(batch_size: int, dot_siamese) -> None:
    x1 = torch.arange(10, dtype=torch.float32).view(5, 2)
    x2 = torch.ones(5, 2)
    scores = pairwise_inference(
        dot_siamese, EmbeddingPairsDataset(x1, x2), num_workers=0, batch_size=batch_size
    )
    assert scores.dtype == torch.float32 and scores.device.type == "cpu"
    assert scores.tolist() == [1.0, 5.0, 9.0, 13.0, 17.0]


def test_no_pairs_give_no_scores(dot_siamese) -> None:
    empty = EmbeddingPairsDataset(torch.zeros(0, 2), torch.zeros(0, 2))
    assert pairwise_inference(dot_siamese, empty, num_workers=0, batch_size=4).shape == (0,)


def test_mode_is_restored_even_when_the_model_fails(oracle) -> None:
    pairs = EmbeddingPairsDataset(torch.zeros(3, 2), torch.zeros(3, 2))
    oracle.train()
    pairwise_inference(oracle, pairs, num_workers=0, batch_size=2)
    assert oracle.training and [c[:2] for c in oracle.calls] == [(False, False), (False, False)]

    class Failing(type(oracle)):
        def predict(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("boom")

    failing = Failing().train()
    with pytest.raises(RuntimeError, match="boom"):
        pairwise_inference(failing, pairs, num_workers=0, batch_size=2)
    assert failing.training


def test_model_device(oracle) -> None:
    assert model_device(oracle) == torch.device("cpu")  # no parameters
    assert model_device(nn.Linear(2, 2).to(torch.float64)) == torch.device("cpu")


def test_pair_dataset_items(embeddings_dataset_cls) -> None:
    base = embeddings_dataset_cls(torch.tensor([[0.0], [1.0], [2.0]]), [0, 1, 2])
    pairs = PairDataset(base, torch.tensor([[2, 0], [2, 1], [0, 2]]))
    assert len(pairs) == 3
    item = pairs[1]
    assert item["input_tensors_1"].tolist() == [2.0] and item["input_tensors_2"].tolist() == [1.0]
    assert item["idx"] == 1
    pairs, base.reads = PairDataset(base, pairs.pair_ids), 0
    [pairs[i] for i in range(3)]
    assert base.reads == 5  # item 2 is the first of pairs 0 and 1 in a row: read once for both


@pytest.mark.parametrize(
    ("pair_ids", "match"),
    [
        (torch.tensor([0, 1]), r"pair_ids must be \[n_pairs, 2\] integers"),
        (torch.tensor([[0.0, 1.0]]), r"pair_ids must be \[n_pairs, 2\] integers"),
        (torch.tensor([[0, 3]]), r"within \[0, 2\], got values in \[0, 3\]"),
        (torch.tensor([[-1, 0]]), r"within \[0, 2\]"),
    ],
)
def test_pair_dataset_refuses_bad_pair_ids(pair_ids, match, embeddings_dataset_cls) -> None:
    base = embeddings_dataset_cls(torch.zeros(3, 1), [0, 1, 2])
    with pytest.raises(ValueError, match=match):
        PairDataset(base, pair_ids)
