"""The oml_faiss plugin through the registry and the retrieval it serves: names, default configs, lazy imports,
``RetrievalResults.from_embeddings`` and ``EmbeddingMetrics`` through a faiss backend."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import torch
from oml_faiss import FaissFlatIndex, FaissHNSWIndex, FaissIVFIndex, FaissIVFPQIndex

from oml_core.metrics import EmbeddingMetrics
from oml_core.registry import Registry, UnexpectedArgumentError, default_registry
from oml_core.retrieval import RetrievalResults

BACKENDS = {
    "faiss_flat": FaissFlatIndex,
    "faiss_ivf": FaissIVFIndex,
    "faiss_hnsw": FaissHNSWIndex,
    "faiss_ivfpq": FaissIVFPQIndex,
}


def test_the_four_backends_are_registered_by_the_distribution() -> None:
    registry = Registry()
    assert set(BACKENDS) <= set(registry.names("knn_backend"))
    assert set(BACKENDS) <= set(default_registry().names("knn_backend"))
    for name, cls in BACKENDS.items():
        info = registry.describe("knn_backend", name)
        assert info["distribution"] == "oml-faiss"
        assert info["factory"] == f"oml_faiss.indexes:{cls.__name__}"
        assert registry.get("knn_backend", name).load() is cls


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_default_config_builds(name: str) -> None:
    registry = Registry()
    cfg = registry.default_config("knn_backend", name)
    assert cfg is not None and cfg["name"] == name
    index = registry.build("knn_backend", cfg)
    assert type(index) is BACKENDS[name] and len(index) == 0 and index.distance == "l2"
    assert index._params() == {**cfg["args"]}  # the yaml lists every argument, at the class's defaults
    assert (
        type(registry.build("knn_backend", {"name": name, "args": {"distance": "cosine"}})) is BACKENDS[name]
    )


def test_unknown_or_bad_arguments_are_refused_by_name() -> None:
    registry = Registry()
    with pytest.raises(UnexpectedArgumentError, match=r"unexpected argument\(s\) \['nprobe'\]"):
        registry.build("knn_backend", {"name": "faiss_hnsw", "args": {"nprobe": 3}})
    with pytest.raises(ValueError, match=r"nprobe must be in \[1, nlist\] \(nlist=10\), got 20"):
        registry.build("knn_backend", {"name": "faiss_ivf", "args": {"nlist": 10, "nprobe": 20}})


def test_plugin_module_imports_neither_faiss_nor_a_backend() -> None:
    code = (
        "import sys, oml_faiss, oml_faiss.plugin; "
        "print(sorted(m for m in sys.modules if m == 'faiss' or m.startswith('oml_faiss.') "
        "and m != 'oml_faiss.plugin'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_export_resolves() -> None:
    import oml_faiss

    for name in oml_faiss.__all__:
        value = getattr(oml_faiss, name)
        assert value.__name__ == name and value.__module__ == "oml_faiss.indexes"
    assert set(oml_faiss.__all__) <= set(dir(oml_faiss))


def as_lists(rr: RetrievalResults) -> tuple[list, list, list]:
    assert rr.gt_ids is not None
    return (
        [r.tolist() for r in rr.retrieved_ids],
        [g.tolist() for g in rr.gt_ids],
        rr.n_gallery.tolist(),
    )


@pytest.mark.parametrize("distance", ["l2", "cosine"])
@pytest.mark.parametrize("with_sequence", [False, True])
def test_retrieval_results_through_faiss_flat_are_the_exact_ones(
    distance: str, with_sequence: bool, make_dataset: Callable[..., Any]
) -> None:
    embeddings, dataset = make_dataset(120, 6, 5, seed=3, with_sequence=with_sequence)
    for n_items in (1, 5, 1000):
        default = RetrievalResults.from_embeddings(embeddings, dataset, n_items=n_items, distance=distance)
        for backend in ("faiss_flat", {"name": "faiss_flat", "args": {}}, FaissFlatIndex(distance)):
            rr = RetrievalResults.from_embeddings(
                embeddings, dataset, n_items=n_items, distance=distance, knn_backend=backend
            )
            assert as_lists(rr) == as_lists(default)
            for actual, expected in zip(rr.distances, default.distances):
                torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "backend",
    [
        "faiss_flat",
        {"name": "faiss_hnsw", "args": {}},
        {"name": "faiss_ivf", "args": {"nlist": 8, "nprobe": 8}},  # every list scanned: exact
    ],
)
def test_embedding_metrics_through_faiss_are_the_exact_ones(
    backend: Any, make_dataset: Callable[..., Any]
) -> None:
    embeddings, dataset = make_dataset(300, 16, 8, seed=4, with_sequence=True)
    results = []
    for knn_backend in (None, backend):
        calculator = EmbeddingMetrics(
            dataset,
            cmc_top_k=(1, 5),
            precision_top_k=(5,),
            map_top_k=(5, 10),
            verbose=False,
            knn_backend=knn_backend,
        )
        calculator.setup(len(dataset))
        calculator.update(embeddings, torch.arange(len(dataset)))
        results.append(calculator.compute_metrics()["OVERALL"])
    assert results[0].keys() == results[1].keys()
    for metric in ("cmc", "precision", "map"):
        assert results[0][metric].keys() == results[1][metric].keys()
        for k, value in results[0][metric].items():
            torch.testing.assert_close(results[1][metric][k], value)
