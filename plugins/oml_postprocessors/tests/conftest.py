"""Fixtures of the post-processors' tests: an embeddings dataset, hand-built pairwise models, a naive re-ranker."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import torch
from torch import LongTensor, Tensor

from oml_core.interfaces.datasets import IQueryGalleryLabeledDataset
from oml_core.interfaces.models import IPairwiseModel
from oml_core.retrieval import RetrievalResults


class EmbeddingsDataset(IQueryGalleryLabeledDataset):
    """Items are embeddings (``input_tensors``) with labels; every item is a query and in the gallery."""

    def __init__(self, embeddings: Tensor, labels: Sequence[int]) -> None:
        self.embeddings = embeddings
        self.labels = np.asarray(labels)
        self.reads = 0

    def __len__(self) -> int:
        return len(self.embeddings)

    def __getitem__(self, item: int) -> dict[str, Any]:
        self.reads += 1
        return {
            self.input_tensors_key: self.embeddings[item],
            self.labels_key: self.labels[item],
            "idx": item,
        }

    def get_labels(self) -> np.ndarray:
        return self.labels

    def get_query_ids(self) -> LongTensor:
        return torch.arange(len(self))

    def get_gallery_ids(self) -> LongTensor:
        return torch.arange(len(self))


class OracleSiamese(IPairwiseModel):
    """Knows the labels: they are the first coordinate of the embeddings. Distance 0 for the same label, else 1.

    Records the mode and the autograd state it was called in.
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[bool, bool, int]] = []

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        self.calls.append((self.training, torch.is_grad_enabled(), len(x1)))
        return (x1[:, 0] != x2[:, 0]).float()

    def predict(self, x1: Tensor, x2: Tensor) -> Tensor:
        return self.forward(x1, x2)


class DotSiamese(IPairwiseModel):
    """``predict(x1, x2) = sum(x1 * x2)`` per pair: a hand-computable score."""

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return (x1 * x2).flatten(1).sum(1)

    def predict(self, x1: Tensor, x2: Tensor) -> Tensor:
        return self.forward(x1, x2)


def labelled_embeddings(n_labels: int, per_label: int, dim: int, seed: int) -> tuple[Tensor, list[int]]:
    """Random embeddings whose first coordinate is ``label * 1e-3``: the label barely moves the L2 distances
    (so the kNN ranking is mostly wrong) but the oracle reads it exactly."""
    generator = torch.Generator().manual_seed(seed)
    labels = [label for label in range(n_labels) for _ in range(per_label)]
    embeddings = torch.randn(len(labels), dim, generator=generator)
    embeddings[:, 0] = torch.tensor(labels, dtype=torch.float32) * 1e-3
    return embeddings, labels


def naive_rerank(
    distances: Sequence[float], ids: Sequence[int], scores: Sequence[float], top_n: int, eps: float
) -> tuple[list[float], list[int]]:
    """The re-ranking rule of one query, written out with Python floats (the reference of the tests)."""
    m = min(top_n, len(ids))
    order = sorted(range(m), key=lambda k: (scores[k], k))
    new = [float(scores[k]) for k in order]
    rest = [float(d) for d in distances[m:]]
    if rest and new[-1] > rest[0]:
        nxt, last = rest[0], new[-1]
        if nxt > 0:
            new = [s * nxt / last - eps for s in new]
        else:
            new = [s - (last - nxt) - eps for s in new]
        new = [min(s, nxt) for s in new]
    return new + rest, [ids[k] for k in order] + list(ids[m:])


@pytest.fixture()
def embeddings_dataset() -> Callable[..., EmbeddingsDataset]:
    """``make(n_labels, per_label, dim, seed)``: an :class:`EmbeddingsDataset` of labelled embeddings."""

    def make(n_labels: int = 6, per_label: int = 4, dim: int = 8, seed: int = 0) -> EmbeddingsDataset:
        return EmbeddingsDataset(*labelled_embeddings(n_labels, per_label, dim, seed))

    return make


@pytest.fixture()
def oracle() -> OracleSiamese:
    return OracleSiamese()


@pytest.fixture()
def dot_siamese() -> DotSiamese:
    return DotSiamese()


@pytest.fixture()
def naive() -> Callable[..., tuple[list[float], list[int]]]:
    """:func:`naive_rerank`."""
    return naive_rerank


@pytest.fixture()
def embeddings_dataset_cls() -> type[EmbeddingsDataset]:
    return EmbeddingsDataset


@pytest.fixture()
def snapshot() -> Callable[[RetrievalResults], tuple[list[Tensor], ...]]:
    """``snapshot(rr)``: copies of every tensor of ``rr``, to check later that it was not modified."""

    def take(rr: RetrievalResults) -> tuple[list[Tensor], ...]:
        gt = [] if rr.gt_ids is None else [t.clone() for t in rr.gt_ids]
        return [t.clone() for t in rr.distances], [t.clone() for t in rr.retrieved_ids], gt

    return take
