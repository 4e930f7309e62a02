"""``PairwiseReranker`` on retrieval results: identity, oracle, invariants, edge cases, errors, metrics."""

from __future__ import annotations

import pytest
import torch
from oml_models import LinearTrivialDistanceSiamese
from oml_postprocessors import PairwiseReranker
from torch import nn

from oml_core.metrics import EmbeddingMetrics, calc_retrieval_metrics_rr
from oml_core.retrieval import RetrievalResults

EPS32 = 1000 * torch.finfo(torch.float32).eps
TOP_K = (1, 2, 3, 5, 7, 10)


def metrics_of(rr: RetrievalResults) -> dict:
    return calc_retrieval_metrics_rr(
        rr, cmc_top_k=TOP_K, precision_top_k=TOP_K, map_top_k=TOP_K, reduce=False, verbose=False
    )


def reranker(model: nn.Module, top_n: int = 5, batch_size: int = 7, **kwargs) -> PairwiseReranker:
    return PairwiseReranker(top_n=top_n, pairwise_model=model, num_workers=0, batch_size=batch_size, **kwargs)


def test_l2_model_leaves_the_ranking_and_every_metric_unchanged(embeddings_dataset) -> None:
    dataset = embeddings_dataset()
    rr = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=10)
    model = LinearTrivialDistanceSiamese(feat_dim=8, identity_init=True)
    rr_upd = reranker(model).process(rr, dataset)
    for before, after in zip(rr.retrieved_ids, rr_upd.retrieved_ids):
        assert torch.equal(before, after)
    assert torch.allclose(rr_upd.distances.values, rr.distances.values, atol=1e-5, rtol=0)
    before, after = metrics_of(rr), metrics_of(rr_upd)
    for name in ("cmc", "precision", "map"):
        for k in TOP_K:
            assert torch.equal(before[name][k], after[name][k]), (name, k)


def test_oracle_makes_the_top_n_perfect(embeddings_dataset, oracle, naive) -> None:
    dataset = embeddings_dataset(n_labels=6, per_label=4, seed=1)
    rr = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=10)
    top_n = 5
    rr_upd = reranker(oracle, top_n=top_n).process(rr, dataset)
    labels = dataset.labels
    gallery = dataset.get_gallery_ids()
    n_fixed = 0
    for q, (d, ids) in enumerate(zip(rr.distances, rr.retrieved_ids)):
        scores = [float(labels[gallery[j]] != labels[q]) for j in ids[:top_n].tolist()]
        exp_d, exp_ids = naive(d.tolist(), ids.tolist(), scores, top_n, EPS32)
        assert rr_upd.retrieved_ids[q].tolist() == exp_ids
        assert rr_upd.distances[q].tolist() == pytest.approx(exp_d, abs=1e-6)
        has_relevant = 0.0 in scores
        n_fixed += has_relevant and scores[0] != 0.0
        first_is_relevant = labels[gallery[rr_upd.retrieved_ids[q][0]]] == labels[q]
        assert first_is_relevant == has_relevant
    assert n_fixed > 0  # the embeddings' ranking was broken, the oracle repaired some queries
    cmc1 = metrics_of(rr_upd)["cmc"][1]
    cmc_top_n_before = metrics_of(rr)["cmc"][top_n]
    assert torch.equal(cmc1, cmc_top_n_before)  # cmc@1 after = cmc@top_n before, query by query
    assert float(cmc1.mean()) > float(metrics_of(rr)["cmc"][1].mean())


def test_order_insensitive_metrics_at_k_at_least_top_n_are_unchanged(embeddings_dataset, oracle) -> None:
    dataset = embeddings_dataset(seed=2)
    rr = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=10)
    top_n = 5
    rr_upd = reranker(oracle, top_n=top_n).process(rr, dataset)
    before, after = metrics_of(rr), metrics_of(rr_upd)
    # the first k items are the same set for k >= top_n: cmc@k and precision@k only count them
    for k in (5, 7, 10):
        assert torch.equal(before["cmc"][k], after["cmc"][k])
        assert torch.equal(before["precision"][k], after["precision"][k])
    # map@k depends on the order within the top: it changes (and cannot get worse under the oracle)
    assert not torch.equal(before["map"][5], after["map"][5])
    assert bool((after["map"][5] >= before["map"][5] - 1e-6).all())


def test_items_beyond_top_n_keep_their_order_and_distances(embeddings_dataset, oracle) -> None:
    dataset = embeddings_dataset(seed=3)
    rr = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=10)
    rr_upd = reranker(oracle, top_n=4).process(rr, dataset)
    for q in range(rr.n_queries):
        assert torch.equal(rr_upd.retrieved_ids[q][4:], rr.retrieved_ids[q][4:])
        assert torch.equal(rr_upd.distances[q][4:], rr.distances[q][4:])
        assert sorted(rr_upd.retrieved_ids[q][:4].tolist()) == sorted(rr.retrieved_ids[q][:4].tolist())
        assert bool((rr_upd.distances[q][1:] >= rr_upd.distances[q][:-1]).all())
        assert rr_upd.distances[q][3] < rr_upd.distances[q][4]  # the oracle's 1 was scaled below the rest
    assert rr_upd.gt_ids is rr.gt_ids and torch.equal(rr_upd.n_gallery, rr.n_gallery)


def test_top_n_larger_than_the_retrieved_lists(embeddings_dataset, oracle) -> None:
    dataset = embeddings_dataset(n_labels=3, per_label=3, seed=4)
    rr = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=100)  # all 8 others
    rr_upd = reranker(oracle, top_n=50).process(rr, dataset)
    labels = dataset.labels
    for q in range(rr.n_queries):
        ids = rr.retrieved_ids[q].tolist()
        relevant = [j for j in ids if labels[j] == labels[q]]
        expected = relevant + [j for j in ids if labels[j] != labels[q]]
        assert rr_upd.retrieved_ids[q].tolist() == expected
        assert rr_upd.distances[q].tolist() == [0.0] * 2 + [1.0] * 6  # the scores themselves: no rest
    assert float(metrics_of(rr_upd)["map"][10].mean()) == 1.0


def test_queries_with_few_or_no_items(embeddings_dataset_cls, oracle, snapshot) -> None:
    labels = [0, 0, 1, 1]
    embeddings = torch.tensor([[0.0, 0.0], [0.0, 5.0], [1.0, 0.1], [1.0, 4.0]])
    dataset = embeddings_dataset_cls(embeddings, labels)
    rr = RetrievalResults(
        distances=[
            torch.tensor([0.1, 0.2, 0.3]),
            torch.tensor([]),
            torch.tensor([0.5]),
            torch.tensor([0.2, 0.4]),
        ],
        retrieved_ids=[
            torch.tensor([2, 3, 1]),
            torch.tensor([], dtype=torch.long),
            torch.tensor([0]),
            torch.tensor([1, 2]),
        ],
        gt_ids=[torch.tensor([1]), torch.tensor([0]), torch.tensor([3]), torch.tensor([2])],
    )
    before = snapshot(rr)
    rr_upd = reranker(oracle, top_n=2, batch_size=2).process(rr, dataset)
    assert [row.tolist() for row in rr_upd.retrieved_ids] == [[2, 3, 1], [], [0], [2, 1]]
    # query 0: scores [1, 1] for ids 2, 3 -> stable order kept (2, 3); the max 1 > 0.3 is scaled to 0.3 - eps
    assert rr_upd.distances[0].tolist() == pytest.approx([0.3 - EPS32, 0.3 - EPS32, 0.3], abs=1e-7)
    assert rr_upd.distances[1].numel() == 0
    assert rr_upd.distances[2].tolist() == [1.0]  # a single item, nothing after it: its score
    assert rr_upd.distances[3].tolist() == [0.0, 1.0]
    after = snapshot(rr)
    for b, a in zip(before, after):
        assert all(torch.equal(x, y) for x, y in zip(b, a))


def test_input_results_are_not_modified(embeddings_dataset, oracle, snapshot) -> None:
    dataset = embeddings_dataset(seed=5)
    rr = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=6)
    before = snapshot(rr)
    reranker(oracle).process(rr, dataset)
    for b, a in zip(before, snapshot(rr)):
        assert all(torch.equal(x, y) for x, y in zip(b, a))


def test_batching_and_workers_do_not_change_the_result(embeddings_dataset, oracle) -> None:
    dataset = embeddings_dataset(seed=6)
    rr = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=8)
    reference = reranker(oracle, batch_size=1).process(rr, dataset)
    for kwargs in ({"batch_size": 1000}, {"batch_size": 3, "use_fp16": True}):
        other = reranker(oracle, **kwargs).process(rr, dataset)  # use_fp16 is a no-op on the CPU
        assert torch.equal(other.retrieved_ids.values, reference.retrieved_ids.values)
        assert torch.equal(other.distances.values, reference.distances.values)
    with_workers = PairwiseReranker(5, oracle, num_workers=1, batch_size=16).process(rr, dataset)
    assert torch.equal(with_workers.distances.values, reference.distances.values)


def test_model_runs_in_eval_mode_without_grad_and_its_mode_is_restored(embeddings_dataset, oracle) -> None:
    dataset = embeddings_dataset(n_labels=3, per_label=3)
    rr = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=4)
    oracle.train()
    reranker(oracle, top_n=3, batch_size=10).process(rr, dataset)
    assert [call[:2] for call in oracle.calls] == [(False, False)] * 3  # 9 queries x 3 pairs in 3 batches
    assert [call[2] for call in oracle.calls] == [10, 10, 7]
    assert oracle.training


def test_each_query_item_is_read_once(embeddings_dataset, oracle) -> None:
    dataset = embeddings_dataset(n_labels=4, per_label=3)
    rr = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=5)
    dataset.reads = 0
    reranker(oracle, top_n=4).process(rr, dataset)
    assert dataset.reads == 12 + 12 * 4  # every query once, every retrieved item of its top 4 once


def test_verbose_shows_a_progress_bar(embeddings_dataset, oracle, capsys) -> None:
    dataset = embeddings_dataset(n_labels=2, per_label=2)
    rr = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=3)
    reranker(oracle, top_n=2, verbose=True).process(rr, dataset)
    assert "Pairwise inference" in capsys.readouterr().err
    reranker(oracle, top_n=2).process(rr, dataset)
    assert capsys.readouterr().err == ""


def test_embedding_metrics_with_the_reranker(embeddings_dataset, oracle) -> None:
    dataset = embeddings_dataset(n_labels=5, per_label=4, seed=7)
    top_n = 4
    postprocessor = reranker(oracle, top_n=top_n)
    calc = EmbeddingMetrics(
        dataset,
        cmc_top_k=(1,),
        precision_top_k=(4,),
        map_top_k=(4,),
        pcf_variance=(),
        postprocessor=postprocessor,
        verbose=False,
    )
    calc.setup()
    calc.update(dataset.embeddings, torch.arange(len(dataset)))
    metrics = calc.compute_metrics()["OVERALL"]
    assert calc.retrieval_results.n_retrieved_items == top_n  # retrieved at least top_n items
    # cmc@1 after re-ranking = the share of queries with a same-label item among their 4 nearest others
    dist = torch.cdist(dataset.embeddings, dataset.embeddings).fill_diagonal_(float("inf"))
    nearest = dist.topk(top_n, largest=False).indices
    labels = torch.as_tensor(dataset.labels)
    expected_cmc1 = (labels[nearest] == labels[:, None]).any(dim=1).float().mean()
    assert float(metrics["cmc"][1]) == pytest.approx(float(expected_cmc1))
    plain = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=top_n)
    expected_map = calc_retrieval_metrics_rr(
        postprocessor.process(plain, dataset), cmc_top_k=(), precision_top_k=(), map_top_k=(4,), verbose=False
    )["map"][4]
    assert float(metrics["map"][4]) == pytest.approx(float(expected_map))
    assert float(metrics["cmc"][1]) > float(metrics_of(plain)["cmc"][1].mean())


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"top_n": 0}, ValueError, "top_n must be an int >= 2, got 0"),
        ({"top_n": 1}, ValueError, "top_n must be an int >= 2, got 1"),
        ({"top_n": True}, ValueError, "top_n must be an int >= 2"),
        ({"top_n": 2.5}, ValueError, "top_n must be an int >= 2"),
        (
            {"pairwise_model": nn.Linear(2, 1)},
            TypeError,
            "pairwise_model must be an instance of .*IPairwiseModel, got Linear",
        ),
        ({"num_workers": -1}, ValueError, "num_workers must be an int >= 0"),
        ({"batch_size": 0}, ValueError, "batch_size must be an int >= 1"),
        ({"verbose": "yes"}, TypeError, "verbose must be a bool"),
        ({"use_fp16": 1}, TypeError, "use_fp16 must be a bool"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, match, oracle) -> None:
    args = {"top_n": 3, "pairwise_model": oracle, "num_workers": 0, "batch_size": 4, **kwargs}
    with pytest.raises(error, match=match):
        PairwiseReranker(**args)


def test_bad_process_inputs_are_named(embeddings_dataset, oracle) -> None:
    dataset = embeddings_dataset(n_labels=2, per_label=2)
    rr = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=3)
    with pytest.raises(ValueError, match="needs the dataset"):
        reranker(oracle, top_n=2).process(rr)
    with pytest.raises(ValueError, match="the retrieval results have 2 queries but EmbeddingsDataset has 4"):
        reranker(oracle, top_n=2).process(
            RetrievalResults(list(rr.distances)[:2], list(rr.retrieved_ids)[:2]), dataset
        )
    far = RetrievalResults([torch.tensor([0.1])] * 4, [torch.tensor([9])] * 4)
    with pytest.raises(ValueError, match="gallery position 9 but EmbeddingsDataset has 4 gallery items"):
        reranker(oracle, top_n=2).process(far, dataset)


def test_a_model_with_a_bad_output_is_reported(embeddings_dataset) -> None:
    class TwoScores(LinearTrivialDistanceSiamese):
        def predict(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
            return torch.zeros(len(x1), 2)

    class NaNScores(LinearTrivialDistanceSiamese):
        def predict(self, x1: torch.Tensor, x2: torch.Tensor) -> torch.Tensor:
            return torch.full((len(x1),), float("nan"))

    dataset = embeddings_dataset(n_labels=2, per_label=2)
    rr = RetrievalResults.from_embeddings(dataset.embeddings, dataset, n_items=3)
    with pytest.raises(
        ValueError, match=r"TwoScores.predict must return one score per pair, got the shape \(4, 2\)"
    ):
        reranker(TwoScores(8, True), top_n=2, batch_size=4).process(rr, dataset)
    with pytest.raises(ValueError, match="non-finite scores"):
        reranker(NaNScores(8, True), top_n=2).process(rr, dataset)


def test_repr_and_top_n_property(oracle) -> None:
    postprocessor = reranker(oracle, top_n=3)
    assert postprocessor.top_n == 3
    assert repr(postprocessor) == (
        "PairwiseReranker(top_n=3, pairwise_model=OracleSiamese, num_workers=0, batch_size=7, verbose=False, "
        "use_fp16=False)"
    )
