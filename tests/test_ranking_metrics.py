"""The metrics of the other reference systems (recall, MRR, nDCG, classic precision, fall-out, TF Similarity's
mAP@K) on ragged inputs: the seeds' worked examples, hand-computed cases, the empty-case conventions, and
agreement with naive python references and with torchmetrics."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
import torch
from torch import BoolTensor
from torchmetrics.functional.retrieval import (
    retrieval_average_precision,
    retrieval_fall_out,
    retrieval_normalized_dcg,
    retrieval_precision,
    retrieval_recall,
    retrieval_reciprocal_rank,
)

import oml_core.functional.metrics as fm
from oml_core.functional.metrics import calc_map
from oml_core.functional.ranking_metrics import (
    calc_fallout,
    calc_map_r,
    calc_mrr,
    calc_ndcg,
    calc_precision_classic,
    calc_recall,
)


def log2_discount(rank: int) -> float:
    return 1 / math.log2(rank + 1)


def assert_values(results: list[torch.Tensor], expected: list[list[float]]) -> None:
    """One float32 per-query tensor per k, equal to ``expected`` (to float32 precision)."""
    assert len(results) == len(expected)
    for values, exp in zip(results, expected):
        assert values.dtype == torch.float32
        assert values.tolist() == pytest.approx(exp, abs=1e-6, nan_ok=True)


# ------------------------------------------------------------------------ the notebook (seed 004)
NOTEBOOK_GROUND_TRUTH = [[11, 1, 7, 17, 21], [4, 16, 1], [26, 10, 22, 8]]
NOTEBOOK_RESULTS = [
    [11, 1, 17, 7, 21, 8, 0, 28, 9, 20],
    [16, 1, 6, 18, 3, 4, 25, 19, 8, 14],
    [24, 10, 26, 2, 8, 28, 4, 23, 13, 21],
]
NOTEBOOK_CUTOFFS = (1, 5, 10)


def notebook_inputs() -> tuple[list[torch.Tensor], list[int]]:
    gt_tops = [BoolTensor([r in gt for r in res]) for res, gt in zip(NOTEBOOK_RESULTS, NOTEBOOK_GROUND_TRUTH)]
    return gt_tops, [len(gt) for gt in NOTEBOOK_GROUND_TRUTH]


@pytest.mark.parametrize(
    "fn, printed",
    [
        (calc_recall, [0.6666666666666666, 0.8055555555555555, 0.9166666666666666]),
        (calc_mrr, [0.6666666666666666, 0.8333333333333334, 0.8333333333333334]),
        (calc_precision_classic, [0.6666666666666666, 0.6666666666666666, 0.3666666666666667]),
        (
            calc_map,
            [0.6666666666666666, 0.862962962962963, 0.8074074074074075],
        ),  # the notebook's MAP is OML's
    ],
)
def test_notebook_printed_values(fn: Callable[..., list[torch.Tensor]], printed: list[float]) -> None:
    gt_tops, n_gts = notebook_inputs()
    means = [v.mean().item() for v in fn(gt_tops, n_gts, NOTEBOOK_CUTOFFS)]
    assert means == pytest.approx(printed, abs=1e-6)


def test_notebook_ndcg_from_its_definition() -> None:
    # The notebook's printed nDCG passes ids as scores to sklearn; these are the definition's values:
    # relevance q0 = [1,1,1,1,1,0...], q1 = [1,1,0,0,0,1,0...], q2 = [0,1,1,0,1,0...]; n = 5, 3, 4.
    gt_tops, n_gts = notebook_inputs()
    d = log2_discount
    q1_dcg5, q1_idcg = d(1) + d(2), d(1) + d(2) + d(3)
    q2_dcg, q2_idcg = d(2) + d(3) + d(5), d(1) + d(2) + d(3) + d(4)
    expected = [
        [1.0, 1.0, 0.0],
        [1.0, q1_dcg5 / q1_idcg, q2_dcg / q2_idcg],
        [1.0, (q1_dcg5 + d(6)) / q1_idcg, q2_dcg / q2_idcg],
    ]
    assert_values(calc_ndcg(gt_tops, n_gts, NOTEBOOK_CUTOFFS), expected)


# ------------------------------------------------------------------------ TF Similarity (seed 001)
def test_tf_similarity_map_at_k_example() -> None:
    first, last = torch.zeros(50, dtype=torch.bool), torch.zeros(50, dtype=torch.bool)
    first[:10], last[40:] = True, True
    values = calc_map_r([first, last], [100, 100], top_k=(50,))[0]
    assert values[0].item() == pytest.approx(0.10)
    assert values[1].item() == pytest.approx(sum(j / (40 + j) for j in range(1, 11)) / 100)
    assert round(values[1].item(), 3) == 0.012


def test_map_r_differs_from_oml_map_by_its_denominator() -> None:
    tops = [BoolTensor([1, 0, 1, 0, 0])]
    assert calc_map_r(tops, [4], (5,))[0].item() == pytest.approx((1 + 2 / 3) / 4)
    assert calc_map(tops, [4], (5,))[0].item() == pytest.approx((1 + 2 / 3) / 2)


# ------------------------------------------------------------------------ hand-computed cases
TOPS = [BoolTensor([0, 1, 0, 1]), BoolTensor([1, 0]), BoolTensor([0, 0, 0]), BoolTensor([])]
N_GTS = [3, 4, 2, 1]


def test_recall_hand_computed_and_not_clipped_to_the_retrieved_length() -> None:
    assert_values(
        calc_recall(TOPS, N_GTS, (1, 2, 4)), [[0, 1, 0, 0], [1 / 2, 1 / 2, 0, 0], [2 / 3, 1 / 4, 0, 0]]
    )


def test_mrr_hand_computed() -> None:
    assert_values(calc_mrr(TOPS, N_GTS, (1, 2, 4)), [[0, 1, 0, 0], [1 / 2, 1, 0, 0], [1 / 2, 1, 0, 0]])


def test_ndcg_hand_computed() -> None:
    d = log2_discount
    assert_values(
        calc_ndcg(TOPS, N_GTS, (1, 4)),
        [[0, 1, 0, 0], [(d(2) + d(4)) / (d(1) + d(2) + d(3)), 1 / (d(1) + d(2) + d(3) + d(4)), 0, 0]],
    )


def test_precision_classic_hand_computed_and_adaptive_k() -> None:
    assert_values(calc_precision_classic(TOPS, N_GTS, (1, 4)), [[0, 1, 0, 0], [2 / 4, 1 / 4, 0, 0]])
    assert_values(
        calc_precision_classic(TOPS, N_GTS, (1, 4), adaptive_k=True), [[0, 1, 0, 0], [2 / 4, 1 / 2, 0, 0]]
    )


def test_map_r_hand_computed() -> None:
    assert_values(
        calc_map_r(TOPS, N_GTS, (2, 4)), [[(1 / 2) / 3, 1 / 4, 0, 0], [(1 / 2 + 2 / 4) / 3, 1 / 4, 0, 0]]
    )


def test_fallout_hand_computed() -> None:
    # negatives: 10 - 3 = 7, 6 - 4 = 2, 5 - 2 = 3, 1 - 1 = 0 (no negative: "neg" gives 0)
    values = calc_fallout(TOPS, N_GTS, (1, 4), n_gallery=[10, 6, 5, 1])
    assert_values(values, [[1 / 7, 0, 1 / 3, 0], [2 / 7, 1 / 2, 1, 0]])


@pytest.mark.parametrize("fn", [calc_recall, calc_mrr, calc_ndcg, calc_precision_classic, calc_map_r])
def test_empty_cases_follow_oml(fn: Callable[..., list[torch.Tensor]]) -> None:
    tops = [BoolTensor([]), BoolTensor([]), BoolTensor([0, 0])]
    assert_values(fn(tops, [0, 2, 0], (1, 3)), [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])


def test_fallout_empty_cases_and_empty_target_action() -> None:
    tops = [BoolTensor([]), BoolTensor([1, 1]), BoolTensor([0, 1])]
    n_gts, n_gallery = [0, 2, 1], [4, 2, 3]  # query 1 has no negative
    assert_values(calc_fallout(tops, n_gts, (2,), n_gallery), [[0.0, 0.0, 0.5]])
    assert_values(calc_fallout(tops, n_gts, (2,), n_gallery, "pos"), [[0.0, 1.0, 0.5]])
    skipped = calc_fallout(tops, n_gts, (2,), n_gallery, "skip")[0]
    assert math.isnan(skipped[1].item()) and skipped[[0, 2]].tolist() == [0.0, 0.5]
    with pytest.raises(ValueError, match="query 1 has no non-relevant gallery item"):
        calc_fallout(tops, n_gts, (2,), n_gallery, "error")
    assert_values(calc_fallout(tops[::2], n_gts[::2], (2,), n_gallery[::2], "error"), [[0.0, 0.5]])


def test_fallout_bad_arguments() -> None:
    with pytest.raises(ValueError, match="empty_target_action must be one of"):
        calc_fallout(TOPS, N_GTS, (1,), n_gallery=10, empty_target_action="zero")
    with pytest.raises(ValueError, match=r"one entry per query \(4\), got 3"):
        calc_fallout(TOPS, N_GTS, (1,), n_gallery=[10, 10, 10])
    with pytest.raises(ValueError, match=r"n_gallery of query 1 \(3\) is smaller than its 4 relevant"):
        calc_fallout(TOPS, N_GTS, (1,), n_gallery=[10, 3, 10, 10])
    with pytest.raises(ValueError, match=r"n_gallery of query 2 \(3\).* 3 non-relevant items retrieved"):
        calc_fallout(TOPS, N_GTS, (3,), n_gallery=[10, 10, 3, 10])
    with pytest.raises(ValueError, match="non-negative"):
        calc_fallout(TOPS, N_GTS, (1,), n_gallery=-1)


def test_bad_top_k_and_adaptive_k() -> None:
    with pytest.raises(ValueError, match="top_k"):
        calc_recall(TOPS, N_GTS, (0,))
    with pytest.raises(ValueError, match="adaptive_k must be a bool"):
        calc_precision_classic(TOPS, N_GTS, (1,), adaptive_k="yes")  # type: ignore[arg-type]


# ------------------------------------------------------------------------ naive references
def naive(
    name: str,
    tops: list[bool],
    n_gt: int,
    k: int,
    n_gallery: int = 0,
    action: str = "neg",
    adaptive: bool = False,
) -> float:
    """Plain-python definitions, one query at a time (OML's rule first: nothing to find, nothing found = 1)."""
    if name != "fallout" and not tops and n_gt == 0:
        return 1.0
    top = tops[:k]
    hits = sum(top)
    if name == "recall":
        return hits / max(min(k, n_gt), 1)
    if name == "mrr":
        for j, relevant in enumerate(top):
            if relevant:
                return 1 / (j + 1)
        return 0.0
    if name == "ndcg":
        dcg = sum(log2_discount(j + 1) for j, relevant in enumerate(top) if relevant)
        idcg = sum(log2_discount(j + 1) for j in range(min(k, n_gt)))
        return dcg / idcg if idcg else 0.0
    if name == "precision_classic":
        denominator = min(k, len(tops)) if adaptive else k
        return hits / denominator if denominator else 0.0
    if name == "map_r":
        total, seen = 0.0, 0
        for j, relevant in enumerate(top, start=1):
            if relevant:
                seen += 1
                total += seen / j
        return total / n_gt if n_gt else 0.0
    assert name == "fallout"
    negatives = n_gallery - n_gt
    if negatives == 0:
        return {"neg": 0.0, "pos": 1.0, "skip": math.nan}[action]
    return (len(top) - hits) / negatives


def random_ragged_case(rng: random.Random) -> tuple[list[list[bool]], list[int], list[int]]:
    tops, n_gts, n_gallery = [], [], []
    for _ in range(rng.randint(1, 8)):
        top = [
            rng.random() < rng.choice((0.0, 0.3, 0.7, 1.0)) for _ in range(rng.choice((0, 1, 2, 5, 9, 14)))
        ]
        n_gt = sum(top) + rng.choice((0, 0, 1, 3))
        tops.append(top)
        n_gts.append(n_gt)
        n_gallery.append(n_gt + (len(top) - sum(top)) + rng.choice((0, 0, 1, 4)))
    return tops, n_gts, n_gallery


RAGGED = {
    "recall": calc_recall,
    "mrr": calc_mrr,
    "ndcg": calc_ndcg,
    "precision_classic": calc_precision_classic,
    "map_r": calc_map_r,
    "fallout": calc_fallout,
}


@pytest.mark.parametrize("name", list(RAGGED))
@pytest.mark.parametrize("chunk_size", [3, fm.METRICS_CHUNK_SIZE])
def test_matches_naive_reference_on_random_ragged_cases(
    name: str, chunk_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fm, "METRICS_CHUNK_SIZE", chunk_size)
    rng = random.Random(2024)
    for case in range(300):
        tops, n_gts, n_gallery = random_ragged_case(rng)
        top_k = tuple(rng.sample(range(1, 16), rng.randint(1, 3)))
        options: dict = {}
        if name == "fallout":
            options = {"n_gallery": n_gallery, "empty_target_action": rng.choice(("neg", "pos", "skip"))}
        if name == "precision_classic":
            options = {"adaptive_k": rng.random() < 0.5}
        got = RAGGED[name]([BoolTensor(t) for t in tops], n_gts, top_k, **options)
        for k, values in zip(top_k, got):
            expected = [
                naive(
                    name,
                    t,
                    n,
                    k,
                    g,
                    action=options.get("empty_target_action", "neg"),
                    adaptive=options.get("adaptive_k", False),
                )
                for t, n, g in zip(tops, n_gts, n_gallery)
            ]
            assert values.tolist() == pytest.approx(expected, abs=1e-6, nan_ok=True), (case, k, tops, n_gts)


# ------------------------------------------------------------------------ torchmetrics
def torchmetrics_reference(name: str, preds: torch.Tensor, target: torch.Tensor, k: int) -> float:
    if name == "mrr":
        return retrieval_reciprocal_rank(preds, target, top_k=k).item()
    if name == "ndcg":
        return retrieval_normalized_dcg(preds, target, top_k=k).item()
    if name == "precision_classic":
        return retrieval_precision(preds, target, top_k=k, adaptive_k=False).item()
    if name == "fallout":
        return retrieval_fall_out(preds, target, top_k=k).item()
    if name == "map":
        return retrieval_average_precision(preds, target, top_k=k).item()
    assert name == "recall"  # torchmetrics divides by n_gt, oml by min(k, n_gt)
    n_gt = int(target.sum())
    return retrieval_recall(preds, target, top_k=k).item() * n_gt / min(k, n_gt) if n_gt else 0.0


@pytest.mark.parametrize("name", ["mrr", "ndcg", "precision_classic", "fallout", "map", "recall"])
def test_agrees_with_torchmetrics_on_random_queries(name: str) -> None:
    """Random positive scores without ties; oml sees only the top ``max_k`` items of each query."""
    generator = torch.Generator().manual_seed(7)
    fn = {**RAGGED, "map": calc_map}[name]
    top_k = (1, 3, 10)
    queries, gt_tops, n_gts, n_gallery = [], [], [], []
    for _ in range(200):
        m = int(torch.randint(1, 16, (1,), generator=generator))
        preds = (torch.randperm(m, generator=generator) + 1).float() / m
        target = torch.rand(m, generator=generator) < torch.rand(1, generator=generator)
        queries.append((preds, target))
        gt_tops.append(target[torch.argsort(preds, descending=True)][: max(top_k)])
        n_gts.append(int(target.sum()))
        n_gallery.append(m)
    options = {"n_gallery": n_gallery} if name == "fallout" else {}
    got = fn(gt_tops, n_gts, top_k, **options)
    for k, values in zip(top_k, got):
        expected = [torchmetrics_reference(name, preds, target, k) for preds, target in queries]
        assert values.tolist() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("name", list(RAGGED))
def test_no_queries(name: str) -> None:
    options = {"n_gallery": 3} if name == "fallout" else {}
    assert [v.shape for v in RAGGED[name]([], [], (1, 2), **options)] == [(0,), (0,)]
