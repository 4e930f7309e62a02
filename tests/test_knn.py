"""The memory-bounded kNN (``oml_core.knn``) against a naive full-matrix reference.

The reference computes every distance directly (``sqrt(sum((a - b)^2))`` in float64, no matrix multiply),
drops the ignored pairs (same item, same sequence) and sorts each query's list by (distance, gallery
position). Random data is continuous, so there are no near-ties; the tie tests use small integer embeddings,
whose distances are exact in float32 whatever the summation order.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import oml_core.knn.blocks as knn_blocks
import oml_core.knn.top_k as top_k
from oml_core.knn.batched import batched_knn
from oml_core.knn.blocks import DistanceBlock, iter_distance_blocks
from oml_core.knn.distances import NonFiniteDistanceError, get_distance_fn
from oml_core.knn.search import KnnResult, search_knn, search_knn_qg
from oml_core.utils.misc_torch import cosine_dist_mm, l2_dist_mm, pairwise_dist

Naive = tuple[list[list[float]], list[list[int]], list[list[int]], list[int]]


def full_distances(x_query: np.ndarray, x_gallery: np.ndarray, distance: str) -> np.ndarray:
    """The whole ``[Q, G]`` matrix, directly (float64, no ``|a|^2 + |b|^2 - 2ab``)."""
    a, b = x_query.astype(np.float64), x_gallery.astype(np.float64)
    if distance == "l2":
        return np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))
    cos = (a[:, None, :] * b[None, :, :]).sum(-1)
    cos /= np.linalg.norm(a, axis=1)[:, None] * np.linalg.norm(b, axis=1)[None, :]
    return 1 - cos


def naive_knn(
    x_query: np.ndarray,
    x_gallery: np.ndarray,
    top_n: int,
    ignored: np.ndarray,
    relevant: np.ndarray | None,
    distance: str = "l2",
) -> Naive:
    """Sort all the (distance, position) pairs of every query, minus the ``ignored [Q, G]`` ones."""
    dist = full_distances(x_query, x_gallery, distance)
    distances, retrieved, gts, n_gallery = [], [], [], []
    for q in range(len(x_query)):
        pairs = sorted((dist[q, g], g) for g in range(len(x_gallery)) if not ignored[q, g])
        distances.append([d for d, _ in pairs[:top_n]])
        retrieved.append([g for _, g in pairs[:top_n]])
        n_gallery.append(len(pairs))
        if relevant is not None:
            gts.append([g for g in range(len(x_gallery)) if relevant[q, g] and not ignored[q, g]])
    return distances, retrieved, gts, n_gallery


def naive_from_ids(
    x: torch.Tensor,
    ids_query: torch.Tensor,
    ids_gallery: torch.Tensor,
    top_n: int,
    labels: torch.Tensor | None = None,
    sequence: torch.Tensor | None = None,
    distance: str = "l2",
) -> Naive:
    q, g = ids_query.numpy(), ids_gallery.numpy()
    ignored = q[:, None] == g[None, :]
    if sequence is not None:
        s = sequence.numpy()
        ignored |= s[q][:, None] == s[g][None, :]
    relevant = None
    if labels is not None:
        lab = labels.numpy()
        relevant = lab[q][:, None] == lab[g][None, :]
    return naive_knn(x.numpy()[q], x.numpy()[g], top_n, ignored, relevant, distance)


def assert_matches(result: KnnResult, naive: Naive, atol: float = 1e-5) -> None:
    distances, retrieved, gts, n_gallery = naive
    assert [r.tolist() for r in result.retrieved_ids] == retrieved
    assert len(result.distances) == len(distances)
    for actual, expected in zip(result.distances, distances):
        np.testing.assert_allclose(actual.double().numpy(), np.asarray(expected, dtype=np.float64), atol=atol)
    if gts:
        assert result.gt_ids is not None
        assert [g.tolist() for g in result.gt_ids] == gts
    assert result.n_gallery.tolist() == n_gallery


def random_case(seed: int, n: int = 70, dim: int = 6, n_labels: int = 9, n_sequences: int = 25):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)
    labels = torch.randint(0, n_labels, (n,), generator=g)
    sequence = torch.randint(0, n_sequences, (n,), generator=g)
    return x, labels, sequence


#: (chunk_size, memory_budget) pairs: strips of 1 to all rows, tiles of a few to all columns
BLOCKINGS = [(1, None), (3, 5 * 3 * 4), (16, None), (None, None), (None, 5 * 8 * 9), (7, 1)]


@pytest.fixture(params=["defaults", "scan_always"])
def scan_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run with the default topk-or-scan choice and with scanning as soon as a threshold exists, with strips
    of 8 rows by default (growing from 2 when symmetric) and groups of 4 rows, so that both candidate paths,
    the group remainders and many blocks are exercised on small data."""
    if request.param == "scan_always":
        monkeypatch.setattr(top_k, "SCAN_AFTER_SEEN", 0)
    monkeypatch.setattr(knn_blocks, "STRIP_ROWS", 8)
    monkeypatch.setattr(knn_blocks, "SYMMETRIC_FIRST_ROWS", 2)
    monkeypatch.setattr(top_k, "SCAN_GROUP", 4)
    return request.param


# ------------------------------------------------------------------------------------- vs the reference
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("distance", ["l2", "cosine"])
def test_one_vs_rest_matches_naive(seed: int, distance: str, scan_mode: str) -> None:
    # 48 items: 6 of scan_mode's 8-row strips by default, and strips of 1 to 48 rows in the other blockings
    x, labels, sequence = random_case(seed, n=48)
    ids = torch.arange(len(x))
    for seq in (None, sequence):
        expected = naive_from_ids(x, ids, ids, 7, labels, seq, distance)
        for chunk_size, budget in BLOCKINGS:
            result = search_knn(
                x, ids, ids, 7, labels, seq, distance=distance, chunk_size=chunk_size, memory_budget=budget
            )
            assert_matches(result, expected)


@pytest.mark.parametrize("seed", range(3))
def test_query_gallery_split_matches_naive(seed: int, scan_mode: str) -> None:
    x, labels, sequence = random_case(seed, n=80)
    g = torch.Generator().manual_seed(100 + seed)
    ids_query = torch.randperm(80, generator=g)[:30]  # any order, overlapping the gallery
    ids_gallery = torch.randperm(80, generator=g)[:50]
    for seq in (None, sequence):
        expected = naive_from_ids(x, ids_query, ids_gallery, 9, labels, seq)
        for chunk_size, budget in BLOCKINGS:
            result = search_knn(
                x, ids_query, ids_gallery, 9, labels, seq, chunk_size=chunk_size, memory_budget=budget
            )
            assert_matches(result, expected)


@pytest.mark.parametrize("symmetric", [None, False])
def test_results_do_not_depend_on_the_chunk_size(symmetric: bool | None, scan_mode: str) -> None:
    x, labels, sequence = random_case(seed=11, n=30)
    ids = torch.arange(30)
    reference = search_knn(x, ids, ids, 6, labels, sequence, symmetric=symmetric)
    runs = [dict(chunk_size=c) for c in (1, 2, 5, 13, 29, 30, 1000)]
    runs += [dict(memory_budget=b) for b in (1, 700, 9000, 10**9)]  # 1 byte: blocks of one element
    runs += [dict(chunk_size=c, memory_budget=b) for c, b in ((4, 5 * 4 * 10), (30, 5 * 30 * 7))]
    for kwargs in runs:
        result = search_knn(x, ids, ids, 6, labels, sequence, symmetric=symmetric, **kwargs)
        assert [r.tolist() for r in result.retrieved_ids] == [r.tolist() for r in reference.retrieved_ids]
        for a, b in zip(result.distances, reference.distances):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        assert [g.tolist() for g in result.gt_ids] == [g.tolist() for g in reference.gt_ids]


def test_symmetric_and_general_paths_agree(scan_mode: str) -> None:
    x, labels, sequence = random_case(seed=5, n=120, dim=16)
    ids = torch.arange(120)
    for seq in (None, sequence):
        sym = search_knn(x, ids, ids, 10, labels, seq, chunk_size=17, memory_budget=5 * 17 * 30)
        general = search_knn(x, ids, ids, 10, labels, seq, chunk_size=17, symmetric=False)
        assert [r.tolist() for r in sym.retrieved_ids] == [r.tolist() for r in general.retrieved_ids]
        for a, b in zip(sym.distances, general.distances):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        assert torch.equal(sym.n_gallery, general.n_gallery)


def test_two_threads_and_default_blocks_on_a_bigger_set() -> None:
    """Default strips and tiles (a few blocks per strip, growing symmetric strips, scans), two threads: the
    symmetric and the general path agree and every result is sorted."""
    g = torch.Generator().manual_seed(13)
    x = torch.nn.functional.normalize(torch.randn(3000, 64, generator=g), dim=1)
    ids = torch.arange(3000)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        sym = search_knn(x, ids, ids, 5, memory_budget=2**20)
        general = search_knn(x, ids, ids, 5, memory_budget=2**20, symmetric=False)
    finally:
        torch.set_num_threads(threads)
    assert all(bool((d[1:] >= d[:-1]).all()) and len(d) == 5 for d in sym.distances)
    n_different = 0
    for ids_a, ids_b, a, b in zip(sym.retrieved_ids, general.retrieved_ids, sym.distances, general.distances):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)  # ids may differ only at near-ties
        n_different += not torch.equal(ids_a, ids_b)
    assert n_different <= 3


# ------------------------------------------------------------------------------------------------- ties
@pytest.mark.parametrize("blocking", BLOCKINGS + [(2, None), (5, 5 * 5 * 3)])
@pytest.mark.parametrize("symmetric", [None, False])
def test_ties_are_ordered_by_gallery_position(
    blocking: tuple[int | None, int | None], symmetric: bool | None, scan_mode: str
) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 3, (40, 2), generator=g).float()  # 9 distinct points: many exact ties
    ids = torch.arange(40)
    expected = naive_from_ids(x, ids, ids, 8)
    chunk_size, budget = blocking
    result = search_knn(x, ids, ids, 8, chunk_size=chunk_size, memory_budget=budget, symmetric=symmetric)
    assert_matches(result, expected, atol=1e-6)


def test_tie_at_the_kth_place_takes_the_first_positions() -> None:
    # query 0 at the origin; items 1..6 all at distance 1; top 3 must be items 1, 2, 3 in this order
    x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [1.0, 0.0], [0.0, 1.0]])
    for chunk_size in (1, 2, 7):
        distances, retrieved, _ = batched_knn(x, torch.tensor([0]), torch.arange(7), 3, chunk_size=chunk_size)
        assert retrieved[0].tolist() == [1, 2, 3]
        assert distances[0].tolist() == [1.0, 1.0, 1.0]
        distances, retrieved, _ = batched_knn(x, torch.arange(7), torch.arange(7), 3, chunk_size=chunk_size)
        assert retrieved[0].tolist() == [1, 2, 3]
        assert retrieved[5].tolist() == [1, 0, 2]  # item 1 equals item 5: distance 0 first


# ------------------------------------------------------------------------------------- what is ignored
def test_self_and_sequence_exclusion() -> None:
    x = torch.tensor([[0.0], [0.1], [0.2], [5.0], [5.1]])
    labels = torch.tensor([0, 0, 1, 1, 0])
    sequence = torch.tensor([7, 7, 8, 9, 7])
    ids = torch.arange(5)
    result = search_knn(x, ids, ids, 10, labels, sequence)
    # items 0, 1, 4 share sequence 7: none of them retrieves or counts another
    assert [r.tolist() for r in result.retrieved_ids] == [[2, 3], [2, 3], [1, 0, 3, 4], [4, 2, 1, 0], [3, 2]]
    assert [g.tolist() for g in result.gt_ids] == [[], [], [3], [2], []]
    assert result.n_gallery.tolist() == [2, 2, 4, 4, 2]
    without_sequence = search_knn(x, ids, ids, 10, labels)
    assert [g.tolist() for g in without_sequence.gt_ids] == [[1, 4], [0, 4], [3], [2], [0, 1]]
    assert without_sequence.n_gallery.tolist() == [4] * 5
    assert without_sequence.retrieved_ids[0].tolist() == [1, 2, 3, 4]


def test_top_n_larger_than_the_gallery_and_empty_sides() -> None:
    x, labels, _ = random_case(seed=1, n=12)
    result = search_knn(x, torch.arange(12), torch.arange(4), 100, labels)
    expected = naive_from_ids(x, torch.arange(12), torch.arange(4), 100, labels)
    assert_matches(result, expected)
    assert [len(r) for r in result.retrieved_ids] == [3] * 4 + [4] * 8  # queries 0..3 are in the gallery
    no_gallery = search_knn(x, torch.arange(12), torch.zeros(0, dtype=torch.long), 5, labels)
    assert [len(r) for r in no_gallery.retrieved_ids] == [0] * 12
    assert no_gallery.n_gallery.tolist() == [0] * 12 and [len(g) for g in no_gallery.gt_ids] == [0] * 12
    no_query = search_knn(x, torch.zeros(0, dtype=torch.long), torch.arange(12), 5, labels)
    assert len(no_query.retrieved_ids) == len(no_query.gt_ids) == len(no_query.n_gallery) == 0


def test_float64_and_integer_embeddings() -> None:
    x, labels, sequence = random_case(seed=12, n=50)
    ids = torch.arange(50)
    expected = naive_from_ids(x, ids, ids, 6, labels, sequence)
    for embeddings in (x.double(), x):
        result = search_knn(embeddings, ids, ids, 6, labels, sequence, chunk_size=7, memory_budget=5 * 7 * 11)
        assert_matches(result, expected)
        assert result.distances[0].dtype == embeddings.dtype
    points = torch.tensor([[0, 0], [3, 4], [6, 8]])  # integer embeddings are taken as floats
    result = search_knn(points, torch.arange(3), torch.arange(3), 2)
    assert [d.tolist() for d in result.distances] == [[5.0, 10.0], [5.0, 5.0], [5.0, 10.0]]
    assert [r.tolist() for r in result.retrieved_ids] == [[1, 2], [0, 2], [1, 0]]


def test_cosine_and_l2_rank_normalised_vectors_alike() -> None:
    x, _, _ = random_case(seed=2, n=60, dim=12)
    x = torch.nn.functional.normalize(x, dim=1)
    ids = torch.arange(60)
    l2 = search_knn(x, ids, ids, 8, chunk_size=9)
    cosine = search_knn(x, ids, ids, 8, distance="cosine", chunk_size=9)
    assert [r.tolist() for r in l2.retrieved_ids] == [r.tolist() for r in cosine.retrieved_ids]
    for d_l2, d_cos in zip(l2.distances, cosine.distances):  # |a - b|^2 = 2 - 2 cos = 2 d_cos
        torch.testing.assert_close(d_l2**2 / 2, d_cos, atol=1e-5, rtol=1e-5)


def test_query_gallery_from_two_sets_of_embeddings() -> None:
    g = torch.Generator().manual_seed(3)
    xq, xg = torch.randn(25, 5, generator=g), torch.randn(40, 5, generator=g)
    lq, lg = torch.randint(0, 4, (25,), generator=g), torch.randint(0, 4, (40,), generator=g)
    sq, sg = torch.randint(0, 6, (25,), generator=g), torch.randint(0, 6, (40,), generator=g)
    no_ignore = np.zeros((25, 40), dtype=bool)
    relevant = lq.numpy()[:, None] == lg.numpy()[None, :]
    for chunk_size in (1, 4, None):
        result = search_knn_qg(xq, xg, 6, lq, lg, chunk_size=chunk_size)
        assert_matches(result, naive_knn(xq.numpy(), xg.numpy(), 6, no_ignore, relevant))
        assert result.n_gallery.tolist() == [40] * 25
        with_sequence = search_knn_qg(xq, xg, 6, lq, lg, sq, sg, chunk_size=chunk_size)
        same_sequence = sq.numpy()[:, None] == sg.numpy()[None, :]
        assert_matches(with_sequence, naive_knn(xq.numpy(), xg.numpy(), 6, same_sequence, relevant))
    assert search_knn_qg(xq, xg, 3).gt_ids is None


# ---------------------------------------------------------------------------------------- the blocks
def collect_blocks(blocks: list[tuple[DistanceBlock, torch.Tensor, torch.Tensor]], n_q: int, n_g: int):
    dist = torch.full((n_q, n_g), float("nan"), dtype=torch.float64)
    ignore = torch.zeros(n_q, n_g, dtype=torch.bool)
    count = torch.zeros(n_q, n_g, dtype=torch.long)
    for block, distances, flags in blocks:
        rows, cols = block.query_positions, block.gallery_positions
        dist[rows, cols], ignore[rows, cols] = distances.double(), flags
        count[rows, cols] += 1
        if block.mirrored:
            dist[cols, rows], ignore[cols, rows] = distances.T.double(), flags.T
            count[cols, rows] += 1
    return dist, ignore, count


@pytest.mark.parametrize(
    "blocking", [(1, None), (4, None), (9, None), (30, None), (None, None), (4, 5 * 4 * 7)]
)
def test_distance_blocks_cover_every_pair_once(blocking: tuple[int | None, int | None]) -> None:
    x, _, sequence = random_case(seed=4, n=30)
    ids = torch.arange(30)
    expected_dist = torch.from_numpy(full_distances(x.numpy(), x.numpy(), "l2"))
    s = sequence.numpy()
    chunk_size, budget = blocking
    blocks = []
    for block in iter_distance_blocks(
        x, ids, ids, sequence_ids=sequence, chunk_size=chunk_size, memory_budget=budget
    ):
        rows, cols = block.query_positions, block.gallery_positions
        assert block.mirrored == (cols.start >= rows.stop)  # right of the diagonal block
        assert cols.start >= rows.start  # nothing left of the diagonal
        assert block.distances.shape == (len(range(30)[rows]), len(range(30)[cols]))
        assert block.distances.shape[0] <= (chunk_size or 30)
        if budget is not None:
            assert block.distances.numel() * knn_blocks.BLOCK_BYTES_PER_ELEMENT <= budget
        blocks.append((block, block.distances.clone(), block.ignore.clone()))  # buffers are reused
    dist, ignore, count = collect_blocks(blocks, 30, 30)
    assert torch.equal(count, torch.ones(30, 30, dtype=torch.long))
    others = ~torch.eye(
        30, dtype=torch.bool
    )  # an item's distance to itself is only about 1e-3 (cancellation)
    torch.testing.assert_close(dist[others], expected_dist[others], atol=1e-5, rtol=1e-5)
    assert dist.diagonal().abs().max() < 5e-3
    assert torch.equal(ignore, torch.from_numpy(s[:, None] == s[None, :]))


def test_distance_blocks_of_a_split_are_full_rows() -> None:
    x, _, _ = random_case(seed=6, n=40)
    ids_query, ids_gallery = torch.arange(0, 40, 3), torch.arange(5, 40)
    blocks = [
        (b, b.distances.clone(), b.ignore.clone())
        for b in iter_distance_blocks(x, ids_query, ids_gallery, distance="cosine", chunk_size=4)
    ]
    assert all(not b.mirrored and b.gallery_positions == slice(0, 35) for b, _, _ in blocks)
    assert [len(range(14)[b.query_positions]) for b, _, _ in blocks] == [4, 4, 4, 2]
    dist, ignore, count = collect_blocks(blocks, 14, 35)
    assert torch.equal(count, torch.ones(14, 35, dtype=torch.long))
    expected = full_distances(x.numpy()[ids_query.numpy()], x.numpy()[ids_gallery.numpy()], "cosine")
    torch.testing.assert_close(dist, torch.from_numpy(expected), atol=1e-5, rtol=1e-5)
    assert torch.equal(ignore, ids_query[:, None] == ids_gallery[None, :])
    forced = list(iter_distance_blocks(x, ids_query, ids_query, chunk_size=4, symmetric=False))
    assert not any(b.mirrored for b in forced)


def test_memory_budget_bounds_every_block() -> None:
    x, _, _ = random_case(seed=7, n=120)
    ids = torch.arange(120)
    for budget in (5 * 120 * 10, 5 * 3, 777):
        for symmetric in (True, False):
            n_elements = 0
            for block in iter_distance_blocks(x, ids, ids, memory_budget=budget, symmetric=symmetric):
                assert block.distances.numel() * knn_blocks.BLOCK_BYTES_PER_ELEMENT <= budget
                n_elements += block.distances.numel() * (2 if block.mirrored else 1)
            assert n_elements == 120 * 120
    assert knn_blocks.block_shape(2**24) == (knn_blocks.STRIP_ROWS, 2**24 // (5 * knn_blocks.STRIP_ROWS))
    assert knn_blocks.block_shape(10) == (2, 1)  # two rows fit, one column
    assert knn_blocks.block_shape(1) == (1, 1)  # less than an element: blocks of one
    assert knn_blocks.block_shape(5000, chunk_size=100) == (100, 10)
    assert knn_blocks.default_memory_budget(torch.device("cpu")) == knn_blocks.KNN_MEMORY_BUDGET
    assert knn_blocks.default_memory_budget(torch.device("meta")) == knn_blocks.KNN_MEMORY_BUDGET_ACCELERATOR


# ------------------------------------------------------------------------------- precision, overflow
def half_case(dtype: torch.dtype) -> torch.Tensor:
    """Embeddings of magnitude ~300 in ``dtype``: their squared distances (~1e5 and more) overflow float16."""
    x, _, _ = random_case(seed=21, n=90, dim=8)
    return (x * 300).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("distance", ["l2", "cosine"])
@pytest.mark.parametrize("blocking", [(None, None), (7, 5 * 7 * 11)])
def test_half_precision_embeddings_give_exactly_their_float32_results(
    dtype: torch.dtype, distance: str, blocking: tuple[int | None, int | None]
) -> None:
    x = half_case(dtype)
    if dtype == torch.float16:  # what a float16 computation would give: no distance at all
        assert torch.isinf(((x[0] - x[1]) ** 2).sum())
    _, labels, sequence = random_case(seed=21, n=90, dim=8)
    chunk_size, budget = blocking
    ids, ids_gallery = torch.arange(90), torch.arange(10, 90, 2)
    for ids_query, gallery in ((ids, ids), (ids[:40], ids_gallery)):
        result = search_knn(x, ids_query, gallery, 6, labels, sequence, distance, chunk_size, budget)
        as_float = search_knn(
            x.float(), ids_query, gallery, 6, labels, sequence, distance, chunk_size, budget
        )
        assert result.distances.values.dtype == torch.float32
        assert torch.equal(result.distances.values, as_float.distances.values)
        assert [r.tolist() for r in result.retrieved_ids] == [r.tolist() for r in as_float.retrieved_ids]
        assert [g.tolist() for g in result.gt_ids] == [g.tolist() for g in as_float.gt_ids]
        # and the exact values: the float64 reference on the same (float16-rounded) values
        expected = naive_from_ids(x.double(), ids_query, gallery, 6, labels, sequence, distance)
        assert_matches(result, expected, atol=1e-3 if distance == "l2" else 1e-5)
    blocks_qg = {"distance": distance, "chunk_size": chunk_size, "memory_budget": budget}
    qg = search_knn_qg(x[:30], x[30:], 4, **blocks_qg)
    qg_float = search_knn_qg(x[:30].float(), x[30:].float(), 4, **blocks_qg)
    assert torch.equal(qg.distances.values, qg_float.distances.values)
    assert torch.equal(qg.retrieved_ids.values, qg_float.retrieved_ids.values)
    blocks = list(iter_distance_blocks(x, ids, ids, distance, chunk_size=chunk_size, memory_budget=budget))
    assert {block.distances.dtype for block in blocks} == {torch.float32}


def test_distances_that_overflow_float32_name_the_query_and_the_gallery_item() -> None:
    x, labels, _ = random_case(seed=22, n=10, dim=4)
    x[6] = 1e19  # |x_6|^2 = 4e38 > 3.4e38: every distance of row 6 overflows float32
    pattern = (
        r"the l2 distance between query 1 \(row 6 of embeddings\) and gallery item 0 \(row 0 of embeddings\) "
        r"is not finite in float32 \(inf\): the embeddings are too large \(their largest entries are 1e\+19 "
        r"and [0-9.]+\); scale them down"
    )
    with pytest.raises(NonFiniteDistanceError, match=pattern):
        search_knn(x, torch.tensor([3, 6, 8]), torch.tensor([0, 1, 2]), 2, labels)
    with pytest.raises(
        ValueError, match=r"between query 0 \(row 3 of embeddings\) and gallery item 1 \(row 6 of"
    ):
        search_knn(x, torch.tensor([3, 8]), torch.tensor([0, 6, 1]), 2)
    with pytest.raises(ValueError, match=r"query 0 \(row 0 of embeddings\) and gallery item 6 \(row 6 of"):
        search_knn(x, torch.arange(10), torch.arange(10), 3)  # symmetric: row 6 is first met as a column
    with pytest.raises(
        ValueError, match=r"query 0 \(row 0 of embeddings_query\) and gallery item 1 \(row 1 of "
    ):
        search_knn_qg(x[:2], x[5:8], 2)
    with pytest.raises(NonFiniteDistanceError, match="row 6 of embeddings"):  # all the pairs, for fnmr
        list(iter_distance_blocks(x, torch.arange(10), torch.arange(10), chunk_size=3))

    big, _, _ = random_case(seed=23, n=40, dim=8)
    with pytest.raises(NonFiniteDistanceError, match="is not finite in float32"):
        search_knn(big * 1e19, torch.arange(40), torch.arange(40), 5)
    ids, big64 = (
        torch.arange(40),
        big.double() * 1e19,
    )  # float64 embeddings keep their dtype, which holds them
    result = search_knn(big64, ids, ids, 5)
    assert result.distances.values.dtype == torch.float64
    assert_matches(result, naive_from_ids(big64, ids, ids, 5), atol=1e8)  # distances ~4e19: 1e-11 relative
    # cosine distances do not overflow: those of the scaled embeddings are those of the embeddings
    cosine, scaled = (
        search_knn(big, ids, ids, 5, distance="cosine"),
        search_knn(big * 1e19, ids, ids, 5, distance="cosine"),
    )
    assert torch.equal(cosine.retrieved_ids.values, scaled.retrieved_ids.values)
    torch.testing.assert_close(cosine.distances.values, scaled.distances.values, atol=1e-6, rtol=0)


def test_large_but_finite_distances_are_computed() -> None:
    """Squared norms above max / 8 (4.3e37) make the blocks checked; their finite distances are kept."""
    x = torch.tensor([[7e18, 0.0], [0.0, 7e18], [0.0, 0.0]])
    result = search_knn(x, torch.arange(3), torch.arange(3), 2)
    assert [r.tolist() for r in result.retrieved_ids] == [[2, 1], [2, 0], [0, 1]]
    expected = [[7e18, 7e18 * math.sqrt(2)], [7e18, 7e18 * math.sqrt(2)], [7e18, 7e18]]
    for actual, row in zip(result.distances, expected):
        np.testing.assert_allclose(actual.numpy(), row, rtol=1e-6)


# --------------------------------------------------------------------------------------- bad inputs
def test_bad_inputs_are_rejected_with_clear_messages() -> None:
    x, labels, sequence = random_case(seed=8, n=10)
    ids = torch.arange(10)
    with pytest.raises(ValueError, match="top_n must be a positive integer"):
        search_knn(x, ids, ids, 0)
    with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
        search_knn(x, ids, ids, 3, chunk_size=0)
    with pytest.raises(ValueError, match="memory_budget must be a positive integer"):
        search_knn(x, ids, ids, 3, memory_budget=-5)
    with pytest.raises(ValueError, match=r"ids_gallery must be dataset indices within \[0, 9\]"):
        search_knn(x, ids, torch.tensor([0, 10]), 3)
    with pytest.raises(ValueError, match="ids_query must hold integer dataset indices"):
        search_knn(x, torch.tensor([0.0, 1.0]), ids, 3)
    with pytest.raises(ValueError, match=r"labels_gt must have one entry per embedding \(10\), got 9"):
        search_knn(x, ids, ids, 3, labels_gt=labels[:9])
    with pytest.raises(ValueError, match="sequence_ids must hold integer codes"):
        search_knn(x, ids, ids, 3, sequence_ids=sequence.float())
    with pytest.raises(ValueError, match="embeddings must be finite, row 4 is not"):
        bad = x.clone()
        bad[4, 1] = float("nan")
        search_knn(bad, ids, ids, 3)
    with pytest.raises(ValueError, match="embeddings must be a \\[n, dim\\] tensor"):
        search_knn(x[0], ids, ids, 3)
    with pytest.raises(ValueError, match="Unknown distance 'dot'"):
        search_knn(x, ids, ids, 3, distance="dot")
    with pytest.raises(ValueError, match="symmetric=True needs ids_query and ids_gallery to be the same"):
        list(iter_distance_blocks(x, ids, ids.flip(0), symmetric=True))
    with pytest.raises(ValueError, match="give both labels_query and labels_gallery"):
        search_knn_qg(x, x, 3, labels_query=labels)
    with pytest.raises(ValueError, match="give both sequence_query and sequence_gallery"):
        search_knn_qg(x, x, 3, sequence_gallery=sequence)
    with pytest.raises(ValueError, match="differ in dimension: 6 != 5"):
        search_knn_qg(x, x[:, :5], 3)


# ------------------------------------------------------------------------------------ distance helpers
def test_fast_distances_match_the_direct_ones() -> None:
    g = torch.Generator().manual_seed(9)
    a, b = torch.randn(13, 7, generator=g), torch.randn(21, 7, generator=g)
    direct = torch.cdist(a.double(), b.double(), compute_mode="donot_use_mm_for_euclid_dist")
    torch.testing.assert_close(pairwise_dist(a, b).double(), direct, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(get_distance_fn("l2")(a, b).double(), direct, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(l2_dist_mm(a, b, squared=True).double(), direct**2, atol=1e-4, rtol=1e-5)
    out = torch.empty(13, 21)
    assert l2_dist_mm(a, b, out=out).data_ptr() == out.data_ptr()
    cosine = torch.from_numpy(full_distances(a.numpy(), b.numpy(), "cosine"))
    torch.testing.assert_close(cosine_dist_mm(a, b).double(), cosine, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(get_distance_fn("cosine")(a, b).double(), cosine, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pairwise_dist(a, b, p=1), torch.cdist(a, b, p=1))
    assert pairwise_dist(a, a).diagonal().max() < 5e-3  # cancellation: a few sqrt(eps) |a|, not exactly 0
    zero = torch.zeros(1, 7)
    assert cosine_dist_mm(zero, b).tolist() == [[1.0] * 21]  # a zero vector is orthogonal to everything
    with pytest.raises(ValueError, match=r"expected \[n, d\] and \[m, d\] tensors"):
        pairwise_dist(a, b[:, :3])
    assert math.isclose(float(l2_dist_mm(torch.tensor([[3.0, 0.0]]), torch.tensor([[0.0, 4.0]]))), 5.0)
