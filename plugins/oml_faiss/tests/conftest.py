"""Data of the faiss backends' tests: clustered embeddings, a labelled query/gallery dataset, naive search."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from torch import LongTensor, Tensor

from oml_core.interfaces.datasets import IQueryGalleryLabeledDataset


def clustered(
    n: int, dim: int, n_clusters: int, seed: int, n_queries: int = 0, spread: float = 1.0
) -> tuple[Tensor, Tensor, LongTensor]:
    """``n`` gallery and ``n_queries`` query points around ``n_clusters`` gaussian centres (``N(0, spread^2)``
    entries) with unit gaussian noise, and the clusters of the gallery points."""
    generator = torch.Generator().manual_seed(seed)
    centres = torch.randn(n_clusters, dim, generator=generator) * spread
    labels = torch.randint(0, n_clusters, (n + n_queries,), generator=generator)
    x = centres[labels] + torch.randn(n + n_queries, dim, generator=generator)
    return x[:n], x[n:], labels[:n]


def naive_search(
    gallery: Tensor, queries: Tensor, k: int, groups: LongTensor, exclude: LongTensor | None, distance: str
) -> tuple[Tensor, LongTensor]:
    """The whole distance matrix in float64, excluded pairs at ``inf``, a stable sort (ties by position)."""
    gallery, queries = gallery.double(), queries.double()
    if distance == "l2":
        dist = torch.cdist(queries, gallery)
    else:
        normalise = torch.nn.functional.normalize
        dist = (1 - normalise(queries, dim=1) @ normalise(gallery, dim=1).T).clamp(0, 2)
    if exclude is not None:
        dist = dist.masked_fill(groups[None, :] == exclude[:, None], float("inf"))
    order = torch.sort(dist, dim=1, stable=True).indices[:, :k]
    d = torch.gather(dist, 1, order)
    if d.shape[1] < k:
        d = torch.cat([d, torch.full((len(d), k - d.shape[1]), float("inf"), dtype=d.dtype)], 1)
        order = torch.cat([order, torch.full((len(d), k - order.shape[1]), -1)], 1)
    return d, order.masked_fill(torch.isinf(d), -1)


def recall_at(found: LongTensor, expected: LongTensor) -> float:
    """The mean share of each row of ``expected`` (valid ids) that ``found``'s row holds."""
    hits = total = 0
    for f, e in zip(found.tolist(), expected.tolist()):
        e = {i for i in e if i >= 0}
        hits += len(e & set(f))
        total += len(e)
    return hits / total


class EmbeddingsDataset(IQueryGalleryLabeledDataset):
    """Labels, an is_query / is_gallery split and optional columns (``sequence``) in ``df``."""

    def __init__(
        self, labels: list[int], is_query: list[bool], is_gallery: list[bool], **columns: Any
    ) -> None:
        self.df = pd.DataFrame({"label": labels, "is_query": is_query, "is_gallery": is_gallery, **columns})

    def __len__(self) -> int:
        return len(self.df)

    def __getitem__(self, item: int) -> dict[str, Any]:
        return {self.index_key: item, self.labels_key: self.df["label"].iloc[item]}

    def get_labels(self) -> np.ndarray:
        return self.df["label"].to_numpy()

    def get_query_ids(self) -> LongTensor:
        return torch.nonzero(torch.tensor(self.df["is_query"].to_numpy())).squeeze(1)

    def get_gallery_ids(self) -> LongTensor:
        return torch.nonzero(torch.tensor(self.df["is_gallery"].to_numpy())).squeeze(1)


def clustered_dataset(
    n: int, dim: int, n_clusters: int, seed: int, with_sequence: bool = False
) -> tuple[Tensor, EmbeddingsDataset]:
    """Clustered embeddings labelled by cluster, about 60% queries and 80% gallery items, and sequences of
    about 4 items when asked for."""
    x, _, labels = clustered(n, dim, n_clusters, seed, spread=2.0)
    rng = np.random.default_rng(seed)
    columns = {"sequence": rng.integers(0, n // 4, size=n).tolist()} if with_sequence else {}
    dataset = EmbeddingsDataset(
        labels.tolist(), (rng.random(n) < 0.6).tolist(), (rng.random(n) < 0.8).tolist(), **columns
    )
    return x, dataset


@pytest.fixture(scope="session")
def make_dataset() -> Callable[..., tuple[Tensor, EmbeddingsDataset]]:
    """:func:`clustered_dataset`."""
    return clustered_dataset


@pytest.fixture(scope="session")
def make_clustered() -> Callable[..., tuple[Tensor, Tensor, LongTensor]]:
    """:func:`clustered` (a fixture, as test modules cannot import the conftest under importlib mode)."""
    return clustered


@pytest.fixture(scope="session")
def naive() -> Callable[..., tuple[Tensor, LongTensor]]:
    """:func:`naive_search`."""
    return naive_search


@pytest.fixture(scope="session")
def recall() -> Callable[[LongTensor, LongTensor], float]:
    """:func:`recall_at`."""
    return recall_at
