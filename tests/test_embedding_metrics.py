"""EmbeddingMetrics on a tiny dataset of points on a line, with metrics computed by hand."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from torch import LongTensor

from oml_core import hookimpl
from oml_core.interfaces.datasets import IQueryGalleryLabeledDataset
from oml_core.interfaces.metrics import IBasicMetric
from oml_core.knn.distances import NonFiniteDistanceError
from oml_core.metrics import EmbeddingMetrics, calc_retrieval_metrics_rr, flatten_metrics
from oml_core.registry import Registry, UnknownNameError
from oml_core.retrieval import RetrievalResults

# Five items, every one a query and a gallery item (a query never retrieves itself):
#   item  x    label  category
#   0     0.0  A      x
#   1     1.0  A      x
#   2     1.6  B      y
#   3     4.0  B      y
#   4     4.3  A      y
# Retrieved (closest first) and relevance, by hand:
#   q0: [1, 2, 3, 4]  rel [1, 0, 0, 1]  n_gt 2
#   q1: [2, 0, 3, 4]  rel [0, 1, 0, 1]  n_gt 2
#   q2: [1, 0, 3, 4]  rel [0, 0, 1, 0]  n_gt 1
#   q3: [4, 2, 1, 0]  rel [0, 1, 0, 0]  n_gt 1
#   q4: [3, 2, 1, 0]  rel [0, 0, 1, 1]  n_gt 2
X = [0.0, 1.0, 1.6, 4.0, 4.3]
LABELS = ["A", "A", "B", "B", "A"]
CATEGORIES = ["x", "x", "y", "y", "y"]

CMC_1 = [1, 0, 0, 0, 0]
CMC_3 = [1, 1, 1, 1, 1]
PRECISION_1 = [1, 0, 0, 0, 0]
PRECISION_3 = [1 / 2, 1 / 2, 1, 1, 1 / 2]  # hits in top 3 / min(3, n_gt)
MAP_3 = [1, 1 / 2, 1 / 3, 1 / 2, 1 / 3]  # (sum of n_i / i at the hits) / hits in top 3
MAP_4 = [(1 + 2 / 4) / 2, (1 / 2 + 2 / 4) / 2, 1 / 3, 1 / 2, (1 / 3 + 2 / 4) / 2]


def mean(values: list[float], ids: list[int] | None = None) -> float:
    chosen = [values[i] for i in (ids if ids is not None else range(len(values)))]
    return sum(chosen) / len(chosen)


class LineDataset(IQueryGalleryLabeledDataset):
    def __init__(self, with_categories: bool = True, label2category: dict[str, str] | None = None) -> None:
        columns: dict[str, Any] = {"label": LABELS, "x": X}
        if with_categories:
            columns["category"] = CATEGORIES
        self.df = pd.DataFrame(columns)
        self._label2category = label2category

    def __len__(self) -> int:
        return len(self.df)

    def __getitem__(self, item: int) -> dict[str, Any]:
        return {self.index_key: item, self.labels_key: self.df["label"].iloc[item]}

    def get_labels(self) -> np.ndarray:
        return self.df["label"].to_numpy()

    def get_label2category(self) -> dict[str, str] | None:
        return self._label2category

    def get_query_ids(self) -> LongTensor:
        return torch.arange(len(self))

    def get_gallery_ids(self) -> LongTensor:
        return torch.arange(len(self))


def embeddings_2d() -> torch.Tensor:
    """The points of the line in 2-D (second coordinate 0): one direction of variance out of 2, pcf = 0.5."""
    return torch.tensor([[x, 0.0] for x in X])


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry(load_entrypoints=False)


def run(metric: EmbeddingMetrics, order: list[int] | None = None, batch_size: int = 2) -> dict[str, Any]:
    embeddings = embeddings_2d()
    order = list(range(len(X))) if order is None else order
    metric.setup()
    for start in range(0, len(order), batch_size):
        ids = order[start : start + batch_size]
        metric.update(embeddings[ids], torch.tensor(ids))
    return metric.compute_metrics()


def make_metric(registry: Registry, **kwargs: Any) -> EmbeddingMetrics:
    args: dict[str, Any] = {
        "cmc_top_k": (1, 3),
        "precision_top_k": (1, 3),
        "map_top_k": (3, 4),
        "verbose": False,
    }
    args.update(kwargs)
    return EmbeddingMetrics(registry=registry, **args)


def test_hand_computed_metrics(registry: Registry) -> None:
    metric = make_metric(registry, dataset=LineDataset(with_categories=False))
    assert isinstance(metric, IBasicMetric)
    metrics = run(metric)
    assert list(metrics) == ["OVERALL"]
    overall = metrics["OVERALL"]
    assert list(overall) == ["cmc", "precision", "map", "pcf"]
    assert overall["cmc"][1].item() == pytest.approx(mean(CMC_1))
    assert overall["cmc"][3].item() == pytest.approx(mean(CMC_3))
    assert overall["precision"][1].item() == pytest.approx(mean(PRECISION_1))
    assert overall["precision"][3].item() == pytest.approx(mean(PRECISION_3))  # 0.7
    assert overall["map"][3].item() == pytest.approx(mean(MAP_3))
    assert overall["map"][4].item() == pytest.approx(mean(MAP_4))  # 0.5
    assert overall["pcf"][0.5].item() == pytest.approx(0.5)

    rr = metric.retrieval_results
    assert isinstance(rr, RetrievalResults)
    expected = [[1, 2, 3, 4], [2, 0, 3, 4], [1, 0, 3, 4], [4, 2, 1, 0], [3, 2, 1, 0]]
    assert [r.tolist() for r in rr.retrieved_ids] == expected
    assert rr.n_gts == [2, 2, 1, 1, 2]
    unreduced = metric.metrics_unreduced["OVERALL"]
    torch.testing.assert_close(unreduced["precision"][3], torch.tensor(PRECISION_3, dtype=torch.float32))
    torch.testing.assert_close(unreduced["map"][4], torch.tensor(MAP_4, dtype=torch.float32))
    assert metric.metrics["OVERALL"]["map"][3].item() == pytest.approx(mean(MAP_3))


def test_categories_from_the_category_column(registry: Registry) -> None:
    metrics = run(make_metric(registry, dataset=LineDataset(with_categories=True)))
    assert list(metrics) == ["OVERALL", "x", "y"]
    x, y = [0, 1], [2, 3, 4]
    assert metrics["x"]["cmc"][1].item() == pytest.approx(mean(CMC_1, x))  # 0.5
    assert metrics["y"]["cmc"][1].item() == pytest.approx(mean(CMC_1, y))  # 0
    assert metrics["x"]["precision"][3].item() == pytest.approx(mean(PRECISION_3, x))  # 0.5
    assert metrics["y"]["precision"][3].item() == pytest.approx(mean(PRECISION_3, y))  # 5/6
    assert metrics["x"]["map"][3].item() == pytest.approx(mean(MAP_3, x))  # 0.75
    assert metrics["y"]["map"][3].item() == pytest.approx(mean(MAP_3, y))  # 7/18
    assert metrics["OVERALL"]["map"][3].item() == pytest.approx(mean(MAP_3))
    assert metrics["y"]["pcf"][0.5].item() == pytest.approx(0.5)

    flat = flatten_metrics(metrics)
    assert flat["OVERALL/cmc/1"] == pytest.approx(0.2)
    assert flat["OVERALL/precision/3"] == pytest.approx(0.7)
    assert flat["x/map/3"] == pytest.approx(0.75)
    assert flat["OVERALL/pcf/0.5"] == pytest.approx(0.5)
    assert all(type(v) is float for v in flat.values())
    assert len(flat) == 3 * (2 + 2 + 2 + 1)


def test_categories_from_label2category(registry: Registry) -> None:
    dataset = LineDataset(with_categories=False, label2category={"A": "cat_a", "B": "cat_b"})
    metrics = run(make_metric(registry, dataset=dataset))
    assert list(metrics) == ["OVERALL", "cat_a", "cat_b"]
    assert metrics["cat_a"]["map"][3].item() == pytest.approx(mean(MAP_3, [0, 1, 4]))
    assert metrics["cat_b"]["map"][3].item() == pytest.approx(mean(MAP_3, [2, 3]))


def test_return_only_overall_category(registry: Registry) -> None:
    metric = make_metric(registry, dataset=LineDataset(), return_only_overall_category=True)
    metrics = run(metric)
    assert list(metrics) == ["OVERALL"]
    assert list(metric.metrics) == ["OVERALL", "x", "y"]  # kept, only not returned


def test_shuffled_and_repeated_updates(registry: Registry) -> None:
    metric = make_metric(registry, dataset=LineDataset())
    reference = flatten_metrics(run(metric))
    metric.setup()
    metric.update(torch.full((5, 2), 123.0), torch.arange(5))  # garbage, overwritten below
    embeddings = embeddings_2d()
    for ids in ([3, 0], [4], [1, 2, 0]):  # any order, item 0 twice
        metric.update(embeddings[ids], ids)
    assert flatten_metrics(metric.compute_metrics()) == reference
    assert flatten_metrics(run(metric, order=[4, 2, 0, 3, 1], batch_size=3)) == reference


def test_incomplete_data_raises(registry: Registry) -> None:
    metric = make_metric(registry, dataset=LineDataset())
    metric.setup()
    metric.update(embeddings_2d()[:3], torch.arange(3))
    with pytest.raises(ValueError, match="collected 3 out of 5"):
        metric.compute_metrics()
    with pytest.raises(ValueError, match="within"):
        metric.update(embeddings_2d()[:1], torch.tensor([5]))


def test_setup_resets(registry: Registry) -> None:
    metric = make_metric(registry, dataset=LineDataset())
    run(metric)
    metric.setup()
    assert metric.metrics is None and metric.metrics_unreduced is None and metric.retrieval_results is None
    with pytest.raises(ValueError, match="no embeddings were collected"):
        metric.compute_metrics()


class HitsPlugin:
    @hookimpl
    def oml_register_retrieval_metrics(self, register):
        register("hits", hits)


def hits(gt_tops, n_gts, top_k):
    return [torch.tensor([float(t[:k].sum()) for t in gt_tops]) for k in top_k]


def test_plugin_metric_by_name() -> None:
    registry = Registry([HitsPlugin()], load_entrypoints=False)
    metric = EmbeddingMetrics(
        LineDataset(),
        cmc_top_k=(1,),
        precision_top_k=(),
        map_top_k=(),
        hits_top_k=(2, 4),
        verbose=False,
        registry=registry,
    )
    metrics = run(metric)
    assert list(metrics["OVERALL"]) == ["cmc", "hits", "pcf"]
    # hits in top 2: q0 1, q1 1, q2 0, q3 1, q4 0; in top 4: 2, 2, 1, 1, 2
    assert metrics["OVERALL"]["hits"][2].item() == pytest.approx(3 / 5)
    assert metrics["OVERALL"]["hits"][4].item() == pytest.approx(8 / 5)
    assert metrics["x"]["hits"][4].item() == pytest.approx(2.0)
    assert metric.retrieval_results.n_retrieved_items == 4  # n_items = the largest k of all the metrics


def test_other_systems_metrics_by_name(registry: Registry) -> None:
    """recall, fall-out, MRR and nDCG through EmbeddingMetrics, by hand from the table above (every query
    could retrieve the 4 other items: fall-out's denominator is 4 - n_gt)."""
    metric = EmbeddingMetrics(
        LineDataset(),
        cmc_top_k=(),
        precision_top_k=(),
        map_top_k=(),
        pcf_variance=(),
        recall_top_k=(1, 3),
        fallout_top_k=(2,),
        mrr_top_k=(4,),
        ndcg_top_k=(2,),
        metric_kwargs={"fallout": {"empty_target_action": "error"}},
        verbose=False,
        registry=registry,
    )
    metrics = run(metric)
    overall = metrics["OVERALL"]
    assert list(overall) == ["recall", "fallout", "mrr", "ndcg"]
    assert overall["recall"][1].item() == pytest.approx(mean([1, 0, 0, 0, 0]))
    assert overall["recall"][3].item() == pytest.approx(mean([1 / 2, 1 / 2, 1, 1, 1 / 2]))
    fallout_2 = [(2 - 1) / 2, (2 - 1) / 2, 2 / 3, 1 / 3, 2 / 2]  # (top 2 - hits) / (4 - n_gt)
    assert overall["fallout"][2].item() == pytest.approx(mean(fallout_2))
    assert metrics["y"]["fallout"][2].item() == pytest.approx(mean(fallout_2, [2, 3, 4]))
    assert overall["mrr"][4].item() == pytest.approx(mean([1, 1 / 2, 1 / 3, 1 / 2, 1 / 3]))
    discount = 1 / np.log2(3)
    ndcg_2 = [1 / (1 + discount), discount / (1 + discount), 0, discount, 0]
    assert overall["ndcg"][2].item() == pytest.approx(mean(ndcg_2))
    assert metric.retrieval_results.n_gallery.tolist() == [4] * 5


def test_unknown_metric_and_argument(registry: Registry) -> None:
    with pytest.raises(UnknownNameError, match="hitz"):
        EmbeddingMetrics(LineDataset(), hitz_top_k=(1,), registry=registry)
    with pytest.raises(TypeError, match="cmc_topk"):  # a misspelt argument is not silently dropped
        EmbeddingMetrics(LineDataset(), cmc_topk=(1,), registry=registry)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"not requested: \['recall'\]"):
        EmbeddingMetrics(LineDataset(), metric_kwargs={"recall": {}}, registry=registry)


# ------------------------------------------------------------------------- precision, overflow, empty splits
def run_on(metric: EmbeddingMetrics, embeddings: torch.Tensor) -> dict[str, float]:
    metric.setup()
    for ids in ([0, 3], [1, 4], [2]):
        metric.update(embeddings[ids], torch.tensor(ids))
    return flatten_metrics(metric.compute_metrics())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_embeddings_give_their_float32_metrics(registry: Registry, dtype: torch.dtype) -> None:
    """The line scaled by 300 (distances up to 1290, squared 1.7e6: beyond float16's 65504): the ranks, so the
    hand-computed metrics, are those of the line."""
    half = (embeddings_2d() * 300).to(dtype)
    metric = make_metric(registry, dataset=LineDataset(), fmr_vals=(0.2,))
    metrics = run_on(metric, half)
    assert metric.embeddings.dtype == dtype  # kept as given; the distances are computed in float32
    assert metrics == run_on(make_metric(registry, dataset=LineDataset(), fmr_vals=(0.2,)), half.float())
    assert metrics["OVERALL/cmc/1"] == pytest.approx(mean(CMC_1))
    assert metrics["OVERALL/precision/3"] == pytest.approx(mean(PRECISION_3))
    assert metrics["OVERALL/map/4"] == pytest.approx(mean(MAP_4))
    expected = [[1, 2, 3, 4], [2, 0, 3, 4], [1, 0, 3, 4], [4, 2, 1, 0], [3, 2, 1, 0]]
    assert [r.tolist() for r in metric.retrieval_results.retrieved_ids] == expected
    # from item 0 (at 0): the coordinates of items 1..4, as the dtype holds them (1290 is 1288 in bfloat16)
    assert metric.retrieval_results.distances[0].tolist() == half[1:, 0].float().tolist()


def test_embeddings_too_large_for_float32_are_an_error_naming_the_rows(registry: Registry) -> None:
    embeddings = embeddings_2d() * 1e19  # squared distances up to 1.8e39: beyond float32's 3.4e38
    with pytest.raises(
        NonFiniteDistanceError,
        match=r"the l2 distance between query 0 \(row 0 of embeddings\) and gallery item 3 \(row 3 of embeddings\) "
        r"is not finite in float32",
    ):
        run_on(make_metric(registry, dataset=LineDataset()), embeddings)
    embeddings = embeddings_2d()
    embeddings[2, 1] = float("inf")
    with pytest.raises(ValueError, match="embeddings must be finite, row 2 is not"):
        run_on(make_metric(registry, dataset=LineDataset()), embeddings)


class SplitLineDataset(LineDataset):
    """The line with other labels and query / gallery flags."""

    def __init__(self, labels: list[str], is_query: list[bool], is_gallery: list[bool]) -> None:
        super().__init__(with_categories=False)
        self.df["label"] = labels
        self.is_query, self.is_gallery = torch.tensor(is_query), torch.tensor(is_gallery)

    def get_query_ids(self) -> LongTensor:
        return self.is_query.nonzero().squeeze(1)

    def get_gallery_ids(self) -> LongTensor:
        return self.is_gallery.nonzero().squeeze(1)


def test_a_split_without_queries_gallery_or_ground_truth_is_an_error(registry: Registry) -> None:
    everything, nothing = [True] * 5, [False] * 5
    no_queries = make_metric(registry, dataset=SplitLineDataset(LABELS, nothing, everything))
    with pytest.raises(
        ValueError, match=r"^the validation split has no queries \(is_query is False for every row\)$"
    ):
        no_queries.setup()  # before any embedding is collected
    with pytest.raises(ValueError, match="the validation split has no queries"):
        no_queries.update(embeddings_2d(), torch.arange(5))
    no_gallery = make_metric(registry, dataset=SplitLineDataset(LABELS, everything, nothing))
    with pytest.raises(
        ValueError, match=r"^the validation split has no gallery items \(is_gallery is False for every row\)$"
    ):
        no_gallery.setup()
    no_gt = make_metric(registry, dataset=SplitLineDataset(list("ABCDE"), everything, everything))
    with pytest.raises(
        ValueError,
        match=r"^none of the 5 queries in the validation split has a ground truth .*: every retrieval metric "
        "would be undefined$",
    ):
        run(no_gt)
    only_pcf = make_metric(
        registry,
        dataset=SplitLineDataset(list("ABCDE"), everything, everything),
        cmc_top_k=(),
        precision_top_k=(),
        map_top_k=(),
    )
    assert run(only_pcf)["OVERALL"]["pcf"][0.5].item() == pytest.approx(0.5)  # defined without ground truth


def test_queries_without_ground_truth_among_others_follow_the_documented_rule(registry: Registry) -> None:
    """Item 4 alone has label C: a query without ground truth that retrieves something scores 0 (it is
    counted, not an error). By hand: q0 [1, 2, 3, 4] rel [1, 0, 0, 0]; q1 [2, 0, 3, 4] rel [0, 1, 0, 0];
    q2 [1, 0, 3, 4] rel [0, 0, 1, 0]; q3 [4, 2, 1, 0] rel [0, 1, 0, 0]; q4 no ground truth."""
    dataset = SplitLineDataset(["A", "A", "B", "B", "C"], [True] * 5, [True] * 5)
    metric = make_metric(registry, dataset=dataset, cmc_top_k=(1, 3))
    overall = run(metric)["OVERALL"]
    assert metric.retrieval_results.n_gts == [1, 1, 1, 1, 0]
    torch.testing.assert_close(metric.metrics_unreduced["OVERALL"]["cmc"][3], torch.tensor([1.0, 1, 1, 1, 0]))
    assert overall["cmc"][1].item() == pytest.approx(1 / 5)
    assert overall["cmc"][3].item() == pytest.approx(4 / 5)


def test_calc_retrieval_metrics_rr_refuses_results_where_every_metric_is_undefined(
    registry: Registry,
) -> None:
    with pytest.raises(ValueError, match="^there are no queries in these retrieval results"):
        calc_retrieval_metrics_rr(RetrievalResults([], [], []), registry=registry)
    no_gt = RetrievalResults(
        [torch.tensor([0.1]), torch.tensor([])],
        [LongTensor([0]), LongTensor([])],
        [LongTensor([]), LongTensor([])],
    )
    with pytest.raises(
        ValueError, match="^none of the 2 queries in these retrieval results has a ground truth"
    ):
        calc_retrieval_metrics_rr(no_gt, registry=registry)
    # one query with ground truth: the other (none, nothing retrieved) is a perfect answer, as documented
    one_gt = RetrievalResults(no_gt.distances, no_gt.retrieved_ids, [LongTensor([0]), LongTensor([])])
    metrics = calc_retrieval_metrics_rr(
        one_gt, cmc_top_k=(1,), precision_top_k=(1,), map_top_k=(1,), registry=registry, verbose=False
    )
    assert [metrics[name][1].item() for name in ("cmc", "precision", "map")] == [1.0, 1.0, 1.0]


def test_calc_retrieval_metrics_rr(registry: Registry) -> None:
    rr = RetrievalResults.from_embeddings(embeddings_2d(), LineDataset(), n_items=3)
    metrics = calc_retrieval_metrics_rr(
        rr, cmc_top_k=(1,), precision_top_k=(3,), map_top_k=(3,), registry=registry
    )
    assert metrics["precision"][3].item() == pytest.approx(mean(PRECISION_3))
    by_category = calc_retrieval_metrics_rr(
        rr, query_categories=CATEGORIES, map_top_k=(3,), reduce=False, registry=registry
    )
    torch.testing.assert_close(by_category["y"]["map"][3], torch.tensor(MAP_3[2:], dtype=torch.float32))
    unlabeled = RetrievalResults(rr.distances, rr.retrieved_ids)
    with pytest.raises(ValueError, match="ground truth"):
        calc_retrieval_metrics_rr(unlabeled, registry=registry)


def test_flatten_metrics_requires_reduced_values() -> None:
    assert flatten_metrics({"OVERALL": {"cmc": {1: torch.tensor(0.25)}, "pcf": {0.5: 0.5}}}) == {
        "OVERALL/cmc/1": 0.25,
        "OVERALL/pcf/0.5": 0.5,
    }
    with pytest.raises(ValueError, match="reduce"):
        flatten_metrics({"OVERALL": {"cmc": {1: torch.tensor([1.0, 0.0])}}})


# ------------------------------------------------------------------ post-processing, fnmr@fmr, worst queries
def test_postprocessor_is_applied_before_the_metrics(registry: Registry) -> None:
    from oml_core.retrieval.postprocessors import ConstantThresholding

    # distances < 1.05 kept: q0 [1] | q1 [2 (0.6), 0 (1.0)] | q2 [1 (0.6)] | q3 [4 (0.3)] | q4 [3 (0.3)]
    metric = make_metric(
        registry, dataset=LineDataset(with_categories=False), postprocessor=ConstantThresholding(th=1.05)
    )
    metrics = run(metric)
    assert [r.tolist() for r in metric.retrieval_results.retrieved_ids] == [[1], [2, 0], [1], [4], [3]]
    torch.testing.assert_close(
        metric.metrics_unreduced["OVERALL"]["cmc"][3], torch.tensor([1.0, 1.0, 0.0, 0.0, 0.0])
    )
    assert metrics["OVERALL"]["cmc"][3].item() == pytest.approx(0.4)


def test_fnmr_at_fmr_over_all_pairs_by_hand(registry: Registry) -> None:
    # ordered (query, gallery) pairs without self-pairs; labels A = {0, 1, 4}, B = {2, 3}
    # positive: 1, 1, 2.4, 2.4, 3.3, 3.3, 4.3, 4.3
    # negative: 0.3, 0.3, 0.6, 0.6, 1.6, 1.6, 2.7, 2.7, 3, 3, 4, 4
    # fmr 0.1 -> threshold 0.3 + 0.1 * 0.3 = 0.33 -> fnmr 8/8; fmr 0.5 -> 2.15 -> 6/8; fmr 1 -> 4 -> 2/8
    metric = make_metric(registry, dataset=LineDataset(with_categories=True), fmr_vals=(0.1, 0.5, 1.0))
    metrics = run(metric)
    fnmr = {fmr: value.item() for fmr, value in metrics["OVERALL"]["fnmr@fmr"].items()}
    assert fnmr == pytest.approx({0.1: 1.0, 0.5: 0.75, 1.0: 0.25})
    assert "fnmr@fmr" not in metrics["x"]  # under OVERALL only, as OML
    per_category = make_metric(
        registry, dataset=LineDataset(with_categories=True), fmr_vals=(0.5,), fnmr_per_category=True
    )
    # category x: queries 0, 1; positive 1, 1, 3.3, 4.3; negative 0.6, 1.6, 3, 4 -> fmr 0.5: 2.3 -> 2/4
    assert run(per_category)["x"]["fnmr@fmr"][0.5].item() == pytest.approx(0.5)


def test_worst_queries_overall_and_per_category(registry: Registry) -> None:
    metric = make_metric(registry, dataset=LineDataset(with_categories=True))
    run(metric)
    assert metric.get_worst_queries_ids("OVERALL/cmc/1", n_queries=3) == [1, 2, 3]  # cmc@1 [1, 0, 0, 0, 0]
    # category y holds the queries 2, 3, 4 with map@3 = 1/3, 1/2, 1/3
    assert metric.get_worst_queries_ids("y/map/3", n_queries=10) == [2, 4, 3]
    with pytest.raises(KeyError, match="Did you mean 'OVERALL/map/3'"):
        metric.get_worst_queries_ids("OVERALL/map/33", n_queries=1)
    with pytest.raises(ValueError, match="no per-query values"):
        metric.get_worst_queries_ids("OVERALL/pcf/0.5", n_queries=1)


def test_metrics_not_computed_yet(registry: Registry) -> None:
    metric = make_metric(registry, dataset=LineDataset())
    with pytest.raises(ValueError, match="call compute_metrics"):
        metric.visualize()


def test_bad_fmr_vals_and_distance(registry: Registry) -> None:
    with pytest.raises(ValueError, match=r"fmr_vals .* \[0, 1\]"):
        make_metric(registry, dataset=LineDataset(), fmr_vals=(10,))
    with pytest.raises(ValueError, match="Unknown distance 'manhattan'"):
        make_metric(registry, dataset=LineDataset(), distance="manhattan")


def test_visualize_draws_the_worst_queries_of_every_per_query_metric(tmp_path, registry: Registry) -> None:
    import matplotlib.pyplot as plt
    import pandas as pd

    from oml_core.datasets import ImageQueryGalleryLabeledDataset, generate_mock_dataset

    generate_mock_dataset(tmp_path, seed=0)
    df = pd.read_csv(tmp_path / "df.csv")
    df = df[df["split"] == "validation"].reset_index(drop=True)
    dataset = ImageQueryGalleryLabeledDataset(df, dataset_root=tmp_path)
    embeddings = torch.randn(len(dataset), 8, generator=torch.Generator().manual_seed(0))
    metric = EmbeddingMetrics(
        dataset,
        cmc_top_k=(1, 5),
        fmr_vals=(0.1,),
        registry=registry,
        verbose=False,
        metrics_to_exclude_from_visualization=("precision",),
    )
    metric.setup()
    metric.update(embeddings, torch.arange(len(dataset)))
    metric.compute_metrics()
    figures, titles = metric.visualize()
    assert titles == [
        "top 5 worst by OVERALL_cmc_1",
        "top 5 worst by OVERALL_cmc_5",
        "top 5 worst by OVERALL_map_5",
    ]
    # a row per query: the query, 5 retrieved items and 2 ground truths
    assert [len(figure.axes) for figure in figures] == [5 * (1 + 5 + 2)] * 3
    plt.close("all")


def test_ddp_sync_gathers_every_process(tmp_path) -> None:
    """Two gloo processes each collect half of the items; after sync both compute the single-process metrics."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).parent / "scripts" / "ddp_embedding_metrics.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]

    import importlib.util

    spec = importlib.util.spec_from_file_location("ddp_embedding_metrics", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    single = EmbeddingMetrics(
        module.RandomDataset(), cmc_top_k=(1, 3), map_top_k=(3,), fmr_vals=(0.2,), verbose=False
    )
    single.setup()
    single.update(module.embeddings(), torch.arange(module.N_ITEMS))
    expected = flatten_metrics(single.compute_metrics())
    for rank in (0, 1):
        assert json.loads((tmp_path / f"rank{rank}.json").read_text()) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("dataset_args", "metric_args"),
    [
        ({"with_categories": True}, {}),
        ({"with_categories": True}, {"return_only_overall_category": True}),
        (
            {"with_categories": False, "label2category": {"A": "cat_a", "B": "cat_b"}},
            {"fmr_vals": (0.1, 0.5)},
        ),
        ({"with_categories": False}, {"recall_top_k": (2,), "pcf_variance": ()}),
    ],
)
def test_metric_keys_are_the_keys_compute_metrics_returns(registry, dataset_args, metric_args) -> None:
    metric = make_metric(registry, dataset=LineDataset(**dataset_args), **metric_args)
    keys = metric.metric_keys()  # before anything is collected
    assert sorted(keys) == sorted(flatten_metrics(run(metric)))
    assert "OVERALL/cmc/3" in keys and "OVERALL/map/4" in keys


def test_metric_keys_by_hand(registry) -> None:
    metric = EmbeddingMetrics(
        LineDataset(), cmc_top_k=(1,), precision_top_k=(), map_top_k=(5,), fmr_vals=(0.1,), registry=registry
    )
    overall = ["OVERALL/cmc/1", "OVERALL/map/5", "OVERALL/fnmr@fmr/0.1", "OVERALL/pcf/0.5"]
    categories = [f"{group}/{name}" for group in ("x", "y") for name in ("cmc/1", "map/5", "pcf/0.5")]
    assert metric.metric_keys() == overall + categories  # fnmr@fmr under OVERALL only, as OML
    metric.fnmr_per_category = True
    assert metric.metric_keys() == [
        f"{group}/{name}"
        for group in ("OVERALL", "x", "y")
        for name in ("cmc/1", "map/5", "fnmr@fmr/0.1", "pcf/0.5")
    ]
