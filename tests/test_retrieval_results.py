"""RetrievalResults: validation, and the chunked kNN retrieval compared with a naive full-matrix one."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from torch import FloatTensor, LongTensor

import oml_core.utils.ragged as ragged_module
from oml_core.functional.metrics import RetrievedIdsNotUniqueError
from oml_core.interfaces.datasets import (
    IBaseDataset,
    ILabeledDataset,
    IQueryGalleryDataset,
    IQueryGalleryLabeledDataset,
)
from oml_core.knn.distances import NonFiniteDistanceError
from oml_core.knn.exact import ExactKnnIndex
from oml_core.metrics import EmbeddingMetrics
from oml_core.retrieval import RetrievalResults


class FakeQGDataset(IQueryGalleryLabeledDataset):
    """Items with labels, an is_query / is_gallery split and optional extra columns in ``df``."""

    def __init__(
        self, labels: list[Any], is_query: list[bool], is_gallery: list[bool], **columns: list[Any]
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


class UnlabeledDataset(IQueryGalleryDataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, item: int) -> dict[str, Any]:
        return {self.index_key: item}

    def get_query_ids(self) -> LongTensor:
        return torch.arange(self.n)

    def get_gallery_ids(self) -> LongTensor:
        return torch.arange(self.n)


def naive_retrieval(
    embeddings: torch.Tensor, dataset: FakeQGDataset, n_items: int, distance: str
) -> tuple[list[list[float]], list[list[int]], list[list[int]]]:
    """Loops over every (query, gallery) pair: the full Q x G matrix, sorted per query, no chunks."""
    x = embeddings.double().tolist()
    labels = dataset.get_labels().tolist()
    sequence = dataset.df["sequence"].tolist() if "sequence" in dataset.df else None
    query_ids, gallery_ids = dataset.get_query_ids().tolist(), dataset.get_gallery_ids().tolist()

    def dist(a: list[float], b: list[float]) -> float:
        if distance == "l2":
            return math.sqrt(sum((u - v) ** 2 for u, v in zip(a, b)))
        dot = sum(u * v for u, v in zip(a, b))
        return 1 - dot / (math.sqrt(sum(u * u for u in a)) * math.sqrt(sum(v * v for v in b)))

    distances, retrieved, gts = [], [], []
    for q in query_ids:
        candidates, gt = [], []
        for position, g in enumerate(gallery_ids):
            if g == q or (sequence is not None and sequence[g] == sequence[q]):
                continue
            candidates.append((dist(x[q], x[g]), position))
            if labels[g] == labels[q]:
                gt.append(position)
        candidates.sort()
        distances.append([d for d, _ in candidates[:n_items]])
        retrieved.append([p for _, p in candidates[:n_items]])
        gts.append(gt)
    return distances, retrieved, gts


def random_dataset(seed: int, n: int = 40, with_sequence: bool = False) -> tuple[torch.Tensor, FakeQGDataset]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 6, size=n).tolist()
    is_query = (rng.random(n) < 0.6).tolist()
    is_gallery = (rng.random(n) < 0.8).tolist()
    columns = {"sequence": rng.integers(0, 10, size=n).tolist()} if with_sequence else {}
    dataset = FakeQGDataset(labels, is_query, is_gallery, **columns)
    embeddings = torch.tensor(rng.normal(size=(n, 5)), dtype=torch.float32)
    return embeddings, dataset


def assert_same_as_naive(rr: RetrievalResults, naive: tuple[list[list[float]], ...]) -> None:
    distances, retrieved, gts = naive
    assert len(rr) == len(retrieved)
    assert [r.tolist() for r in rr.retrieved_ids] == retrieved
    assert rr.gt_ids is not None
    assert [g.tolist() for g in rr.gt_ids] == gts
    assert rr.n_gts == [len(g) for g in gts]
    for actual, expected in zip(rr.distances, distances):
        torch.testing.assert_close(
            actual.double(), torch.tensor(expected, dtype=torch.float64), atol=1e-5, rtol=1e-5
        )


@pytest.mark.parametrize(
    "blocks",
    [{"chunk_size": c} for c in (1, 2, 7, 24, 1000)] + [{"memory_budget": b} for b in (1, 600, 10**9)] + [{}],
)
@pytest.mark.parametrize("distance", ["l2", "cosine"])
@pytest.mark.parametrize("with_sequence", [False, True])
def test_chunked_matches_naive(blocks: dict[str, int], distance: str, with_sequence: bool) -> None:
    embeddings, dataset = random_dataset(seed=3, with_sequence=with_sequence)
    for n_items in (1, 5, 1000):
        rr = RetrievalResults.from_embeddings(
            embeddings, dataset, n_items=n_items, distance=distance, **blocks
        )
        assert_same_as_naive(rr, naive_retrieval(embeddings, dataset, n_items, distance))


def test_n_gallery_is_the_number_of_items_a_query_could_retrieve() -> None:
    embeddings = torch.tensor([[0.0], [0.5], [1.0], [2.0], [3.2]])
    dataset = FakeQGDataset(
        ["a", "a", "b", "a", "b"],
        [True, True, True, False, False],
        [True, True, False, True, True],
        sequence=["s1", "s1", "s2", None, "s2"],
    )
    rr = RetrievalResults.from_embeddings(embeddings, dataset, n_items=1)
    # gallery: items 0, 1, 3, 4; item 0 loses itself and item 1 (its sequence), item 2 loses item 4
    assert rr.n_gallery.tolist() == [2, 2, 3]
    assert rr.deepcopy().n_gallery.tolist() == [2, 2, 3]
    assert RetrievalResults.from_embeddings(embeddings, UnlabeledDataset(5)).n_gallery.tolist() == [4] * 5


def test_n_gallery_given_to_the_constructor() -> None:
    distances = [FloatTensor([0.1, 0.2]), FloatTensor([0.3])]
    retrieved = [LongTensor([1, 0]), LongTensor([2])]
    gts = [LongTensor([0]), LongTensor([0, 1, 2])]
    assert RetrievalResults(distances, retrieved).n_gallery is None
    assert RetrievalResults(distances, retrieved, gts, n_gallery=5).n_gallery.tolist() == [5, 5]
    assert RetrievalResults(distances, retrieved, gts, n_gallery=[2, 3]).n_gallery.tolist() == [2, 3]
    assert (
        RetrievalResults(distances, retrieved, n_gallery=torch.tensor([2, 1])).n_gallery.dtype == torch.long
    )
    with pytest.raises(ValueError, match="n_gallery has 3 values for 2 queries"):
        RetrievalResults(distances, retrieved, n_gallery=[4, 4, 4])
    with pytest.raises(ValueError, match="query 0: n_gallery=1 is below its 2 retrieved or 1 relevant items"):
        RetrievalResults(distances, retrieved, gts, n_gallery=[1, 5])
    with pytest.raises(ValueError, match="query 1: n_gallery=2 is below its 1 retrieved or 3 relevant items"):
        RetrievalResults(distances, retrieved, gts, n_gallery=[2, 2])
    with pytest.raises(ValueError, match="n_gallery must be an int or one int per query"):
        RetrievalResults(distances, retrieved, n_gallery=[2.5, 3.0])


def test_a_query_never_retrieves_itself() -> None:
    embeddings = torch.tensor([[0.0], [1.0], [3.0], [7.0]])
    dataset = FakeQGDataset(["a", "a", "b", "b"], [True] * 4, [True] * 4)
    rr = RetrievalResults.from_embeddings(embeddings, dataset, n_items=10)
    assert [r.tolist() for r in rr.retrieved_ids] == [[1, 2, 3], [0, 2, 3], [1, 0, 3], [2, 1, 0]]
    assert [d.tolist() for d in rr.distances] == [
        [1.0, 3.0, 7.0],
        [1.0, 2.0, 6.0],
        [2.0, 3.0, 4.0],
        [4.0, 6.0, 7.0],
    ]
    assert [g.tolist() for g in rr.gt_ids] == [[1], [0], [3], [2]]  # a query is not its own ground truth
    assert rr.n_gts == [1, 1, 1, 1]
    assert rr.n_retrieved_items == 3


def test_ids_are_gallery_positions() -> None:
    # items 0, 1 are the queries; items 2, 3, 4 the gallery: retrieved ids are positions 0..2 in the gallery
    embeddings = torch.tensor([[0.0], [10.0], [9.0], [1.0], [5.0]])
    dataset = FakeQGDataset(
        [1, 2, 2, 1, 1], [True, True, False, False, False], [False, False, True, True, True]
    )
    rr = RetrievalResults.from_embeddings(embeddings, dataset, n_items=2)
    assert [r.tolist() for r in rr.retrieved_ids] == [[1, 2], [0, 2]]
    assert [g.tolist() for g in rr.gt_ids] == [[1, 2], [0]]


def test_same_sequence_items_are_ignored() -> None:
    embeddings = torch.tensor([[0.0], [0.5], [1.0], [2.0], [3.2]])
    # item 1 shares item 0's sequence: neither retrieved for it nor counted as its ground truth
    dataset = FakeQGDataset(
        ["a", "a", "b", "a", "b"], [True] * 5, [True] * 5, sequence=["s1", "s1", "s2", None, None]
    )
    rr = RetrievalResults.from_embeddings(embeddings, dataset, n_items=10)
    assert rr.retrieved_ids[0].tolist() == [2, 3, 4]
    assert rr.gt_ids[0].tolist() == [3]
    assert rr.retrieved_ids[1].tolist() == [2, 3, 4]
    # items without a sequence (None) are not of one sequence with each other
    assert rr.retrieved_ids[3].tolist() == [2, 4, 1, 0]
    assert rr.gt_ids[3].tolist() == [0, 1]


def test_sequence_from_extra_data() -> None:
    embeddings = torch.tensor([[0.0], [0.5], [1.0]])
    dataset = FakeQGDataset([0, 0, 0], [True] * 3, [True] * 3)
    dataset.extra_data = {"sequence": [7, 7, 8]}  # OML datasets keep extra columns in ``extra_data``
    rr = RetrievalResults.from_embeddings(embeddings, dataset, n_items=10)
    assert [r.tolist() for r in rr.retrieved_ids] == [[2], [2], [1, 0]]


def test_cosine_and_l2_rank_differently() -> None:
    embeddings = torch.tensor([[1.0, 0.0], [10.0, 1.0], [0.5, 0.5]])
    dataset = FakeQGDataset([0, 1, 1], [True, False, False], [False, True, True])
    l2 = RetrievalResults.from_embeddings(embeddings, dataset, distance="l2")
    cosine = RetrievalResults.from_embeddings(embeddings, dataset, distance="cosine")
    assert l2.retrieved_ids[0].tolist() == [1, 0]  # (0.5, 0.5) is closer in space
    assert cosine.retrieved_ids[0].tolist() == [0, 1]  # (10, 1) points almost the same way
    torch.testing.assert_close(cosine.distances[0][0], torch.tensor(1 - 10 / math.sqrt(101)))
    with pytest.raises(ValueError, match="Unknown distance"):
        RetrievalResults.from_embeddings(embeddings, dataset, distance="manhattan")


def test_labels_of_any_type_and_unlabeled_datasets() -> None:
    embeddings = torch.tensor([[0.0], [1.0], [2.5]])
    rr = RetrievalResults.from_embeddings(embeddings, FakeQGDataset(["x", "y", "x"], [True] * 3, [True] * 3))
    assert [g.tolist() for g in rr.gt_ids] == [[2], [], [0]]
    unlabeled = RetrievalResults.from_embeddings(embeddings, UnlabeledDataset(3), n_items=1)
    assert unlabeled.gt_ids is None
    assert [r.tolist() for r in unlabeled.retrieved_ids] == [[1], [0], [1]]
    with pytest.raises(ValueError, match="no ground truth"):
        _ = unlabeled.n_gts
    with pytest.raises(ValueError, match="3 items"):
        RetrievalResults.from_embeddings(embeddings[:2], UnlabeledDataset(3))


# -------------------------------------------------------------------------- queries and gallery apart
class FrameDataset(ILabeledDataset):
    """Items of a table: ``label`` (when given) and any extra columns such as ``sequence``."""

    def __init__(self, **columns: list[Any]) -> None:
        self.df = pd.DataFrame(columns)

    def __len__(self) -> int:
        return len(self.df)

    def __getitem__(self, item: int) -> dict[str, Any]:
        return {self.index_key: item}

    def get_labels(self) -> np.ndarray:
        return self.df["label"].to_numpy()


class NoLabels(IBaseDataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, item: int) -> dict[str, Any]:
        return {self.index_key: item}


def naive_qg(
    xq: torch.Tensor,
    xg: torch.Tensor,
    n_items: int,
    labels: tuple[list[Any], list[Any]] | None,
    sequences: tuple[list[Any], list[Any]] | None = None,
) -> tuple[list[list[int]], list[list[int]] | None, list[int]]:
    retrieved, gts, n_gallery = [], [], []
    for q in range(len(xq)):
        kept = [g for g in range(len(xg)) if sequences is None or sequences[0][q] != sequences[1][g]]
        pairs = sorted((float(torch.dist(xq[q].double(), xg[g].double())), g) for g in kept)
        retrieved.append([g for _, g in pairs[:n_items]])
        n_gallery.append(len(kept))
        if labels is not None:
            gts.append([g for g in kept if labels[0][q] == labels[1][g]])
    return retrieved, (gts if labels is not None else None), n_gallery


@pytest.mark.parametrize("knn_backend", [None, "exact"])
@pytest.mark.parametrize("chunk_size", [1, 3, None])
def test_from_embeddings_qg_matches_naive(chunk_size: int | None, knn_backend: str | None) -> None:
    rng = np.random.default_rng(0)
    xq = torch.tensor(rng.normal(size=(12, 4)), dtype=torch.float32)
    xg = torch.tensor(rng.normal(size=(20, 4)), dtype=torch.float32)
    labels = ([f"l{i}" for i in rng.integers(0, 4, 12)], [f"l{i}" for i in rng.integers(0, 4, 20)])
    sequences = (rng.integers(0, 5, 12).tolist(), rng.integers(0, 5, 20).tolist())
    plain = (FrameDataset(label=labels[0]), FrameDataset(label=labels[1]))
    rr = RetrievalResults.from_embeddings_qg(
        xq, xg, *plain, n_items=6, chunk_size=chunk_size, knn_backend=knn_backend
    )
    retrieved, gts, n_gallery = naive_qg(xq, xg, 6, labels)
    assert [r.tolist() for r in rr.retrieved_ids] == retrieved
    assert [g.tolist() for g in rr.gt_ids] == gts
    assert rr.n_gallery.tolist() == n_gallery == [20] * 12  # nothing is "itself" across two datasets
    with_seq = (
        FrameDataset(label=labels[0], sequence=sequences[0]),
        FrameDataset(label=labels[1], sequence=sequences[1]),
    )
    rr = RetrievalResults.from_embeddings_qg(
        xq, xg, *with_seq, n_items=6, chunk_size=chunk_size, knn_backend=knn_backend
    )
    retrieved, gts, n_gallery = naive_qg(xq, xg, 6, labels, sequences)
    assert [r.tolist() for r in rr.retrieved_ids] == retrieved
    assert [g.tolist() for g in rr.gt_ids] == gts
    assert rr.n_gallery.tolist() == n_gallery
    torch.testing.assert_close(
        rr.distances[0][0], torch.dist(xq[0], xg[retrieved[0][0]]), atol=1e-5, rtol=1e-5
    )


@pytest.mark.parametrize("knn_backend", [None, "exact"])
def test_from_embeddings_qg_codes_values_across_the_two_datasets(knn_backend: str | None) -> None:
    xq, xg = torch.tensor([[0.0], [1.0]]), torch.tensor([[0.1], [0.9], [5.0]])
    # labels of different types in the two tables: 1 and "1" are different labels; the sequence "a" is shared
    queries = FrameDataset(label=[1, "x"], sequence=["a", "b"])
    gallery = FrameDataset(label=["1", "x", 1], sequence=["c", "a", "b"])
    rr = RetrievalResults.from_embeddings_qg(xq, xg, queries, gallery, n_items=5, knn_backend=knn_backend)
    # query 0 ignores gallery item 1 (sequence "a"), query 1 ignores gallery item 2 (sequence "b")
    assert [r.tolist() for r in rr.retrieved_ids] == [[0, 2], [1, 0]]
    assert [g.tolist() for g in rr.gt_ids] == [[2], [1]]  # 1 matches 1, not "1"
    assert rr.n_gallery.tolist() == [2, 2]
    torch.testing.assert_close(rr.distances[0], torch.tensor([0.1, 5.0]))
    unlabeled = RetrievalResults.from_embeddings_qg(
        xq, xg, NoLabels(2), gallery, n_items=1, knn_backend=knn_backend
    )
    assert unlabeled.gt_ids is None and [r.tolist() for r in unlabeled.retrieved_ids] == [[0], [1]]
    with pytest.raises(ValueError, match="got 3 query embeddings for a query dataset of 2 items"):
        RetrievalResults.from_embeddings_qg(xg, xg, queries, gallery)
    with pytest.raises(ValueError, match="got 2 gallery embeddings for a gallery dataset of 3 items"):
        RetrievalResults.from_embeddings_qg(xq, xq, queries, gallery)


# ------------------------------------------------------------------------------------------ validation
def test_valid_ragged_results() -> None:
    rr = RetrievalResults(
        distances=[FloatTensor([0.1, 0.2, 0.2]), FloatTensor([]), FloatTensor([5.0])],
        retrieved_ids=[LongTensor([3, 1, 2]), LongTensor([]), LongTensor([0])],
        gt_ids=[LongTensor([1]), LongTensor([]), LongTensor([0, 2])],
    )
    assert rr.n_queries == 3 and rr.n_retrieved_items == 3 and not rr.is_empty()
    assert rr.n_gts == [1, 0, 2]
    copy = rr.deepcopy()
    assert copy.retrieved_ids[0] is not rr.retrieved_ids[0]
    assert copy.retrieved_ids[0].tolist() == [3, 1, 2]
    assert "n_queries=3" in repr(rr)
    empty = RetrievalResults([FloatTensor([])], [LongTensor([])])
    assert empty.is_empty() and empty.gt_ids is None


def test_unsorted_distances_name_the_query() -> None:
    with pytest.raises(ValueError, match="query 2: distances must be sorted ascending"):
        RetrievalResults(
            distances=[FloatTensor([0.1, 0.2]), FloatTensor([9.0]), FloatTensor([0.5, 0.3])],
            retrieved_ids=[LongTensor([0, 1]), LongTensor([1]), LongTensor([0, 1])],
        )
    # a drop between two queries is not an error
    RetrievalResults([FloatTensor([5.0, 6.0]), FloatTensor([1.0])], [LongTensor([0, 1]), LongTensor([0])])


def test_other_invalid_inputs() -> None:
    with pytest.raises(ValueError, match="query 1: 2 distances for 1 retrieved ids"):
        RetrievalResults([FloatTensor([0.1]), FloatTensor([0.1, 0.2])], [LongTensor([0]), LongTensor([1])])
    with pytest.raises(ValueError, match="retrieved_ids for 1"):
        RetrievalResults([FloatTensor([0.1]), FloatTensor([0.2])], [LongTensor([0])])
    with pytest.raises(ValueError, match="gt_ids for 1"):
        RetrievalResults(
            [FloatTensor([0.1]), FloatTensor([0.2])], [LongTensor([0]), LongTensor([0])], [LongTensor([0])]
        )
    with pytest.raises(ValueError, match=r"distances: query 0 must be a 1-D tensor, got shape \(1, 1\)"):
        RetrievalResults([FloatTensor([[0.1]])], [LongTensor([[0]])])
    with pytest.raises(ValueError, match="query 1: distances contain NaN"):
        RetrievalResults(
            [FloatTensor([0.1]), FloatTensor([float("nan")])], [LongTensor([0]), LongTensor([0])]
        )


def test_duplicate_retrieved_ids_are_refused_naming_the_query() -> None:
    distances = [FloatTensor([0.1, 0.2]), FloatTensor([0.1, 0.2, 0.3]), FloatTensor([0.4, 0.4])]
    with pytest.raises(
        RuntimeError,  # OML's type: its callers' except clauses still catch it
        match=r"^Retrieved ids must be unique: query 1 retrieves the id 5 more than once \(its retrieved ids: "
        r"\[5, 2, 5\]\)$",
    ):
        RetrievalResults(distances, [LongTensor([0, 1]), LongTensor([5, 2, 5]), LongTensor([4, 4])])
    with pytest.raises(ValueError, match="query 2 retrieves the id 4 more than once"):
        RetrievalResults(
            distances, [LongTensor([0, 1]), LongTensor([5, 2, 6]), LongTensor([4, 4])], [LongTensor([4])] * 3
        )


def first_repeat_by_loop(rows: list[list[int]]) -> tuple[int, int] | None:
    for query, ids in enumerate(rows):
        repeated = sorted(i for i in set(ids) if ids.count(i) > 1)
        if repeated:
            return query, repeated[0]
    return None


@pytest.mark.parametrize("lengths", ["equal", "mixed", "one_long_row"])
def test_duplicate_check_agrees_with_a_python_loop(monkeypatch: pytest.MonkeyPatch, lengths: str) -> None:
    """Every way the check runs: rows of one length (sorted as a matrix view), of mixed lengths (padded), and
    one long row among short ones (the flat sort by query and id), over several chunks of queries."""
    monkeypatch.setattr(ragged_module, "REPEAT_CHUNK_ROWS", 5)
    rng = random.Random(lengths)
    for _ in range(150):
        n = rng.randint(0, 13)
        if lengths == "equal":
            sizes = [rng.randint(0, 6)] * n
        elif lengths == "mixed":
            sizes = [rng.randint(0, 6) for _ in range(n)]
        else:
            sizes = [rng.randint(0, 2) for _ in range(n)]
            if n:
                sizes[rng.randrange(n)] = 40
        rows = [[rng.randint(0, 3 * size + 30) for _ in range(size)] for size in sizes]
        args = ([torch.zeros(len(r)) for r in rows], [LongTensor(r) for r in rows])
        expected = first_repeat_by_loop(rows)
        if expected is None:
            assert [r.tolist() for r in RetrievalResults(*args).retrieved_ids] == rows
        else:
            with pytest.raises(
                RetrievedIdsNotUniqueError, match=rf"query {expected[0]} retrieves the id {expected[1]} "
            ):
                RetrievalResults(*args)


# ---------------------------------------------------------------- precision, overflow, empty splits
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("distance", ["l2", "cosine"])
def test_half_precision_embeddings_retrieve_as_their_float32_values(
    dtype: torch.dtype, distance: str
) -> None:
    embeddings, dataset = random_dataset(seed=7, with_sequence=True)
    half = (embeddings * 300).to(dtype)  # squared distances of ~1e5: beyond float16's 65504
    rr = RetrievalResults.from_embeddings(half, dataset, n_items=5, distance=distance, chunk_size=4)
    as_float = RetrievalResults.from_embeddings(
        half.float(), dataset, n_items=5, distance=distance, chunk_size=4
    )
    assert (
        torch.equal(rr.distances.values, as_float.distances.values)
        and rr.distances.values.dtype == torch.float32
    )
    assert torch.equal(rr.retrieved_ids.values, as_float.retrieved_ids.values)
    assert rr.n_gts == as_float.n_gts
    assert_same_as_naive(rr, naive_retrieval(half.float(), dataset, 5, distance))
    assert min(len(r) for r in rr.retrieved_ids) > 0


def six_items() -> tuple[torch.Tensor, FakeQGDataset]:
    """Queries: items 0, 2, 3; gallery: items 1, 2, 4, 5."""
    dataset = FakeQGDataset(
        labels=[0, 0, 1, 1, 0, 1],
        is_query=[True, False, True, True, False, False],
        is_gallery=[False, True, True, False, True, True],
    )
    return torch.arange(12, dtype=torch.float32).view(6, 2), dataset


def test_embeddings_too_large_for_float32_name_the_query_and_the_gallery_item() -> None:
    embeddings, dataset = six_items()
    embeddings[3] = torch.tensor([2e19, 1e19])  # query 2: its squared norm (5e38) overflows float32
    with pytest.raises(
        NonFiniteDistanceError,
        match=r"^the l2 distance between query 2 \(row 3 of embeddings\) and gallery item 0 \(row 1 of "
        r"embeddings\) is not finite in float32",
    ):
        RetrievalResults.from_embeddings(embeddings, dataset, n_items=2)
    embeddings[3] = float("nan")
    with pytest.raises(ValueError, match="embeddings must be finite, row 3 is not"):
        RetrievalResults.from_embeddings(embeddings, dataset, n_items=2)


def test_a_dataset_without_queries_or_gallery_items_is_an_error() -> None:
    embeddings, dataset = six_items()
    dataset.df["is_query"] = False
    with pytest.raises(
        ValueError,
        match=r"^the dataset \(FakeQGDataset\) has no queries \(is_query is False for every row\)$",
    ):
        RetrievalResults.from_embeddings(embeddings, dataset)
    dataset.df["is_query"], dataset.df["is_gallery"] = True, False
    with pytest.raises(ValueError, match=r"has no gallery items \(is_gallery is False for every row\)"):
        RetrievalResults.from_embeddings(embeddings, dataset)
    with pytest.raises(ValueError, match="dataset_query is empty: there are no queries"):
        RetrievalResults.from_embeddings_qg(embeddings[:0], embeddings, NoLabels(0), NoLabels(6))
    with pytest.raises(ValueError, match="dataset_gallery is empty: there are no gallery items"):
        RetrievalResults.from_embeddings_qg(embeddings, embeddings[:0], NoLabels(6), NoLabels(0))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("distance", ["l2", "cosine"])
def test_cuda_embeddings_give_the_same_results(distance: str) -> None:
    embeddings, dataset = random_dataset(seed=5, with_sequence=True)
    on_cpu = RetrievalResults.from_embeddings(embeddings, dataset, n_items=7, distance=distance, chunk_size=5)
    on_gpu = RetrievalResults.from_embeddings(
        embeddings.cuda(), dataset, n_items=7, distance=distance, chunk_size=5
    )
    assert [r.tolist() for r in on_gpu.retrieved_ids] == [r.tolist() for r in on_cpu.retrieved_ids]
    assert [g.tolist() for g in on_gpu.gt_ids] == [g.tolist() for g in on_cpu.gt_ids]
    assert all(d.device.type == "cpu" for d in on_gpu.distances)


@pytest.mark.parametrize("distance", ["l2", "cosine"])
@pytest.mark.parametrize("with_sequence", [False, True])
def test_through_the_exact_knn_backend_matches_naive(distance: str, with_sequence: bool) -> None:
    embeddings, dataset = random_dataset(seed=5, with_sequence=with_sequence)
    for n_items in (1, 5, 1000):
        default = RetrievalResults.from_embeddings(embeddings, dataset, n_items=n_items, distance=distance)
        for backend in ("exact", {"name": "exact", "args": {"chunk_size": 3}}, ExactKnnIndex(distance)):
            rr = RetrievalResults.from_embeddings(
                embeddings, dataset, n_items=n_items, distance=distance, knn_backend=backend
            )
            assert_same_as_naive(rr, naive_retrieval(embeddings, dataset, n_items, distance))
            assert torch.equal(rr.n_gallery, default.n_gallery)


def test_a_knn_backend_of_another_distance_or_not_empty_is_refused() -> None:
    embeddings, dataset = random_dataset(seed=5)
    with pytest.raises(ValueError, match="searches by 'cosine' distance, the retrieval by 'l2'"):
        RetrievalResults.from_embeddings(embeddings, dataset, knn_backend=ExactKnnIndex("cosine"))
    used = ExactKnnIndex()
    used.add(torch.zeros(2, 5))
    with pytest.raises(ValueError, match="must be given empty, it holds 2 items"):
        RetrievalResults.from_embeddings(embeddings, dataset, knn_backend=used)
    with pytest.raises(LookupError, match="Unknown knn_backend 'faiss_flatt'"):
        RetrievalResults.from_embeddings(embeddings, dataset, knn_backend="faiss_flatt")


def test_embedding_metrics_through_a_knn_backend_are_the_exact_ones() -> None:
    embeddings, dataset = random_dataset(seed=6, n=60, with_sequence=True)
    results = []
    for backend in (None, {"name": "exact", "args": {"memory_budget": 64}}):
        calculator = EmbeddingMetrics(
            dataset, cmc_top_k=(1, 5), map_top_k=(5,), verbose=False, knn_backend=backend
        )
        calculator.setup(len(dataset))
        calculator.update(embeddings, torch.arange(len(dataset)))
        results.append(calculator.compute_metrics()["OVERALL"])
    for metric in ("cmc", "precision", "map"):
        for k, value in results[0][metric].items():
            torch.testing.assert_close(results[1][metric][k], value)
    with pytest.raises(LookupError, match="Unknown knn_backend 'nope'"):
        EmbeddingMetrics(dataset, knn_backend="nope")
