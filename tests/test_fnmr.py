"""FNMR@FMR: OML's worked example, hand-computed cases, agreement with OML's numpy formula and with naive
full-matrix computations of the all-pairs version, chunk invariance, the symmetric shortcut, bad inputs."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pytest
import torch
from torch import Tensor

from oml_core.functional import fnmr
from oml_core.functional.fnmr import (
    calc_fnmr_at_fmr,
    calc_fnmr_at_fmr_all_pairs,
    calc_fnmr_at_fmr_rr,
    lerp_quantile,
    quantile_ranks,
)
from oml_core.knn.blocks import BLOCK_BYTES_PER_ELEMENT, DistanceBlock, iter_distance_blocks
from oml_core.knn.distances import get_distance_fn
from oml_core.retrieval import RetrievalResults

FMR_VALS = (0.0, 0.001, 0.013, 0.1, 0.25, 0.5, 0.77, 0.999, 1.0)


def oml_fnmr(pos: np.ndarray, neg: np.ndarray, fmr_vals: Sequence[float]) -> Tensor:
    """OML's own formula: thresholds by ``np.quantile``, then the fraction of positives ``>=`` them."""
    thresholds = np.quantile(neg, fmr_vals)
    return torch.from_numpy((pos[None, :] >= thresholds[:, None]).sum(axis=1) / len(pos)).float()


# ------------------------------------------------------------------------------------ from distances
def test_seed_example() -> None:
    pos_dist = np.array([0, 0, 1, 1, 2, 2, 5, 5, 9, 9])
    neg_dist = np.array([3, 3, 4, 4, 6, 6, 7, 7, 8, 8])
    result = calc_fnmr_at_fmr(pos_dist, neg_dist, fmr_vals=(0.1, 0.5))
    assert result.dtype == torch.float32
    assert torch.equal(result, torch.tensor([0.4, 0.2]))


@pytest.mark.parametrize("dtype", [torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_seed_example_as_tensors(dtype: torch.dtype) -> None:
    pos_dist = torch.tensor([0, 0, 1, 1, 2, 2, 5, 5, 9, 9], dtype=dtype)
    neg_dist = torch.tensor([3, 3, 4, 4, 6, 6, 7, 7, 8, 8], dtype=dtype)
    assert torch.equal(calc_fnmr_at_fmr(pos_dist, neg_dist, (0.1, 0.5)), torch.tensor([0.4, 0.2]))


def test_hand_computed() -> None:
    pos = np.array([0.5, 1.0, 2.0])
    neg = np.array([3.0, 1.0])  # sorted: 1, 3
    # fmr 0: T = 1 -> {1, 2}; 0.25: T = 1 + 2 * 0.25 = 1.5 -> {2}; 0.5: T = 2 -> {2} (H(0) = 1); 1: T = 3
    result = calc_fnmr_at_fmr(pos, neg, (0.0, 0.25, 0.5, 1.0))
    assert torch.equal(result, torch.tensor([2 / 3, 1 / 3, 1 / 3, 0.0]))


def test_threshold_compared_in_float64() -> None:
    # T = 1 - (1 - 0) * (1 - 0.7) is 0.7 in float64, just above float32(0.7): the positive float32(0.7) is
    # below it (as numpy compares), though float32(T) == float32(0.7)
    below = torch.tensor(0.7, dtype=torch.float32)
    above = torch.nextafter(below, torch.tensor(1.0))
    pos, neg = torch.stack([below, above]), torch.tensor([0.0, 1.0])
    threshold = np.quantile(neg.numpy(), (0.7,))[0]  # as OML calls it: a tuple of fmr values, float64
    assert float(below) < threshold and torch.tensor(threshold, dtype=torch.float32) == below
    assert torch.equal(calc_fnmr_at_fmr(pos, neg, (0.7,)), torch.tensor([0.5]))
    assert torch.equal(calc_fnmr_at_fmr(pos, neg, (0.7,)), oml_fnmr(pos.numpy(), neg.numpy(), (0.7,)))


def test_linear_quantile_is_numpys() -> None:
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64, np.int64):
        for _ in range(50):
            n = int(rng.integers(1, 300))
            values = np.sort((rng.random(n) * 10).astype(dtype))
            fmr_vals = tuple(rng.random(5)) + (0.0, 1.0)
            lo, hi, gamma = quantile_ranks(n, fmr_vals)
            tensor = torch.from_numpy(values)
            thresholds = lerp_quantile(tensor[lo], tensor[hi], gamma)
            assert thresholds.dtype == torch.float64
            assert np.array_equal(thresholds.numpy(), np.quantile(values, fmr_vals))


def test_agrees_with_oml_formula_on_random_data() -> None:
    rng = np.random.default_rng(1)
    for case in range(200):
        dtype = (np.float32, np.float64)[case % 2]
        decimals = int(rng.integers(0, 4))  # few decimals: many ties, and positives equal to thresholds
        pos = np.round(rng.random(int(rng.integers(1, 100))) * 2, decimals).astype(dtype)
        neg = np.round(rng.random(int(rng.integers(1, 100))) * 2 + 0.5, decimals).astype(dtype)
        fmr_vals = tuple(float(q) for q in rng.random(4)) + FMR_VALS
        expected = oml_fnmr(pos, neg, fmr_vals)
        assert torch.equal(calc_fnmr_at_fmr(pos, neg, fmr_vals), expected), case
        assert torch.equal(calc_fnmr_at_fmr(torch.from_numpy(pos), torch.from_numpy(neg), fmr_vals), expected)


def test_does_not_modify_inputs() -> None:
    neg = np.array([5.0, 1.0, 3.0, 2.0])
    calc_fnmr_at_fmr(np.array([1.0]), neg, (0.5,))
    assert np.array_equal(neg, [5.0, 1.0, 3.0, 2.0])


@pytest.mark.parametrize("fmr_vals", [(-0.1,), (1.5,), (0.1, 2), (), ("0.1",), (True,), 0.1])
def test_bad_fmr_vals(fmr_vals: object) -> None:
    with pytest.raises(ValueError, match="fmr_vals"):
        calc_fnmr_at_fmr(np.array([1.0]), np.array([2.0]), fmr_vals)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pos", "neg", "name"),
    [
        (np.array([]), np.array([1.0]), "pos_dist is empty"),
        (np.array([1.0]), np.array([]), "neg_dist is empty"),
        (np.array([1.0]), np.array([1.0, np.nan]), "neg_dist contains NaN"),
        (torch.tensor([np.nan]), np.array([1.0]), "pos_dist contains NaN"),
        (np.array([True]), np.array([1.0]), "pos_dist must hold real distances"),
    ],
)
def test_bad_distances(pos: np.ndarray, neg: np.ndarray, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        calc_fnmr_at_fmr(pos, neg, (0.1,))


# ------------------------------------------------------------------------------- retrieval results
def test_rr_hand_computed() -> None:
    rr = RetrievalResults(
        distances=[torch.tensor([0.1, 0.5, 0.9]), torch.tensor([0.2, 0.4]), torch.tensor([])],
        retrieved_ids=[torch.tensor([0, 1, 2]), torch.tensor([3, 0]), torch.tensor([], dtype=torch.long)],
        gt_ids=[torch.tensor([1]), torch.tensor([3, 2]), torch.tensor([0])],
    )
    # positives 0.5, 0.2; negatives 0.1, 0.4, 0.9 -> thresholds 0.1, 0.4, 0.9
    metrics = calc_fnmr_at_fmr_rr(rr, fmr_vals=(0.0, 0.5, 1.0))
    assert list(metrics) == ["fnmr@fmr"]
    values = metrics["fnmr@fmr"]
    assert list(values) == [0.0, 0.5, 1.0]
    assert all(isinstance(v, Tensor) and v.ndim == 0 for v in values.values())
    assert [v.item() for v in values.values()] == [1.0, 0.5, 0.0]
    assert calc_fnmr_at_fmr_rr(rr, fmr_vals=()) == {}


def test_rr_agrees_with_naive_loop() -> None:
    gen = torch.Generator().manual_seed(2)
    for _ in range(20):
        n_queries, n_gallery = int(torch.randint(1, 30, (1,), generator=gen)), 40
        distances, retrieved, gts = [], [], []
        for _ in range(n_queries):
            k = int(torch.randint(0, 10, (1,), generator=gen))
            retrieved.append(torch.randperm(n_gallery, generator=gen)[:k])
            distances.append(torch.sort(torch.randint(0, 20, (k,), generator=gen).float() / 8).values)
            gts.append(
                torch.randperm(n_gallery, generator=gen)[: int(torch.randint(0, 15, (1,), generator=gen))]
            )
        pos, neg = [], []
        for d, r, g in zip(distances, retrieved, gts):
            for dist, item in zip(d.tolist(), r.tolist()):
                (pos if item in g.tolist() else neg).append(dist)
        if not pos or not neg:
            continue
        metrics = calc_fnmr_at_fmr_rr(RetrievalResults(distances, retrieved, gts), FMR_VALS)
        expected = oml_fnmr(np.array(pos, dtype=np.float32), np.array(neg, dtype=np.float32), FMR_VALS)
        assert torch.equal(torch.stack(list(metrics["fnmr@fmr"].values())), expected)


def test_rr_bad_inputs() -> None:
    one = [torch.tensor([0.5])]
    with pytest.raises(ValueError, match="gt_ids is None"):
        calc_fnmr_at_fmr_rr(RetrievalResults(one, [torch.tensor([0])]))
    with pytest.raises(ValueError, match="no retrieved item is irrelevant"):
        calc_fnmr_at_fmr_rr(RetrievalResults(one, [torch.tensor([0])], [torch.tensor([0])]))
    with pytest.raises(ValueError, match="no retrieved item is relevant"):
        calc_fnmr_at_fmr_rr(RetrievalResults(one, [torch.tensor([0])], [torch.tensor([1])]))
    rr = RetrievalResults([torch.tensor([0.1, 0.5])], [torch.tensor([0, 1])], [torch.tensor([0])])
    with pytest.raises(ValueError, match="fmr_vals"):
        calc_fnmr_at_fmr_rr(rr, (1.1,))


# ---------------------------------------------------------------------------------------- all pairs
def naive_pairs(
    embeddings: Tensor,
    ids_query: Tensor,
    ids_gallery: Tensor,
    labels: Tensor,
    distances: Tensor,
    sequence_ids: Tensor | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Positive and negative distances of the full ``[Q, G]`` matrix ``distances`` (self and same-sequence
    pairs excluded)."""
    keys = torch.arange(len(embeddings)) if sequence_ids is None else sequence_ids
    ignore = keys[ids_query][:, None] == keys[ids_gallery][None, :]
    same = labels[ids_query][:, None] == labels[ids_gallery][None, :]
    return distances[same & ~ignore].numpy(), distances[~same & ~ignore].numpy()


def full_matrix(embeddings: Tensor, ids_query: Tensor, ids_gallery: Tensor, distance: str) -> Tensor:
    return get_distance_fn(distance)(embeddings[ids_query].float(), embeddings[ids_gallery].float())


def matrix_from_blocks(
    embeddings: Tensor, ids_query: Tensor, ids_gallery: Tensor, **kwargs: object
) -> Tensor:
    """The ``[Q, G]`` distances exactly as the blocks give them (mirrored blocks also fill their transpose)."""
    out = torch.full((len(ids_query), len(ids_gallery)), float("nan"))
    for block in iter_distance_blocks(embeddings, ids_query, ids_gallery, **kwargs):  # type: ignore[arg-type]
        out[block.query_positions, block.gallery_positions] = block.distances
        if block.mirrored:
            out[block.gallery_positions, block.query_positions] = block.distances.T
    assert not torch.isnan(out).any()
    return out


def exact_embeddings(n: int, distance: str, gen: torch.Generator) -> Tensor:
    """Embeddings whose float32 distances are exact whatever the blocks (ties aplenty): rows ``c * s`` where
    ``s`` has four entries of +-1 and two of 0 (``|s| = 2``), so the norms, the dot products and (for cosine)
    the normalised entries are exact; ``c`` in ``0..3`` for l2, a power of two for cosine."""
    columns = torch.argsort(torch.rand(n, 6, generator=gen), dim=1)[:, :4]
    signs = torch.randint(0, 2, (n, 4), generator=gen).float() * 2 - 1
    x = torch.zeros(n, 6).scatter_(1, columns, signs)
    if distance == "l2":
        return x * torch.randint(0, 4, (n, 1), generator=gen)
    return x * 2.0 ** torch.randint(0, 3, (n, 1), generator=gen)


def random_split(n: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """Query and gallery ids: all items both (1 vs rest), or random overlapping subsets."""
    if bool(torch.rand(1, generator=gen) < 0.5):
        return torch.arange(n), torch.arange(n)
    is_query = torch.rand(n, generator=gen) < 0.6
    is_gallery = torch.rand(n, generator=gen) < 0.7
    return torch.nonzero(is_query).squeeze(1), torch.nonzero(is_gallery).squeeze(1)


def test_all_pairs_hand_computed() -> None:
    x = torch.tensor([[0.0], [1.0], [3.0], [6.0]])
    labels = torch.tensor([0, 0, 1, 1])
    ids = torch.arange(4)
    # ordered pairs, each distance twice: positives 1, 3; negatives 3, 6, 2, 5 -> sorted 2 2 3 3 5 5 6 6
    # fmr 0: T = 2; 0.2: x = 1.4, T = 2.4; 0.3: T = 3 (H(0) = 1); 0.5: x = 3.5, T = 5 - 2 * 0.5 = 4
    fmr_vals = (0.0, 0.2, 0.3, 0.5)
    expected = torch.tensor([0.5, 0.5, 0.5, 0.0])
    for chunk_size in (1, 2, 3, None):
        result = calc_fnmr_at_fmr_all_pairs(x, ids, ids, labels, fmr_vals, chunk_size=chunk_size)
        assert torch.equal(result, expected)
    # one sequence for items 0 and 1: the positive pair (0, 1) is ignored, the positives are 3, 3
    sequence = torch.tensor([7, 7, 8, 9])
    result = calc_fnmr_at_fmr_all_pairs(x, ids, ids, labels, (0.2, 0.5), sequence_ids=sequence)
    assert torch.equal(result, torch.tensor([1.0, 0.0]))
    # queries 0, 2 and gallery 1, 3: positives (0, 1) = 1, (2, 3) = 3; negatives (0, 3) = 6, (2, 1) = 2
    # fmr 0: T = 2; 0.25: T = 2 + 4 * 0.25 = 3; 0.5: T = 4
    result = calc_fnmr_at_fmr_all_pairs(
        x, torch.tensor([0, 2]), torch.tensor([1, 3]), labels, (0.0, 0.25, 0.5)
    )
    assert torch.equal(result, torch.tensor([0.5, 0.5, 0.0]))


def test_all_pairs_threshold_compared_in_float64() -> None:
    # query 0 at 0 (label 0); gallery: negatives at distances 0 and 1, positives at 0.25 and 0.5.
    # fmr 0.25: T = 0.25 (H(0) = 1); fmr 0.25 + 1e-12: T is above 0.25 in float64 (but not in float32)
    x = torch.tensor([[0.0], [0.0], [1.0], [0.25], [0.5]])
    labels = torch.tensor([0, 1, 1, 0, 0])
    fmr_vals = (0.25, 0.25 + 1e-12)
    result = calc_fnmr_at_fmr_all_pairs(x, torch.tensor([0]), torch.arange(1, 5), labels, fmr_vals)
    assert torch.equal(result, torch.tensor([1.0, 0.5]))
    assert torch.equal(calc_fnmr_at_fmr(np.array([0.25, 0.5]), np.array([0.0, 1.0]), fmr_vals), result)


def test_all_pairs_cosine_hand_computed() -> None:
    x = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [-1.0, 0.0]])
    labels = torch.tensor([0, 0, 1, 1])
    # cosine distances: 1 - cos; positives (0, 1) = 1 - 1/sqrt(2), (2, 3) = 1; negatives (0, 2) = 1,
    # (0, 3) = 2, (1, 2) = 1 - 1/sqrt(2), (1, 3) = 1 + 1/sqrt(2); fmr 0 -> T = 1 - 1/sqrt(2): all positives
    ids = torch.arange(4)
    result = calc_fnmr_at_fmr_all_pairs(x, ids, ids, labels, (0.0, 1.0), distance="cosine")
    assert torch.equal(result, torch.tensor([1.0, 0.0]))


@pytest.mark.parametrize("distance", ["l2", "cosine"])
def test_all_pairs_agree_with_naive_full_matrix(distance: str) -> None:
    """Exact-arithmetic embeddings (duplicates, ties): the naive full matrix has the very same distances."""
    gen = torch.Generator().manual_seed(3)
    for case in range(25):
        n = int(torch.randint(8, 60, (1,), generator=gen))
        x = exact_embeddings(n, distance, gen)
        labels = torch.randint(0, int(torch.randint(2, 8, (1,), generator=gen)), (n,), generator=gen)
        sequence = torch.randint(0, n // 2, (n,), generator=gen) if case % 3 == 0 else None
        ids_query, ids_gallery = random_split(n, gen)
        pos, neg = naive_pairs(
            x, ids_query, ids_gallery, labels, full_matrix(x, ids_query, ids_gallery, distance), sequence
        )
        if len(pos) == 0 or len(neg) == 0:
            continue
        fmr_vals = tuple(float(q) for q in torch.rand(3, generator=gen)) + FMR_VALS
        expected = oml_fnmr(pos, neg, fmr_vals)
        assert torch.equal(calc_fnmr_at_fmr(pos, neg, fmr_vals), expected)
        for chunk_size in (1, 2, 5, 17, None):
            result = calc_fnmr_at_fmr_all_pairs(
                x, ids_query, ids_gallery, labels, fmr_vals, sequence, distance, chunk_size=chunk_size
            )
            assert torch.equal(result, expected), (case, chunk_size)


@pytest.mark.parametrize("distance", ["l2", "cosine"])
def test_symmetric_and_full_paths_agree(distance: str) -> None:
    gen = torch.Generator().manual_seed(4)
    for _ in range(10):
        n = int(torch.randint(10, 50, (1,), generator=gen))
        x = exact_embeddings(n, distance, gen)
        labels = torch.randint(0, 4, (n,), generator=gen)
        ids = torch.arange(n)
        results = [
            calc_fnmr_at_fmr_all_pairs(
                x, ids, ids, labels, FMR_VALS, distance=distance, chunk_size=chunk, symmetric=symmetric
            )
            for symmetric in (True, False)
            for chunk in (1, 4, None)
        ]
        assert all(torch.equal(result, results[0]) for result in results[1:])


@pytest.mark.parametrize("distance", ["l2", "cosine"])
@pytest.mark.parametrize("symmetric", [True, False])
def test_all_pairs_agree_with_blocks_on_gaussian_data(distance: str, symmetric: bool) -> None:
    """Any float data: the result is that of the naive formula on the distances the blocks compute."""
    gen = torch.Generator().manual_seed(5)
    for case in range(8):
        n = int(torch.randint(20, 90, (1,), generator=gen))
        x = torch.randn(n, 16, generator=gen)
        x[: n // 5] = x[n // 5 : 2 * (n // 5)]  # duplicates: ties at distance ~0 and repeated values
        labels = torch.randint(0, 5, (n,), generator=gen)
        sequence = torch.randint(0, n, (n,), generator=gen) if case % 2 else None
        ids = torch.arange(n)
        for chunk_size in (1, 3, 16):
            kwargs = {"distance": distance, "sequence_ids": sequence, "chunk_size": chunk_size}
            matrix = matrix_from_blocks(x, ids, ids, symmetric=symmetric, **kwargs)
            pos, neg = naive_pairs(x, ids, ids, labels, matrix, sequence)
            result = calc_fnmr_at_fmr_all_pairs(x, ids, ids, labels, FMR_VALS, symmetric=symmetric, **kwargs)
            assert torch.equal(result, oml_fnmr(pos, neg, FMR_VALS)), (case, chunk_size)


def count_passes(monkeypatch: pytest.MonkeyPatch) -> list[list[tuple[int, int]]]:
    """Record the shapes of the blocks of every pass of the all-pairs function."""
    passes: list[list[tuple[int, int]]] = []

    def recording(*args: object, **kwargs: object) -> Iterator[DistanceBlock]:
        passes.append([])
        for block in iter_distance_blocks(*args, **kwargs):  # type: ignore[arg-type]
            passes[-1].append(tuple(block.distances.shape))
            yield block

    monkeypatch.setattr(fnmr, "iter_distance_blocks", recording)
    return passes


def test_threshold_between_bins_takes_a_third_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    # query at 0 (label 0); gallery: negatives at 1 and 4, positives at 2, 2.5, 3 (each in its own coarse bin)
    x = torch.tensor([[0.0], [1.0], [4.0], [2.0], [2.5], [3.0]])
    labels = torch.tensor([0, 1, 1, 0, 0, 0])
    passes = count_passes(monkeypatch)
    # fmr 0.25: T = 1 + 3 * 0.25 = 1.75; 0.5: T = 2.5 (H(0) = 1); 0.6: T = 4 - 3 * 0.4 = 2.8
    result = calc_fnmr_at_fmr_all_pairs(x, torch.tensor([0]), torch.arange(1, 6), labels, (0.25, 0.5, 0.6))
    assert torch.equal(result, torch.tensor([1.0, 2 / 3, 1 / 3]))
    assert len(passes) == 3
    passes.clear()
    calc_fnmr_at_fmr_all_pairs(x, torch.tensor([0]), torch.arange(1, 6), labels, (0.0, 1.0))
    assert len(passes) == 2


def test_blocks_bounded_by_chunk_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory by construction: with ``chunk_size=1`` every block is one query row; the histograms do not grow
    with the number of pairs."""
    gen = torch.Generator().manual_seed(6)
    n = 40
    x = exact_embeddings(n, "l2", gen)
    labels = torch.randint(0, 3, (n,), generator=gen)
    ids = torch.arange(n)
    expected = calc_fnmr_at_fmr_all_pairs(x, ids, ids, labels, FMR_VALS)
    passes = count_passes(monkeypatch)
    assert torch.equal(calc_fnmr_at_fmr_all_pairs(x, ids, ids, labels, FMR_VALS, chunk_size=1), expected)
    assert passes and all(rows == 1 and cols <= n for blocks in passes for rows, cols in blocks)
    passes.clear()
    budget = BLOCK_BYTES_PER_ELEMENT * 8 * n  # blocks of at most 8 * n pairs
    assert torch.equal(
        calc_fnmr_at_fmr_all_pairs(x, ids, ids, labels, FMR_VALS, memory_budget=budget), expected
    )
    assert all(rows * cols <= 8 * n for blocks in passes for rows, cols in blocks)


def test_all_pairs_accepts_numpy_ids_and_float64_embeddings() -> None:
    x = torch.tensor([[0.0], [1.0], [3.0], [6.0]], dtype=torch.float64)
    result = calc_fnmr_at_fmr_all_pairs(x, np.arange(4), np.arange(4), np.array([0, 0, 1, 1]), (0.5,))
    assert torch.equal(result, torch.tensor([0.0]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fmr_vals": (1.2,)}, "fmr_vals"),
        ({"fmr_vals": (-0.2,)}, "fmr_vals"),
        ({"labels": torch.tensor([0, 0, 0, 0])}, "no negative pairs"),
        ({"labels": torch.tensor([0, 1, 2, 3])}, "no positive pairs"),
        ({"labels": torch.tensor([0, 0, 1])}, "labels must have one entry per embedding"),
        ({"labels": torch.tensor([0.0, 0.0, 1.0, 1.0])}, "labels must hold integers"),
        ({"ids_query": torch.tensor([0, 4])}, "ids_query must be dataset indices"),
        ({"ids_gallery": torch.tensor([-1, 2])}, "ids_gallery must be dataset indices"),
        ({"embeddings": torch.zeros(4)}, "embeddings must be a \\[n, dim\\] tensor"),
        ({"embeddings": torch.tensor([[0.0], [1.0], [float("nan")], [2.0]])}, "embeddings must be finite"),
        ({"embeddings": torch.tensor([[0.0], [1.0], [1e19], [2.0]])}, "small enough for l2"),
        ({"distance": "dot"}, "Unknown distance"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"sequence_ids": torch.tensor([0, 1])}, "sequence_ids"),
    ],
)
def test_all_pairs_bad_inputs(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {
        "embeddings": torch.tensor([[0.0], [1.0], [3.0], [6.0]]),
        "ids_query": torch.arange(4),
        "ids_gallery": torch.arange(4),
        "labels": torch.tensor([0, 0, 1, 1]),
        "fmr_vals": (0.1,),
    }
    with pytest.raises(ValueError, match=message):
        calc_fnmr_at_fmr_all_pairs(**{**arguments, **kwargs})  # type: ignore[arg-type]
