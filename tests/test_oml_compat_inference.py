"""OML 4.0's ``oml.inference`` (``inference_cached``, ``pairwise_inference``) and ``oml.retrieval.PairwiseReranker`` at
OML's paths, on hand-computed cases, and OML's warning for queries without ground truth."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import Tensor, nn

from oml_core.caches.embeddings import NotAnEmbeddingsCacheError
from oml_core.datasets import EmbeddingsQueryGalleryLabeledDataset
from oml_core.interfaces.models import IPairwiseModel
from oml_core.retrieval import RetrievalResults


def points(values: list[float]) -> EmbeddingsQueryGalleryLabeledDataset:
    every = torch.ones(len(values), dtype=torch.bool)
    embeddings = torch.tensor(values)[:, None]
    return EmbeddingsQueryGalleryLabeledDataset(embeddings, list(range(len(values))), every, every)


class Scale(nn.Module):
    """``factor * x``, counting its calls."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = nn.Parameter(torch.tensor(factor))
        self.calls = 0

    def forward(self, x: Tensor) -> Tensor:
        self.calls += 1
        return self.factor * x


class AbsDifference(IPairwiseModel):
    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return (x1 - x2).abs().sum(dim=1)

    def predict(self, x1: Tensor, x2: Tensor) -> Tensor:
        return self.forward(x1, x2)


def test_pairwise_reranker_is_the_plugins_at_both_oml_paths():
    from oml_core.retrieval.postprocessors.pairwise import PairwiseReranker as FromPairwise
    from oml_postprocessors import PairwiseReranker

    from oml_core.retrieval import PairwiseReranker as FromRetrieval

    assert FromRetrieval is PairwiseReranker and FromPairwise is PairwiseReranker
    # gallery positions 0, 1 are the items 1, 2 (x = 1, 2); the query (x = 0) retrieved [item 2, item 1]; the model
    # scores |0 - 2| = 2 and |0 - 1| = 1, so the re-ranked order is [item 1, item 2]: positions [0, 1]
    rr = RetrievalResults([torch.tensor([0.5, 0.6])], [torch.tensor([1, 0])], [torch.tensor([0])])
    dataset = EmbeddingsQueryGalleryLabeledDataset(
        torch.tensor([[0.0], [1.0], [2.0]]), [0, 1, 2], [True, False, False], [False, True, True]
    )
    reranked = PairwiseReranker(top_n=2, pairwise_model=AbsDifference(), num_workers=0, batch_size=4).process(
        rr, dataset
    )
    assert reranked.retrieved_ids[0].tolist() == [0, 1]


def test_pairwise_inference_takes_omls_arguments():
    from oml_core.inference.abstract import inference as abstract_inference
    from oml_core.inference.abstract import inference_cached as abstract_inference_cached
    from oml_core.inference.abstract import pairwise_inference as abstract_pairwise_inference

    from oml_core.inference import inference, inference_cached, pairwise_inference

    assert (abstract_inference, abstract_inference_cached) == (
        inference,
        inference_cached,
    )  # OML's module path
    assert abstract_pairwise_inference is pairwise_inference

    dataset = points([0.0, 1.0, 3.0])
    # OML's positional order: model, base_dataset, pair_ids, num_workers, batch_size
    scores = pairwise_inference(AbsDifference(), dataset, [(0, 1), (2, 0), (1, 1)], 0, 2)
    assert scores.tolist() == [1.0, 3.0, 0.0]
    with pytest.raises(ValueError, match=r"within \[0, 2\]"):
        pairwise_inference(AbsDifference(), dataset, [(0, 3)], 0, 2)


def test_inference_cached_computes_once_and_never_reads_another_models_outputs(tmp_path):
    from oml_core.inference import inference_cached

    dataset, cache = points([1.0, 2.0, 4.0]), tmp_path / "outputs.pth"
    model = Scale(3.0)
    first = inference_cached(model, dataset, batch_size=2, num_workers=0, cache_path=str(cache))
    assert first.tolist() == [[3.0], [6.0], [12.0]] and model.calls == 2 and cache.is_file()
    again = inference_cached(model, dataset, batch_size=2, cache_path=cache)
    assert torch.equal(again, first) and model.calls == 2  # read from the cache

    other = Scale(-1.0)
    with pytest.warns(UserWarning, match="written for other data, another extractor"):
        assert inference_cached(other, dataset, batch_size=3, cache_path=cache).tolist() == [
            [-1.0],
            [-2.0],
            [-4.0],
        ]
    with pytest.warns(UserWarning, match="written for other data"):  # another dataset, the same model
        assert inference_cached(other, points([5.0]), batch_size=3, cache_path=cache).tolist() == [[-5.0]]

    foreign = tmp_path / "weights.pth"
    torch.save({"state_dict": {}}, foreign)
    with pytest.raises(NotAnEmbeddingsCacheError, match="is not an oml embeddings cache"):
        inference_cached(model, dataset, batch_size=2, cache_path=foreign)
    assert torch.load(foreign, weights_only=True) == {"state_dict": {}}  # left untouched


def test_omls_warning_for_queries_without_ground_truth():
    with pytest.warns(UserWarning, match="Some of the queries don't have available gts."):
        RetrievalResults(
            [torch.tensor([0.1]), torch.tensor([0.2])],
            [torch.tensor([0]), torch.tensor([1])],
            [torch.tensor([0]), torch.tensor([], dtype=torch.long)],
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RetrievalResults([torch.tensor([0.1])], [torch.tensor([0])], [torch.tensor([0])])
        RetrievalResults([torch.tensor([0.1])], [torch.tensor([0])])  # no ground truth at all
