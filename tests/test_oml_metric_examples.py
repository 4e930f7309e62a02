"""Worked examples through ``calc_retrieval_metrics``: OML's 6-item case (labels [0,0,0,0,1,1], every item a
query and the rest its gallery) for every registered metric, and the notebook's (seed 004) id lists."""

from __future__ import annotations

import math

import pytest
import torch
from torch import LongTensor

from oml_core.functional.metrics import calc_cmc, calc_map, calc_precision, calc_retrieval_metrics
from oml_core.registry import Registry

LABELS = [0, 0, 0, 0, 1, 1]
# Positions (0-based, among the 5 retrieved items) of each query's relevant items.
CORRECT_POSITIONS = [[0, 1, 3], [0, 3, 4], [1, 2, 4], [2, 3, 4], [0], [3]]


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry(load_entrypoints=False)


def six_items_retrieval() -> tuple[list[LongTensor], list[LongTensor]]:
    """Retrieved ids that put every query's relevant items (same label, not itself) at CORRECT_POSITIONS."""
    retrieved, gts = [], []
    for query, positions in enumerate(CORRECT_POSITIONS):
        others = [i for i in range(len(LABELS)) if i != query]
        relevant = [i for i in others if LABELS[i] == LABELS[query]]
        irrelevant = [i for i in others if LABELS[i] != LABELS[query]]
        assert len(relevant) == len(positions)
        order = [relevant.pop(0) if pos in positions else irrelevant.pop(0) for pos in range(len(others))]
        retrieved.append(LongTensor(order))
        gts.append(LongTensor([i for i in others if LABELS[i] == LABELS[query]]))
    return retrieved, gts


def d(rank: int) -> float:
    return 1 / math.log2(rank + 1)


IDCG3 = d(1) + d(2) + d(3)
EXPECTED = {
    ("map", 3): [1, 1, 7 / 12, 1 / 3, 1, 0],
    ("map", 4): [11 / 12, 3 / 4, 7 / 12, 5 / 12, 1, 1 / 4],
    ("map", 5): [11 / 12, 21 / 30, 53 / 90, 43 / 90, 1, 1 / 4],
    ("precision", 3): [2 / 3, 1 / 3, 2 / 3, 1 / 3, 1, 0],
    ("cmc", 2): [1, 1, 1, 0, 1, 0],
    # the other systems' metrics on the same case, by hand
    ("recall", 3): [2 / 3, 1 / 3, 2 / 3, 1 / 3, 1, 0],
    ("recall", 5): [1, 1, 1, 1, 1, 1],
    ("mrr", 5): [1, 1, 1 / 2, 1 / 3, 1, 1 / 4],
    ("ndcg", 3): [(d(1) + d(2)) / IDCG3, 1 / IDCG3, (d(2) + d(3)) / IDCG3, d(3) / IDCG3, 1, 0],
    ("precision_classic", 3): [2 / 3, 1 / 3, 2 / 3, 1 / 3, 1 / 3, 0],
    ("map_r", 3): [2 / 3, 1 / 3, 7 / 18, 1 / 9, 1, 0],
    ("map_r", 5): [11 / 12, 21 / 30, 53 / 90, 43 / 90, 1, 1 / 4],  # all relevant items within 5: = map@5
    # negatives: 5 - 3 = 2 for label 0, 5 - 1 = 4 for label 1
    ("fallout", 3): [1 / 2, 2 / 2, 1 / 2, 2 / 2, 2 / 4, 3 / 4],
}


def test_six_items_case_with_oml_functions() -> None:
    retrieved, gts = six_items_retrieval()
    gt_tops = [torch.isin(r, g) for r, g in zip(retrieved, gts)]
    n_gts = [len(g) for g in gts]
    maps = calc_map(gt_tops, n_gts, top_k=(3, 4, 5))
    for k, values in zip((3, 4, 5), maps):
        assert values.tolist() == pytest.approx(EXPECTED[("map", k)])
    assert calc_precision(gt_tops, n_gts, top_k=(3,))[0].tolist() == pytest.approx(EXPECTED[("precision", 3)])
    assert calc_cmc(gt_tops, n_gts, top_k=(2,))[0].tolist() == EXPECTED[("cmc", 2)]


def test_six_items_case_with_every_metric_through_calc_retrieval_metrics(registry: Registry) -> None:
    retrieved, gts = six_items_retrieval()
    top_k: dict[str, tuple[int, ...]] = {}
    for name, k in EXPECTED:
        top_k[name] = (*top_k.get(name, ()), k)
    metrics = calc_retrieval_metrics(
        retrieved,
        gts,
        reduce=False,
        verbose=False,
        registry=registry,
        n_gallery=5,
        **{f"{name}_top_k": ks for name, ks in top_k.items()},
    )
    assert list(metrics) == [
        "cmc",
        "precision",
        "map",
        "recall",
        "mrr",
        "ndcg",
        "precision_classic",
        "map_r",
        "fallout",
    ]
    for (name, k), expected in EXPECTED.items():
        assert metrics[name][k].dtype == torch.float32
        assert metrics[name][k].tolist() == pytest.approx(expected, abs=1e-6), (name, k)


def test_six_items_case_per_category_and_reduced(registry: Registry) -> None:
    retrieved, gts = six_items_retrieval()
    metrics = calc_retrieval_metrics(
        retrieved,
        gts,
        query_categories=LABELS,
        cmc_top_k=(),
        precision_top_k=(),
        map_top_k=(5,),
        recall_top_k=(3,),
        ndcg_top_k=(3,),
        fallout_top_k=(3,),
        n_gallery=[5] * 6,
        verbose=False,
        registry=registry,
    )
    assert list(metrics) == ["OVERALL", 0, 1]
    for name, k in (("map", 5), ("recall", 3), ("ndcg", 3), ("fallout", 3)):
        values = EXPECTED[(name, k)]
        assert metrics["OVERALL"][name][k].item() == pytest.approx(sum(values) / 6)
        assert metrics[0][name][k].item() == pytest.approx(sum(values[:4]) / 4)
        assert metrics[1][name][k].item() == pytest.approx(sum(values[4:]) / 2)


def test_notebook_id_lists_through_calc_retrieval_metrics(registry: Registry) -> None:
    ground_truth = [[11, 1, 7, 17, 21], [4, 16, 1], [26, 10, 22, 8]]
    results = [
        [11, 1, 17, 7, 21, 8, 0, 28, 9, 20],
        [16, 1, 6, 18, 3, 4, 25, 19, 8, 14],
        [24, 10, 26, 2, 8, 28, 4, 23, 13, 21],
    ]
    cutoffs = (1, 5, 10)
    metrics = calc_retrieval_metrics(
        [LongTensor(r) for r in results],
        [LongTensor(g) for g in ground_truth],
        cmc_top_k=(),
        precision_top_k=(),
        map_top_k=cutoffs,
        recall_top_k=cutoffs,
        mrr_top_k=cutoffs,
        precision_classic_top_k=cutoffs,
        verbose=False,
        registry=registry,
    )
    printed = {
        "recall": [0.6666666666666666, 0.8055555555555555, 0.9166666666666666],
        "mrr": [0.6666666666666666, 0.8333333333333334, 0.8333333333333334],
        "precision_classic": [0.6666666666666666, 0.6666666666666666, 0.3666666666666667],
        "map": [0.6666666666666666, 0.862962962962963, 0.8074074074074075],
    }
    for name, values in printed.items():
        assert [metrics[name][k].item() for k in cutoffs] == pytest.approx(values, abs=1e-6), name
