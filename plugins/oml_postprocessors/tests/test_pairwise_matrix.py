"""The manual's distance-matrix API: ``PairwiseEmbeddingsPostprocessor`` and ``PairwiseImagesPostprocessor``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from oml_postprocessors import (
    PairwiseEmbeddingsPostprocessor,
    PairwiseImagesPostprocessor,
    PairwisePostprocessor,
    PairwiseReranker,
)
from PIL import Image
from torch import Tensor

from oml_core.datasets import pil_to_tensor
from oml_core.interfaces.models import IPairwiseModel

# 3 queries x 4 galleries; the embeddings are 1-D, and DotSiamese scores a pair with the product
DISTANCES = torch.tensor([[0.3, 0.1, 0.4, 0.2], [0.5, 0.6, 0.7, 0.8], [0.9, 0.1, 0.2, 0.3]])
QUERIES = torch.tensor([[1.0], [2.0], [3.0]])
GALLERIES = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
# top_n=2. Row 0: columns 1, 3 -> scores 2, 4; the rest shifted by 4 - 0.3 + 1e-5.
# Row 1: columns 0, 1 -> 2, 4; shift 4 - 0.7 + 1e-5. Row 2: columns 1, 2 -> 6, 9; shift 9 - 0.3 + 1e-5.
EXPECTED_TOP2 = torch.tensor(
    [[4.00001, 2.0, 4.10001, 4.0], [2.0, 4.0, 4.00001, 4.10001], [9.60001, 6.0, 9.0, 9.00001]]
)


def embeddings_postprocessor(model: IPairwiseModel, top_n: int = 2) -> PairwiseEmbeddingsPostprocessor:
    return PairwiseEmbeddingsPostprocessor(top_n=top_n, pairwise_model=model, num_workers=0, batch_size=2)


def test_embeddings_postprocessor_on_a_hand_made_3x4_matrix(dot_siamese) -> None:
    distances = DISTANCES.clone()
    out = embeddings_postprocessor(dot_siamese).process(distances, QUERIES, GALLERIES)
    assert torch.allclose(out, EXPECTED_TOP2, atol=1e-6, rtol=0)
    assert torch.equal(distances, DISTANCES)  # the caller's matrix is not modified
    assert out.argsort(dim=1).tolist() == [[1, 3, 0, 2], [0, 1, 2, 3], [1, 2, 3, 0]]


def test_top_n_at_least_the_gallery_replaces_whole_rows(dot_siamese) -> None:
    out = embeddings_postprocessor(dot_siamese, top_n=10).process(DISTANCES, QUERIES, GALLERIES)
    assert torch.equal(out, QUERIES @ GALLERIES.T)


def test_inference_gives_the_scores_of_the_top_pairs(dot_siamese) -> None:
    ii_top = torch.tensor([[3, 0], [1, 1], [2, 0]])
    scores = embeddings_postprocessor(dot_siamese).inference(QUERIES, GALLERIES, ii_top, top_n=2)
    assert scores.tolist() == [[4.0, 1.0], [4.0, 4.0], [9.0, 3.0]]


def test_process_by_dict_selects_queries_and_galleries(dot_siamese) -> None:
    # items 0, 2, 4 are queries (1, 2, 3), items 1, 3, 5, 6 the galleries (1, 2, 3, 4)
    data = {
        "embeddings": torch.tensor([[1.0], [1.0], [2.0], [2.0], [3.0], [3.0], [4.0]]),
        "is_query": torch.tensor([1, 0, 1, 0, 1, 0, 0]).bool(),
        "is_gallery": [False, True, False, True, False, True, True],
    }
    out = embeddings_postprocessor(dot_siamese).process_by_dict(DISTANCES, data)
    assert torch.allclose(out, EXPECTED_TOP2, atol=1e-6, rtol=0)
    with pytest.raises(KeyError, match="data has no 'embeddings'"):
        embeddings_postprocessor(dot_siamese).process_by_dict(DISTANCES, {"is_query": [], "is_gallery": []})


def test_empty_matrices_are_returned_as_they_are(dot_siamese) -> None:
    postprocessor = embeddings_postprocessor(dot_siamese)
    assert postprocessor.process(torch.zeros(0, 4), torch.zeros(0, 1), GALLERIES).shape == (0, 4)
    assert postprocessor.process(torch.zeros(3, 0), QUERIES, torch.zeros(0, 1)).shape == (3, 0)


def test_bad_matrix_inputs_are_named(dot_siamese) -> None:
    postprocessor = embeddings_postprocessor(dot_siamese)
    with pytest.raises(ValueError, match=r"distances must be a \[Q, G\] tensor"):
        postprocessor.process(DISTANCES[0], QUERIES, GALLERIES)
    with pytest.raises(
        ValueError, match=r"queries must hold 3 items for distances of the shape \(3, 4\), got 2"
    ):
        postprocessor.process(DISTANCES, QUERIES[:2], GALLERIES)
    with pytest.raises(ValueError, match="galleries must hold 4 items"):
        postprocessor.process(DISTANCES, QUERIES, GALLERIES[:3])


class MeanGapSiamese(IPairwiseModel):
    """``predict(x1, x2) = |mean(x1) - mean(x2)|`` per pair of images."""

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return (x1.mean(dim=(1, 2, 3)) - x2.mean(dim=(1, 2, 3))).abs()

    def predict(self, x1: Tensor, x2: Tensor) -> Tensor:
        return self.forward(x1, x2)


def grey_images(folder: Path, levels: list[int]) -> list[str]:
    paths = []
    for i, level in enumerate(levels):
        path = folder / f"{i}_{level}.png"
        Image.fromarray(np.full((6, 5, 3), level, dtype=np.uint8)).save(path)
        paths.append(str(path))
    return paths


def test_images_postprocessor_on_grey_images(tmp_path: Path) -> None:
    queries = grey_images(tmp_path, [0, 153])  # means 0.0 and 0.6
    galleries = grey_images(tmp_path, [51, 102, 204, 255])  # 0.2, 0.4, 0.8, 1.0
    distances = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]])
    postprocessor = PairwiseImagesPostprocessor(
        top_n=2, pairwise_model=MeanGapSiamese(), transforms=pil_to_tensor
    )
    assert (postprocessor.num_workers, postprocessor.batch_size, postprocessor.verbose) == (0, 128, True)
    out = postprocessor.process(distances, queries, galleries)
    # row 0: columns 0, 1 -> 0.2, 0.4; the rest + (0.4 - 0.3 + 1e-5). Row 1: columns 3, 2 -> 0.4, 0.2; same shift
    expected = torch.tensor([[0.2, 0.4, 0.40001, 0.50001], [0.50001, 0.40001, 0.2, 0.4]])
    assert torch.allclose(out, expected, atol=1e-6, rtol=0)
    by_dict = postprocessor.process_by_dict(
        distances,
        {"paths": queries + galleries, "is_query": [1, 1, 0, 0, 0, 0], "is_gallery": [0, 0, 1, 1, 1, 1]},
    )
    assert torch.equal(by_dict, out)


def test_images_postprocessor_refuses_non_callable_transforms() -> None:
    with pytest.raises(TypeError, match="transforms must be callable or None, got str"):
        PairwiseImagesPostprocessor(top_n=2, pairwise_model=MeanGapSiamese(), transforms="norm_resize")


def test_the_matrix_postprocessors_share_the_base_and_its_checks(dot_siamese) -> None:
    assert issubclass(PairwiseEmbeddingsPostprocessor, PairwisePostprocessor)
    assert issubclass(PairwiseImagesPostprocessor, PairwisePostprocessor)
    assert not issubclass(PairwisePostprocessor, PairwiseReranker)
    with pytest.raises(ValueError, match="top_n must be an int >= 2, got 1"):
        embeddings_postprocessor(dot_siamese, top_n=1)
    with pytest.raises(TypeError, match="pairwise_model must be an instance"):
        PairwiseImagesPostprocessor(top_n=2, pairwise_model=object(), transforms=None)


def test_the_matrix_postprocessors_are_oml_distances_postprocessors_and_embedding_metrics_names_them(
    dot_siamese,
) -> None:
    from oml_core.interfaces.retrieval import IDistancesPostprocessor, IRetrievalPostprocessor
    from oml_core.metrics import EmbeddingMetrics

    matrix = embeddings_postprocessor(dot_siamese)
    assert isinstance(matrix, IDistancesPostprocessor) and not isinstance(matrix, IRetrievalPostprocessor)
    reranker = PairwiseReranker(top_n=2, pairwise_model=dot_siamese, num_workers=0, batch_size=2)
    assert EmbeddingMetrics(dataset=None, postprocessor=reranker).postprocessor is reranker
    with pytest.raises(
        TypeError, match=r"^postprocessor: PairwiseEmbeddingsPostprocessor re-ranks a whole distance"
    ):
        EmbeddingMetrics(dataset=None, postprocessor=matrix)
    with pytest.raises(TypeError, match="postprocessor must be an IRetrievalPostprocessor .*, got object"):
        EmbeddingMetrics(dataset=None, postprocessor=object())
