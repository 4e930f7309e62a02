"""Adapters for torchmetrics-style flat inputs and TF-Similarity-style match masks: the seeds' examples,
agreement with torchmetrics' classes and functions, and a naive TF Similarity formula."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from torch import tensor
from torchmetrics import retrieval as tm
from torchmetrics.functional import retrieval as tmf

from oml_core import hookimpl
from oml_core.functional import metric_adapters as ma
from oml_core.functional.metric_adapters import (
    aggregate,
    calc_grouped_retrieval_metric,
    group_flat_retrieval_inputs,
    map_at_k_tf,
)
from oml_core.registry import Registry, UnknownNameError


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry(load_entrypoints=False)


# ------------------------------------------------------------------------ torchmetrics' examples (seed 003)
def test_seed_retrieval_fall_out_class_example(registry: Registry) -> None:
    indexes = tensor([0, 0, 0, 1, 1, 1, 1])
    preds = tensor([0.2, 0.3, 0.5, 0.1, 0.3, 0.5, 0.2])
    target = tensor([False, False, True, False, True, False, True])
    value = calc_grouped_retrieval_metric("fallout", preds, target, indexes, top_k=2, registry=registry)
    assert value.item() == pytest.approx(0.5)
    assert value.ndim == 0 and value.dtype == torch.float32


def test_seed_retrieval_fall_out_function_example() -> None:
    assert ma.retrieval_fall_out(tensor([0.2, 0.3, 0.5]), tensor([True, False, True]), top_k=2).item() == 1.0


def test_grouping_sorts_by_query_then_by_descending_score_stably() -> None:
    preds = tensor([0.1, 0.9, 0.5, 0.5, 0.7, 0.5, 0.2])
    target = tensor([1, 0, 1, 0, -1, 1, 0])
    indexes = tensor([7, 3, 7, 7, 3, 7, 3])
    gt_tops, n_gts, n_items = group_flat_retrieval_inputs(preds, target, indexes, ignore_index=-1)
    # query 3: rows 1 (0.9, 0) and 6 (0.2, 0), row 4 ignored; query 7: rows 2, 3, 5 tied at 0.5, then row 0
    assert [t.tolist() for t in gt_tops] == [[False, False], [True, False, True, True]]
    assert n_gts.tolist() == [0, 3] and n_items.tolist() == [2, 4]


def test_ties_keep_the_row_order(registry: Registry) -> None:
    preds, target = tensor([0.5, 0.5, 0.5]), tensor([0, 1, 0])
    assert ma.retrieval_reciprocal_rank(preds, target).item() == pytest.approx(0.5)
    assert ma.retrieval_reciprocal_rank(preds, target.flip(0)).item() == pytest.approx(0.5)
    assert ma.retrieval_reciprocal_rank(preds, tensor([0, 0, 1])).item() == pytest.approx(1 / 3)


def test_aggregate_leaves_skipped_queries_out() -> None:
    values = tensor([0.2, float("nan"), 0.6, 0.4, 1.0])
    assert aggregate(values, "mean").item() == pytest.approx(0.55)
    assert aggregate(values, "median").item() == pytest.approx(0.4)  # torch.median: the lower middle value
    assert aggregate(values, "min").item() == pytest.approx(0.2)
    assert aggregate(values, "max").item() == pytest.approx(1.0)
    assert aggregate(values, lambda v: v.sum()).item() == pytest.approx(2.2)
    assert aggregate(tensor([float("nan")]), "mean").item() == 0.0


# ------------------------------------------------------------------------ agreement with torchmetrics
TM_CLASSES = {
    "fallout": tm.RetrievalFallOut,
    "mrr": tm.RetrievalMRR,
    "ndcg": tm.RetrievalNormalizedDCG,
    "precision_classic": tm.RetrievalPrecision,
    "map": tm.RetrievalMAP,
}


def spread(values: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """A custom aggregation (torchmetrics passes ``dim``)."""
    return values.max() - values.min()


def random_flat_inputs(rng: random.Random, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Shuffled rows of a few queries with scattered ids, distinct positive scores, some ignored rows."""
    n_queries = rng.randint(1, 6)
    sizes = [rng.randint(1, 9) for _ in range(n_queries)]
    ids = rng.sample(range(100), n_queries)
    indexes = torch.tensor([i for i, s in zip(ids, sizes) for _ in range(s)])
    n = len(indexes)
    preds = (torch.randperm(n, generator=generator) + 1).float() / n
    target = (torch.rand(n, generator=generator) < rng.choice((0.0, 0.3, 0.8, 1.0))).long()
    target[torch.rand(n, generator=generator) < 0.15] = -100
    shuffle = torch.randperm(n, generator=generator)
    return preds[shuffle], target[shuffle], indexes[shuffle]


@pytest.mark.parametrize("name", list(TM_CLASSES))
def test_grouped_metric_agrees_with_torchmetrics_classes(name: str, registry: Registry) -> None:
    rng, generator = random.Random(11), torch.Generator().manual_seed(11)
    checked = 0
    for case in range(150):
        preds, target, indexes = random_flat_inputs(rng, generator)
        if bool((target == -100).all()):
            continue
        top_k = rng.choice((None, 1, 2, 4, 12))
        action = rng.choice(("neg", "pos", "skip"))
        aggregation = rng.choice(("mean", "median", "min", "max", spread))
        options = {"adaptive_k": rng.random() < 0.5} if name == "precision_classic" else {}
        reference = TM_CLASSES[name](
            empty_target_action=action, ignore_index=-100, top_k=top_k, aggregation=aggregation, **options
        )
        expected = reference(preds, target, indexes=indexes).item()
        got = calc_grouped_retrieval_metric(
            name, preds, target, indexes, top_k, -100, action, aggregation, registry=registry, **options
        ).item()
        assert got == pytest.approx(expected, abs=1e-6), (case, top_k, action, aggregation, options)
        checked += 1
    assert checked > 100


@pytest.mark.parametrize(
    "ours, theirs",
    [
        (ma.retrieval_fall_out, tmf.retrieval_fall_out),
        (ma.retrieval_reciprocal_rank, tmf.retrieval_reciprocal_rank),
        (ma.retrieval_normalized_dcg, tmf.retrieval_normalized_dcg),
        (ma.retrieval_precision, tmf.retrieval_precision),
        (ma.retrieval_average_precision, tmf.retrieval_average_precision),
    ],
)
def test_single_query_functions_agree_with_torchmetrics(ours, theirs) -> None:  # noqa: ANN001
    generator = torch.Generator().manual_seed(3)
    for _ in range(200):
        m = int(torch.randint(1, 12, (1,), generator=generator))
        preds = (torch.randperm(m, generator=generator) + 1).float() / m
        target = torch.rand(m, generator=generator) < torch.rand(1, generator=generator)
        top_k = [None, 1, 3, 20][int(torch.randint(0, 4, (1,), generator=generator))]
        assert ours(preds, target, top_k=top_k).item() == pytest.approx(
            theirs(preds, target, top_k=top_k).item()
        )


def test_precision_adaptive_k_agrees_with_torchmetrics() -> None:
    preds, target = tensor([0.9, 0.2, 0.4]), tensor([True, False, True])
    for adaptive_k in (False, True):
        expected = tmf.retrieval_precision(preds, target, top_k=5, adaptive_k=adaptive_k).item()
        assert ma.retrieval_precision(preds, target, top_k=5, adaptive_k=adaptive_k).item() == pytest.approx(
            expected
        )
    assert ma.retrieval_precision(preds, target, top_k=5).item() == pytest.approx(2 / 5)


def test_empty_target_action_error_and_fallout_default(registry: Registry) -> None:
    preds, target, indexes = tensor([0.3, 0.2, 0.9, 0.1]), tensor([0, 0, 1, 1]), tensor([0, 0, 1, 1])
    with pytest.raises(ValueError, match="mrr: query 0 has no positive target"):
        calc_grouped_retrieval_metric(
            "mrr", preds, target, indexes, empty_target_action="error", registry=registry
        )
    with pytest.raises(ValueError, match="fallout: query 1 has no non-relevant gallery item"):
        calc_grouped_retrieval_metric(
            "fallout", preds, target, indexes, empty_target_action="error", registry=registry
        )
    # query 0: 1 of its 2 negatives in the top 1 -> 0.5; query 1 has no negative: "neg" counts it as 0,
    # "pos" as 1 (the default of torchmetrics' RetrievalFallOut class)
    assert calc_grouped_retrieval_metric("fallout", preds, target, indexes, 1).item() == pytest.approx(0.25)
    pos = calc_grouped_retrieval_metric("fallout", preds, target, indexes, 1, empty_target_action="pos")
    assert pos.item() == pytest.approx(0.75)
    assert pos.item() == pytest.approx(tm.RetrievalFallOut(top_k=1)(preds, target, indexes=indexes).item())


def test_plugin_metric_through_the_grouped_adapter() -> None:
    class ShareOfGallery:
        @hookimpl
        def oml_register_retrieval_metrics(self, register):
            register("share_of_gallery", share_of_gallery)

    def share_of_gallery(gt_tops, n_gts, top_k, n_gallery):
        return [torch.as_tensor(n_gts).float() / n_gallery for _ in top_k]

    registry = Registry([ShareOfGallery()], load_entrypoints=False)
    value = calc_grouped_retrieval_metric(
        "share_of_gallery",
        tensor([0.1, 0.2, 0.3, 0.4]),
        tensor([1, 0, 0, 1]),
        tensor([0, 0, 0, 5]),
        1,
        registry=registry,
        aggregation="min",
    )
    assert value.item() == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"name": "hitz"}, UnknownNameError, "hitz"),
        ({"empty_target_action": "drop"}, ValueError, "empty_target_action must be one of"),
        ({"aggregation": "sum"}, ValueError, "aggregation must be one of"),
        ({"top_k": 0}, ValueError, "top_k must be a positive integer or None"),
        ({"top_k": 2.0}, ValueError, "top_k must be a positive integer or None"),
        ({"indexes": tensor([0.0, 0.0, 1.0])}, ValueError, "indexes must be a tensor of integers"),
        ({"indexes": tensor([0, 1])}, ValueError, "must have the same shape"),
        ({"preds": tensor([1, 2, 3])}, ValueError, "preds must be a tensor of floats"),
        ({"target": tensor([0, 2, 1])}, ValueError, "target must contain binary values"),
        ({"ignore_index": 0.5}, ValueError, "ignore_index must be an integer or None"),
        ({"target": tensor([-1, -1, -1]), "ignore_index": -1}, ValueError, "must be non-empty"),
    ],
)
def test_grouped_metric_rejects_bad_inputs(kwargs: dict, error: type, match: str, registry: Registry) -> None:
    arguments = {
        "name": "mrr",
        "preds": tensor([0.1, 0.2, 0.3]),
        "target": tensor([0, 1, 1]),
        "indexes": tensor([0, 0, 1]),
        "registry": registry,
        **kwargs,
    }
    with pytest.raises(error, match=match):
        calc_grouped_retrieval_metric(**arguments)


# ------------------------------------------------------------------------ TF Similarity (seed 001)
def test_seed_tf_similarity_example() -> None:
    first, last = torch.zeros(1, 50, dtype=torch.bool), torch.zeros(1, 50, dtype=torch.bool)
    first[0, :10], last[0, 40:] = True, True
    assert map_at_k_tf(tensor([4]), first, r={4: 100}, k=50).item() == pytest.approx(0.10)
    assert round(map_at_k_tf(tensor([4]), last, r={4: 100}, k=50).item(), 3) == 0.012
    both = map_at_k_tf(np.array([4, 4]), torch.cat([first, last]), r={4: 100, 1: 3}, k=50)
    assert both.item() == pytest.approx((0.10 + sum(j / (40 + j) for j in range(1, 11)) / 100) / 2)


def tf_reference(labels: np.ndarray, mask: np.ndarray, r: dict[int, int], k: int) -> float:
    """TF Similarity's ``MapAtK.compute`` formula written with numpy."""
    k_slice = mask[:, :k].astype(float)
    p_at_k = np.cumsum(k_slice, axis=1) / np.arange(1, k + 1) * k_slice
    return float(np.mean(p_at_k.sum(axis=1) / np.array([r[int(x)] for x in labels])))


def test_map_at_k_tf_agrees_with_the_tf_formula() -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):
        n, n_neighbors = rng.integers(1, 8), rng.integers(1, 12)
        k = int(rng.integers(1, n_neighbors + 1))
        labels = rng.integers(0, 3, size=n)
        mask = rng.random((n, n_neighbors)) < rng.random()
        r = {c: int(n_neighbors + rng.integers(0, 5)) for c in range(3)}
        got = map_at_k_tf(labels, mask, r=r, k=k).item()
        assert got == pytest.approx(tf_reference(labels, mask, r, k), abs=1e-6)


def test_map_at_k_tf_distance_threshold() -> None:
    mask = torch.tensor([[True, True, False, True]])
    distances = torch.tensor([[0.1, 0.5, 0.6, 0.7]])
    assert map_at_k_tf(tensor([0]), mask, {0: 4}, k=4, lookup_distances=distances).item() == pytest.approx(
        (1 + 1 + 3 / 4) / 4
    )
    at_threshold = map_at_k_tf(
        tensor([0]), mask, {0: 4}, k=4, distance_threshold=0.5, lookup_distances=distances
    )
    assert at_threshold.item() == pytest.approx((1 + 1) / 4)  # the match at 0.7 is beyond the threshold


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"average": "macro"}, "only supports micro averaging"),
        ({"k": 5}, "number of neighbors must be >= K"),
        ({"k": 0}, "k must be a positive integer"),
        ({"query_labels": tensor([0])}, "one row per query label"),
        ({"r": {0: 3}}, r"r has no class size for the query labels \[1\]"),
        ({"distance_threshold": 0.5}, "needs the neighbours' lookup_distances"),
        ({"lookup_distances": torch.zeros(2, 3)}, "lookup_distances must have the shape"),
        ({"query_labels": tensor([0.0, 1.0])}, "query_labels must be integers"),
    ],
)
def test_map_at_k_tf_rejects_bad_inputs(kwargs: dict, match: str) -> None:
    arguments = {
        "query_labels": tensor([0, 1]),
        "match_mask": torch.ones(2, 4, dtype=torch.bool),
        "r": {0: 3, 1: 3},
        "k": 3,
        **kwargs,
    }
    with pytest.raises(ValueError, match=match):
        map_at_k_tf(**arguments)


def test_map_at_k_tf_nan_free_for_unusual_classes() -> None:
    # a class of size 0 in the index gives 0 (TF Similarity would divide by zero)
    value = map_at_k_tf(tensor([0, 1]), torch.tensor([[False, False], [True, False]]), {0: 0, 1: 1}, k=2)
    assert not math.isnan(value.item()) and value.item() == pytest.approx(0.5)
