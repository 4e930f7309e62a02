"""Retrieval and topological metrics on ragged inputs: the seed's worked examples verbatim, the edge cases,
and a comparison with a naive per-query implementation on random data."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch
from torch import BoolTensor, LongTensor

import oml_core.functional.metrics as fm
import oml_core.utils.pca as pca_module
from oml_core import hookimpl
from oml_core.functional.metric_adapters import map_at_k_tf
from oml_core.functional.metrics import (
    RetrievedIdsNotUniqueError,
    calc_cmc,
    calc_gt_tops,
    calc_map,
    calc_pcf,
    calc_precision,
    calc_retrieval_metrics,
    calc_topological_metrics,
    pad_ragged,
    reduce_metrics,
    take_unreduced_metrics_by_mask,
)
from oml_core.functional.ranking_metrics import calc_recall
from oml_core.registry import Registry, UnknownNameError
from oml_core.utils.pca import explained_variances


def assert_exact(actual: list[torch.Tensor], expected: list[torch.Tensor]) -> None:
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, e, rtol=0, atol=0)


@pytest.fixture(scope="module")
def builtin_registry() -> Registry:
    return Registry(load_entrypoints=False)


# ------------------------------------------------------------------------------ the seed's examples
def test_seed_example_cmc() -> None:
    gt_tops = [BoolTensor([1, 0]), BoolTensor([0, 1, 1]), BoolTensor([0, 0]), BoolTensor([])]
    n_gts = [2, 2, 1, 0]
    assert_exact(
        calc_cmc(gt_tops, n_gts, top_k=(1, 2)),
        [torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.tensor([1.0, 1.0, 0.0, 1.0])],
    )


def test_seed_example_precision() -> None:
    gt_tops = [BoolTensor([1, 0]), BoolTensor([0, 1, 1]), BoolTensor([0, 0]), BoolTensor([])]
    n_gts = [2, 3, 5, 2]
    assert_exact(
        calc_precision(gt_tops, n_gts, top_k=(1, 2)),
        [torch.tensor([1.0, 0.0, 0.0, 0.0]), torch.tensor([0.5, 0.5, 0.0, 0.0])],
    )


def test_seed_example_map() -> None:
    gt_tops = [BoolTensor([1, 0]), BoolTensor([0, 1]), BoolTensor([0, 0, 0, 0]), BoolTensor([])]
    n_gts = [1, 1, 2, 0]
    assert_exact(
        calc_map(gt_tops, n_gts, top_k=(1, 2)),
        [torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.tensor([1.0, 0.5, 0.0, 1.0])],
    )


def test_seed_example_pcf() -> None:
    embeddings = torch.eye(4, 10, dtype=torch.float)
    result = calc_pcf(embeddings, pcf_variance=(0.5, 1))
    torch.testing.assert_close(result, torch.tensor([0.2, 0.5]), rtol=0, atol=0)


def test_seed_precision_definition_example() -> None:
    # n = 3, g = [1, 1, 1, 0, 0]: OML's precision@1..6 are all 1 (k = 6 is clipped to the 5 retrieved items)
    values = calc_precision([BoolTensor([1, 1, 1, 0, 0])], [3], top_k=(1, 2, 3, 4, 5, 6))
    assert [v.item() for v in values] == [1.0] * 6


# ------------------------------------------------------------------------------------- edge cases
def test_no_gt_and_nothing_retrieved_is_perfect() -> None:
    for fn in (calc_cmc, calc_precision, calc_map):
        assert [v.item() for v in fn([BoolTensor([])], [0], top_k=(1, 5))] == [1.0, 1.0]


def test_gt_but_nothing_retrieved_is_zero() -> None:
    for fn in (calc_cmc, calc_precision, calc_map):
        assert [v.item() for v in fn([BoolTensor([])], [3], top_k=(1, 5))] == [0.0, 0.0]


def test_no_gt_but_items_retrieved_is_zero_not_nan() -> None:
    for fn in (calc_cmc, calc_precision, calc_map):
        assert [v.item() for v in fn([BoolTensor([0, 0, 0])], [0], top_k=(1, 5))] == [0.0, 0.0]


def test_k_is_clipped_to_the_retrieved_items_per_query() -> None:
    # 2 retrieved items, both relevant, 10 relevant in the gallery: precision@5 = 2 / min(10, min(5, 2)) = 1
    gt_tops, n_gts = [BoolTensor([1, 1]), BoolTensor([0, 1, 0, 0, 0, 0, 0])], [10, 10]
    assert calc_precision(gt_tops, n_gts, top_k=(5,))[0].tolist() == pytest.approx([1.0, 0.2])
    assert calc_cmc(gt_tops, n_gts, top_k=(5,))[0].tolist() == [1.0, 1.0]
    assert calc_map(gt_tops, n_gts, top_k=(5,))[0].tolist() == [1.0, 0.5]


def test_map_denominator_is_number_of_hits_in_top_k() -> None:
    # rel = [1, 0, 1, 0, 1]: map@5 = (1/1 + 2/3 + 3/5) / 3
    value = calc_map([BoolTensor([1, 0, 1, 0, 1])], [100], top_k=(5,))[0].item()
    assert value == pytest.approx((1 + 2 / 3 + 3 / 5) / 3, abs=1e-7)


def test_no_queries() -> None:
    assert [v.shape for v in calc_cmc([], [], top_k=(1, 2))] == [(0,), (0,)]


@pytest.mark.parametrize("top_k", [(), (0,), (1, -2), (1.5,), (True,), 5])
def test_bad_top_k(top_k: object) -> None:
    with pytest.raises(ValueError, match="top_k"):
        calc_cmc([BoolTensor([1])], [1], top_k=top_k)  # type: ignore[arg-type]


def test_mismatched_n_gts() -> None:
    with pytest.raises(ValueError, match="one entry per query"):
        calc_map([BoolTensor([1])], [1, 2], top_k=(1,))


# ------------------------------------------------------------------------- naive reference on random data
def naive_metrics(gt_tops: list[list[bool]], n_gts: list[int], k: int) -> tuple[list[float], ...]:
    cmc, precision, map_ = [], [], []
    for tops, n_gt in zip(gt_tops, n_gts):
        if not tops and n_gt == 0:
            cmc.append(1.0), precision.append(1.0), map_.append(1.0)
            continue
        kk = min(k, len(tops))
        hits = sum(tops[:kk])
        cmc.append(1.0 if hits > 0 else 0.0)
        denominator = min(n_gt, kk)
        precision.append(hits / denominator if denominator > 0 else 0.0)
        total, seen = 0.0, 0
        for i in range(kk):
            if tops[i]:
                seen += 1
                total += seen / (i + 1)
        map_.append(total / seen if seen else 0.0)
    return cmc, precision, map_


def random_tops(rng: random.Random, n_queries: int) -> tuple[list[list[bool]], list[int]]:
    gt_tops, n_gts = [], []
    for _ in range(n_queries):
        length = rng.choice([0, 0, 1, 2, 3, 5, 8, 13])
        tops = [rng.random() < 0.4 for _ in range(length)]
        gt_tops.append(tops)
        n_gts.append(sum(tops) + rng.choice([0, 0, 1, 4]))
    return gt_tops, n_gts


@pytest.mark.parametrize("chunk_size", [1, 3, 64, 10_000])
def test_matches_naive_implementation(monkeypatch: pytest.MonkeyPatch, chunk_size: int) -> None:
    monkeypatch.setattr(fm, "METRICS_CHUNK_SIZE", chunk_size)
    rng = random.Random(chunk_size)
    gt_tops, n_gts = random_tops(rng, 200)
    tensors = [torch.tensor(t, dtype=torch.bool) for t in gt_tops]
    top_k = (1, 2, 3, 5, 10, 20)
    cmc = calc_cmc(tensors, n_gts, top_k)
    precision = calc_precision(tensors, n_gts, top_k)
    map_ = calc_map(tensors, n_gts, top_k)
    for i, k in enumerate(top_k):
        expected = naive_metrics(gt_tops, n_gts, k)
        for actual, reference in zip((cmc[i], precision[i], map_[i]), expected):
            torch.testing.assert_close(actual, torch.tensor(reference, dtype=torch.float32))


def test_pad_ragged() -> None:
    padded, lengths = pad_ragged([LongTensor([1, 2, 3]), LongTensor([]), LongTensor([4])], max_len=2, fill=-1)
    assert padded.tolist() == [[1, 2], [-1, -1], [4, -1]]
    assert lengths.tolist() == [3, 0, 1]
    with pytest.raises(ValueError, match="element 1"):
        pad_ragged([LongTensor([1]), torch.tensor(5)])


@pytest.mark.parametrize("chunk_size", [1, 2, 1000])
def test_calc_gt_tops_matches_isin(monkeypatch: pytest.MonkeyPatch, chunk_size: int) -> None:
    monkeypatch.setattr(fm, "METRICS_CHUNK_SIZE", chunk_size)
    gen = torch.Generator().manual_seed(0)
    retrieved = [
        torch.randperm(30, generator=gen)[: int(n)] for n in torch.randint(0, 12, (50,), generator=gen)
    ]
    gts = [torch.randperm(30, generator=gen)[: int(n)] for n in torch.randint(0, 8, (50,), generator=gen)]
    tops = calc_gt_tops(retrieved, gts)
    assert [t.tolist() for t in tops] == [torch.isin(r, g).tolist() for r, g in zip(retrieved, gts)]
    truncated = calc_gt_tops(retrieved, gts, max_k=3)
    assert [t.tolist() for t in truncated] == [torch.isin(r[:3], g).tolist() for r, g in zip(retrieved, gts)]


# ------------------------------------------------------------------------------- calc_retrieval_metrics
RETRIEVED = [LongTensor([0, 1, 2]), LongTensor([3, 2, 1]), LongTensor([]), LongTensor([4, 0])]
GT = [LongTensor([1]), LongTensor([3, 1]), LongTensor([]), LongTensor([2])]


def test_calc_retrieval_metrics_unreduced(builtin_registry: Registry) -> None:
    metrics = calc_retrieval_metrics(
        RETRIEVED,
        GT,
        cmc_top_k=(1, 2),
        precision_top_k=(2,),
        map_top_k=(3,),
        reduce=False,
        registry=builtin_registry,
    )
    assert list(metrics) == ["cmc", "precision", "map"]
    assert metrics["cmc"][1].tolist() == [0.0, 1.0, 1.0, 0.0]
    assert metrics["cmc"][2].tolist() == [1.0, 1.0, 1.0, 0.0]
    assert metrics["precision"][2].tolist() == [1.0, 0.5, 1.0, 0.0]
    torch.testing.assert_close(metrics["map"][3], torch.tensor([0.5, (1 + 2 / 3) / 2, 1.0, 0.0]))


def test_calc_retrieval_metrics_reduced(builtin_registry: Registry) -> None:
    metrics = calc_retrieval_metrics(
        RETRIEVED,
        GT,
        cmc_top_k=(1,),
        precision_top_k=(),
        map_top_k=(),
        verbose=False,
        registry=builtin_registry,
    )
    assert list(metrics) == ["cmc"]
    assert metrics["cmc"][1].ndim == 0
    assert metrics["cmc"][1].item() == pytest.approx(0.5)


def test_calc_retrieval_metrics_with_categories(builtin_registry: Registry) -> None:
    metrics = calc_retrieval_metrics(
        RETRIEVED,
        GT,
        query_categories=np.array(["a", "b", "a", "b"]),
        cmc_top_k=(1,),
        precision_top_k=(2,),
        map_top_k=(),
        registry=builtin_registry,
    )
    assert list(metrics) == ["OVERALL", "a", "b"]
    assert metrics["OVERALL"]["cmc"][1].item() == pytest.approx(0.5)
    assert metrics["a"]["cmc"][1].item() == pytest.approx(0.5)  # queries 0 and 2
    assert metrics["b"]["cmc"][1].item() == pytest.approx(0.5)  # queries 1 and 3
    assert metrics["a"]["precision"][2].item() == pytest.approx(1.0)
    assert metrics["b"]["precision"][2].item() == pytest.approx(0.25)
    categories = torch.tensor([1, 1, 2, 2])
    unreduced = calc_retrieval_metrics(
        RETRIEVED, GT, query_categories=categories, cmc_top_k=(1,), reduce=False, registry=builtin_registry
    )
    assert list(unreduced) == ["OVERALL", 1, 2]
    assert type(list(unreduced)[1]) is int
    assert unreduced[2]["cmc"][1].tolist() == [1.0, 0.0]


class HitsPlugin:
    @hookimpl
    def oml_register_retrieval_metrics(self, register):
        register("hits", hits)


def hits(gt_tops, n_gts, top_k):
    return [torch.tensor([float(t[:k].sum()) for t in gt_tops]) for k in top_k]


def test_plugin_metric_is_computed_by_name() -> None:
    registry = Registry([HitsPlugin()], load_entrypoints=False)
    metrics = calc_retrieval_metrics(
        RETRIEVED,
        GT,
        cmc_top_k=(1,),
        precision_top_k=(),
        map_top_k=(),
        hits_top_k=(1, 3),
        reduce=False,
        registry=registry,
    )
    assert list(metrics) == ["cmc", "hits"]
    assert metrics["hits"][1].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert metrics["hits"][3].tolist() == [1.0, 2.0, 0.0, 0.0]


def test_unknown_metric_raises_the_registry_error(builtin_registry: Registry) -> None:
    with pytest.raises(UnknownNameError, match="hitz"):
        calc_retrieval_metrics(RETRIEVED, GT, hitz_top_k=(1,), registry=builtin_registry)


def test_bad_keyword_argument(builtin_registry: Registry) -> None:
    with pytest.raises(TypeError, match="fmr_vals"):
        calc_retrieval_metrics(RETRIEVED, GT, fmr_vals=(0.1,), registry=builtin_registry)  # type: ignore[arg-type]


def test_nothing_requested_and_mismatched_inputs(builtin_registry: Registry) -> None:
    with pytest.raises(ValueError, match="at least 1 metric"):
        calc_retrieval_metrics(
            RETRIEVED, GT, cmc_top_k=(), precision_top_k=(), map_top_k=(), registry=builtin_registry
        )
    with pytest.raises(ValueError, match="one entry per query"):
        calc_retrieval_metrics(RETRIEVED, GT[:2], registry=builtin_registry)
    with pytest.raises(ValueError, match="query_categories"):
        calc_retrieval_metrics(RETRIEVED, GT, query_categories=[1, 2], registry=builtin_registry)


def test_default_registry_is_used_when_none_given() -> None:
    metrics = calc_retrieval_metrics(
        RETRIEVED, GT, cmc_top_k=(1,), precision_top_k=(), map_top_k=(), verbose=False
    )
    assert metrics["cmc"][1].item() == pytest.approx(0.5)


def test_reduce_and_mask_helpers() -> None:
    metrics = {"cmc": {1: torch.tensor([1.0, 0.0, 1.0])}, "pcf": {0.5: torch.tensor(0.2)}, "n": 3}
    reduced = reduce_metrics(metrics)
    assert reduced["cmc"][1].item() == pytest.approx(2 / 3)
    assert reduced["pcf"][0.5].item() == pytest.approx(0.2)
    assert reduced["n"] == 3
    masked = take_unreduced_metrics_by_mask(metrics, np.array([True, False, True]))
    assert masked["cmc"][1].tolist() == [1.0, 1.0]
    assert masked["pcf"][0.5].item() == pytest.approx(0.2)


# ------------------------------------------------------------------------------------------ pcf
def reference_pcf(x: np.ndarray, variances: tuple[float, ...]) -> list[float]:
    """SVD of the centred data; the largest p such that sum of the first p-1 variances <= r, p <= d."""
    centred = x - x.mean(axis=0)
    singular = np.linalg.svd(centred, compute_uv=False)
    ratios = np.cumsum(singular**2) / np.sum(singular**2)
    d = x.shape[1]
    out = []
    for r in variances:
        p = 1
        while p <= len(ratios) and p < d and ratios[p - 1] <= r + 1e-12:
            p += 1
        out.append(p / d)
    return out


@pytest.mark.parametrize("shape", [(50, 8), (6, 20), (200, 3)])
def test_pcf_matches_reference(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(0)
    scales = np.linspace(3.0, 0.1, shape[1])
    x = rng.normal(size=shape) * scales
    variances = (0.1, 0.5, 0.9, 0.99)
    result = calc_pcf(torch.tensor(x, dtype=torch.float32), variances)
    assert result.tolist() == pytest.approx(reference_pcf(x, variances))


def test_pcf_is_at_most_one_and_nan_without_variance() -> None:
    x = torch.randn(100, 4, generator=torch.Generator().manual_seed(1))
    assert calc_pcf(x, (1.0,)).item() == 1.0
    assert math.isnan(calc_pcf(torch.ones(5, 3), (0.5,)).item())
    assert math.isnan(calc_pcf(torch.randn(1, 3), (0.5,)).item())
    with pytest.raises(ValueError, match="pcf_variance"):
        calc_pcf(x, (1.5,))


def scatter_pcf(x: torch.Tensor, fractions: tuple[float, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """The implementation before the Gram matrix, kept as the naive reference: the ``[d, d]`` scatter matrix of
    the centred rows in float64, its eigenvalues descending (the first ``min(n, d)``), and the largest ``p <= d``
    whose ``p - 1`` first eigenvalues explain at most ``r`` of the variance. Returns ``(eigenvalues, pcf)``."""
    xd = x.double()
    centred = xd - xd.sum(dim=0) / len(xd)
    eigenvalues = torch.linalg.eigvalsh(centred.T @ centred).flip(0).clamp(min=0)[: min(x.shape)]
    ratios = (eigenvalues.cumsum(0) / eigenvalues.sum()).clamp(max=1.0)
    d = x.shape[1]
    pcf = torch.tensor([min(int((ratios <= r).sum()) + 1, d) / d for r in fractions])
    return eigenvalues, pcf


def spectrum_data(n: int, d: int, rank: int | None, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """``[n, d]`` rows with a decaying spectrum (column ``j`` scaled by ``(j + 1)^-0.7``), of rank ``rank`` when
    given (a product of ``[n, rank]`` and ``[rank, d]`` factors)."""
    g = torch.Generator().manual_seed(seed)
    scales = torch.arange(1, d + 1, dtype=torch.float64) ** -0.7
    if rank is None:
        x = torch.randn(n, d, generator=g, dtype=torch.float64) * scales
    else:
        x = torch.randn(n, rank, generator=g, dtype=torch.float64) @ torch.randn(
            rank, d, generator=g, dtype=torch.float64
        )
        x = x * scales
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    ("n", "d", "rank"),
    [
        (64, 512, None),  # n < d: the Gram matrix
        (40, 300, None),
        (3, 1000, None),
        (300, 40, None),  # n > d: the scatter matrix
        (64, 64, None),  # n = d
        (7, 7, None),
        (100, 200, 5),  # rank-deficient
        (200, 50, 3),
    ],
)
def test_pcf_equals_the_scatter_matrix_reference(
    n: int, d: int, rank: int | None, dtype: torch.dtype
) -> None:
    x = spectrum_data(n, d, rank, dtype, seed=n + d)
    fractions = (0.1, 0.5, 0.9, 0.99, 1.0)
    eigenvalues, expected = scatter_pcf(x, fractions)
    variances = explained_variances(x)
    assert variances.shape == (min(n, d),)
    torch.testing.assert_close(variances, eigenvalues, rtol=0, atol=1e-9 * float(eigenvalues[0]))
    torch.testing.assert_close(calc_pcf(x, fractions), expected.float(), rtol=0, atol=1e-5)


def test_pcf_gram_matrix_in_column_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    x = spectrum_data(30, 101, None, torch.float32, seed=5)
    whole = explained_variances(x)
    monkeypatch.setattr(pca_module, "GRAM_CHUNK_VALUES", 30 * 7)  # 7 columns at a time, the last 3
    torch.testing.assert_close(explained_variances(x), whole, rtol=0, atol=1e-9 * float(whole[0]))
    assert torch.equal(calc_pcf(x, (0.5, 0.9)), scatter_pcf(x, (0.5, 0.9))[1].float())


def test_topological_metrics() -> None:
    embeddings = torch.eye(4, 10, dtype=torch.float)
    metrics = calc_topological_metrics(embeddings, pcf_variance=(0.5, 1))
    assert list(metrics) == ["pcf"]
    assert metrics["pcf"][0.5].item() == pytest.approx(0.2)
    assert metrics["pcf"][1].item() == pytest.approx(0.5)
    x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [0.0, 0.0], [1.0, 1.0], [3.0, 2.0]])
    by_category = calc_topological_metrics(x, pcf_variance=(0.5,), categories=["a", "a", "a", "b", "b", "b"])
    assert list(by_category) == ["OVERALL", "a", "b"]
    assert by_category["a"]["pcf"][0.5].item() == pytest.approx(0.5)  # one direction of variance out of 2
    assert calc_topological_metrics(x, pcf_variance=()) == {}


# ------------------------------------------------------------- calling convention: context and options
SEEN_CONTEXT: list[dict] = []


def gallery_share(gt_tops, n_gts, top_k, n_gallery):
    return [torch.as_tensor(n_gts, dtype=torch.float) / n_gallery for _ in top_k]


def records_context(gt_tops, n_gts, top_k, **context):
    SEEN_CONTEXT.append(context)
    return [torch.zeros(len(gt_tops)) for _ in top_k]


def takes_no_context(gt_tops, n_gts, top_k):
    return [torch.ones(len(gt_tops)) for _ in top_k]


class ContextPlugin:
    @hookimpl
    def oml_register_retrieval_metrics(self, register):
        register("gallery_share", gallery_share)
        register("records_context", records_context)
        register("takes_no_context", takes_no_context)


def test_context_is_passed_only_to_the_functions_that_accept_it() -> None:
    registry = Registry([ContextPlugin()], load_entrypoints=False)
    requested = {"gallery_share_top_k": (1,), "records_context_top_k": (2,), "takes_no_context_top_k": (3,)}
    SEEN_CONTEXT.clear()
    metrics = calc_retrieval_metrics(
        RETRIEVED, GT, cmc_top_k=(), precision_top_k=(), map_top_k=(), reduce=False, verbose=False,
        registry=registry, n_gallery=[5, 6, 7, 8], **requested,
    )  # fmt: skip
    assert metrics["gallery_share"][1].tolist() == pytest.approx([1 / 5, 2 / 6, 0 / 7, 1 / 8])
    assert metrics["takes_no_context"][3].tolist() == [1.0] * 4
    (context,) = SEEN_CONTEXT
    assert set(context) == {"verbose", "n_gallery"} and context["verbose"] is False
    assert context["n_gallery"].dtype == torch.long and context["n_gallery"].tolist() == [5, 6, 7, 8]

    broadcast = calc_retrieval_metrics(
        RETRIEVED, GT, cmc_top_k=(), precision_top_k=(), map_top_k=(), reduce=False, registry=registry,
        n_gallery=10, gallery_share_top_k=(1,),
    )  # fmt: skip
    assert broadcast["gallery_share"][1].tolist() == pytest.approx([0.1, 0.2, 0.0, 0.1])

    SEEN_CONTEXT.clear()
    calc_retrieval_metrics(RETRIEVED, GT, verbose=True, registry=registry, records_context_top_k=(1,))
    assert SEEN_CONTEXT == [{"verbose": True}]  # no n_gallery given: not passed


@pytest.mark.parametrize("name", ["fallout", "gallery_share"])
def test_a_metric_needing_n_gallery_fails_clearly_without_it(name: str) -> None:
    registry = Registry([ContextPlugin()], load_entrypoints=False)
    with pytest.raises(ValueError, match=f"retrieval metric '{name}' needs n_gallery: pass n_gallery="):
        calc_retrieval_metrics(RETRIEVED, GT, registry=registry, **{f"{name}_top_k": (1,)})


def test_bad_n_gallery(builtin_registry: Registry) -> None:
    with pytest.raises(
        ValueError, match=r"n_gallery must be an int or have one entry per query \(4\), got 3"
    ):
        calc_retrieval_metrics(RETRIEVED, GT, registry=builtin_registry, n_gallery=[5, 5, 5])
    with pytest.raises(ValueError, match="n_gallery must hold integers"):
        calc_retrieval_metrics(RETRIEVED, GT, registry=builtin_registry, n_gallery=[5.0, 5.0, 5.0, 5.0])
    with pytest.raises(ValueError, match="n_gallery of query 1"):
        calc_retrieval_metrics(
            RETRIEVED, GT, registry=builtin_registry, fallout_top_k=(1,), n_gallery=[5, 1, 5, 5]
        )


def test_metric_kwargs_and_nan_aware_reduction(builtin_registry: Registry) -> None:
    # fall-out@2: query 0: 1 false alarm of 5 - 1 negatives, query 1: 1 of 4 - 2, query 2 has no negative
    # (skipped: nan), query 3: 2 of 5 - 1
    common = {"cmc_top_k": (), "precision_top_k": (), "map_top_k": (), "fallout_top_k": (2,)}
    options = {"n_gallery": [5, 4, 0, 5], "metric_kwargs": {"fallout": {"empty_target_action": "skip"}}}
    unreduced = calc_retrieval_metrics(
        RETRIEVED, GT, reduce=False, registry=builtin_registry, **common, **options
    )
    values = unreduced["fallout"][2]
    assert math.isnan(values[2].item()) and values[[0, 1, 3]].tolist() == [0.25, 0.5, 0.5]
    reduced = calc_retrieval_metrics(RETRIEVED, GT, registry=builtin_registry, **common, **options)
    assert reduced["fallout"][2].item() == pytest.approx(1.25 / 3)
    by_default = calc_retrieval_metrics(
        RETRIEVED, GT, registry=builtin_registry, **common, n_gallery=[5, 4, 0, 5]
    )
    assert by_default["fallout"][2].item() == pytest.approx(1.25 / 4)  # "neg": the query counts as 0
    with pytest.raises(
        ValueError, match="metric_kwargs given for metrics that are not requested: \\['ndcg'\\]"
    ):
        calc_retrieval_metrics(RETRIEVED, GT, registry=builtin_registry, metric_kwargs={"ndcg": {}})


def test_reduce_metrics_ignores_nan() -> None:
    reduced = reduce_metrics(
        {"fallout": {1: torch.tensor([1.0, float("nan"), 0.0])}, "x": torch.tensor([math.nan])}
    )
    assert reduced["fallout"][1].item() == pytest.approx(0.5)
    assert math.isnan(reduced["x"].item())


# ------------------------------------------------------------------------------- duplicate ids
def test_duplicate_retrieved_ids_are_refused_naming_the_query(builtin_registry: Registry) -> None:
    # the user's report: precision@3 = 3.0
    with pytest.raises(
        RetrievedIdsNotUniqueError,
        match=r"^Retrieved ids must be unique: query 0 retrieves the id 0 more than once "
        r"\(its retrieved ids: \[0, 0, 0\]\)$",
    ):
        calc_retrieval_metrics(
            [LongTensor([0, 0, 0])], [LongTensor([0])], precision_top_k=(3,), registry=builtin_registry
        )
    # OML raises a RuntimeError("Retrieved ids must be unique."): code catching it still does, and oml's ValueError
    assert issubclass(RetrievedIdsNotUniqueError, RuntimeError) and issubclass(
        RetrievedIdsNotUniqueError, ValueError
    )
    retrieved = [LongTensor([4, 1]), LongTensor([]), LongTensor([9, 7, 5, 7, 9]), LongTensor([3, 3])]
    gt = [LongTensor([1])] * 4
    message = r"query 2 retrieves the id 7 more than once \(its retrieved ids: \[9, 7, 5, 7, 9\]\)"
    with pytest.raises(RetrievedIdsNotUniqueError, match=message):
        calc_retrieval_metrics(retrieved, gt, registry=builtin_registry, reduce=False)
    with pytest.raises(RetrievedIdsNotUniqueError, match=message):
        calc_gt_tops(retrieved, gt)
    long_row = [LongTensor(list(range(12)) + [11])]
    with pytest.raises(
        RetrievedIdsNotUniqueError, match=r"the id 11 more than once \(.*\[0, 1, 2, .*, 9, \.\.\.\]\)"
    ):
        calc_gt_tops(long_row, [LongTensor([0])])


def test_duplicate_retrieved_ids_beyond_the_measured_top_are_not_measured(builtin_registry: Registry) -> None:
    # only the first max(k) = 3 ids enter the metrics, and they are distinct
    metrics = calc_retrieval_metrics(
        [LongTensor([5, 1, 2, 2])],
        [LongTensor([1])],
        cmc_top_k=(1, 3),
        precision_top_k=(3,),
        map_top_k=(),
        registry=builtin_registry,
    )
    assert (metrics["cmc"][1].item(), metrics["cmc"][3].item(), metrics["precision"][3].item()) == (
        0.0,
        1.0,
        1.0,
    )
    with pytest.raises(RetrievedIdsNotUniqueError, match="query 0 retrieves the id 2"):
        calc_gt_tops([LongTensor([5, 1, 2, 2])], [LongTensor([1])])  # every id, without max_k


def test_duplicate_ground_truth_ids_are_refused_naming_the_query(builtin_registry: Registry) -> None:
    # n_gt = len(gt_ids[i]) would count the id 3 twice: precision@5 of a perfect answer would be 0.5
    gt = [LongTensor([0]), LongTensor([3, 1, 3])]
    with pytest.raises(
        ValueError, match=r"^Ground truth ids must be unique: query 1 lists the id 3 more than once$"
    ):
        calc_retrieval_metrics([LongTensor([0]), LongTensor([3, 1])], gt, registry=builtin_registry)


def test_more_relevant_items_than_n_gts_is_refused_naming_the_query() -> None:
    # the relevance-level entry points get gt_tops, not ids: a relevant item retrieved twice shows as more hits
    # than relevant items (precision@3 = 3 / min(3, 1) = 3.0, recall@3 = 3.0)
    gt_tops = [BoolTensor([True, False]), BoolTensor([True, True, True])]
    message = r"^query 1: 3 of its first 3 retrieved items are relevant but n_gts\[1\] = 1 \(is a relevant"
    for metric in (calc_precision, calc_cmc, calc_map, calc_recall):
        with pytest.raises(ValueError, match=message):
            metric(gt_tops, [1, 1], top_k=(3,))
    # TF Similarity's mAP@K: R = 2 examples of the class in the index, 3 matches among the first 3 neighbours
    with pytest.raises(
        ValueError, match=r"query 0: 3 of its first 3 retrieved items are relevant but n_gts\[0\] = 2"
    ):
        map_at_k_tf(torch.tensor([0]), torch.tensor([[True, True, True]]), r={0: 2}, k=3)
