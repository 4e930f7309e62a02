"""Exact kNN over a gallery sharded across processes: equal to the search over the whole set in one process.

The 2-process runs are real gloo process groups (``scripts/ddp_sharded_knn.py``, started once); the references
are the single-process ``search_knn`` and ``EmbeddingMetrics`` on the same data, computed here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from oml_core.knn.exact import ExactKnnIndex
from oml_core.knn.search import search_knn
from oml_core.knn.sharded import ShardedExactKnnIndex, merge_top_k, search_sharded
from oml_core.metrics import EmbeddingMetrics, EmbeddingMetricsDDP, flatten_metrics

SCRIPTS = Path(__file__).parent / "scripts"
sys.path.insert(0, str(SCRIPTS))
from ddp_sharded_knn import SETTINGS, ArraysDataset, data, rows  # noqa: E402


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("sharded")
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "ddp_sharded_knn.py"), str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(2)]


@pytest.mark.parametrize("setting", SETTINGS, ids=[s[0] for s in SETTINGS])
def test_two_shards_find_what_one_process_finds(ranks, setting):
    name, distance, sequences, top_n = setting
    d = data()
    expected = rows(
        search_knn(
            d["embeddings"],
            d["ids_query"],
            d["ids_gallery"],
            top_n,
            labels_gt=d["labels"],
            sequence_ids=d["sequences"] if sequences else None,
            distance=distance,
        )
    )
    ties = sum(len(row) - len(set(row)) for row in expected["distances"])
    assert ties > 20  # integer coordinates: many equal distances, ordered by gallery position
    for rank in ranks:
        got = rank[name]
        assert got["retrieved_ids"] == expected["retrieved_ids"]
        assert got["gt_ids"] == expected["gt_ids"] and got["n_gallery"] == expected["n_gallery"]
        for got_row, expected_row in zip(got["distances"], expected["distances"]):
            assert got_row == pytest.approx(expected_row, abs=1e-5)


def test_a_process_without_queries_or_without_gallery_items_takes_part(ranks):
    d = data()
    index = ExactKnnIndex("l2")
    index.add(d["embeddings"][:20])
    expected = index.search(d["embeddings"][40:47], 4)
    assert ranks[0]["lopsided"]["ids"] == expected.ids.tolist()
    torch.testing.assert_close(torch.tensor(ranks[0]["lopsided"]["distances"]), expected.distances)
    assert ranks[1]["lopsided"] == {"distances": [], "ids": []}


def test_sharded_metrics_are_the_single_process_metrics(ranks):
    metric = EmbeddingMetrics(
        ArraysDataset(), cmc_top_k=(1, 3), map_top_k=(3,), pcf_variance=(), verbose=False
    )
    metric.setup()
    metric.update(data()["embeddings"], torch.arange(len(data()["embeddings"])))
    expected = flatten_metrics(metric.compute_metrics())
    assert set(expected) >= {"OVERALL/cmc/1", "OVERALL/cmc/3", "OVERALL/map/3", "OVERALL/precision/5"}
    assert ranks[0]["metrics"] == pytest.approx(expected, abs=1e-6)
    assert ranks[1]["metrics"] == ranks[0]["metrics"]


def test_merging_keeps_the_k_best_by_distance_then_id():
    distances = torch.tensor([[0.5, 0.2, float("inf"), 0.2, 0.1, 0.5]])
    ids = torch.tensor([[7, 9, -1, 3, 12, 2]])
    merged_d, merged_i = merge_top_k(distances, ids, 4)
    assert merged_i.tolist() == [[12, 3, 9, 2]]
    torch.testing.assert_close(merged_d, torch.tensor([[0.1, 0.2, 0.2, 0.5]]))
    _, all_ids = merge_top_k(distances, ids, 6)
    assert all_ids.tolist() == [[12, 3, 9, 2, 7, -1]]  # padding last


def test_without_a_process_group_it_is_the_exact_index_of_its_shard(tmp_path):
    d = data()
    sharded, exact = ShardedExactKnnIndex("cosine"), ExactKnnIndex("cosine")
    for index in (sharded, exact):
        index.add(d["embeddings"], groups=d["sequences"])
    expected = exact.search(d["embeddings"][:9], 5, exclude=d["sequences"][:9])
    found = sharded.search(d["embeddings"][:9], 5, exclude=d["sequences"][:9])
    assert torch.equal(found.ids, expected.ids) and len(sharded) == len(d["embeddings"])
    sharded.save(tmp_path)
    assert (tmp_path / "shard_0").is_dir()
    loaded = ShardedExactKnnIndex.load(tmp_path)
    assert torch.equal(loaded.search(d["embeddings"][:9], 5, exclude=d["sequences"][:9]).ids, expected.ids)


def test_search_sharded_in_one_process_is_search_knn():
    d = data()
    found = search_sharded(
        torch.arange(len(d["embeddings"])), d["embeddings"], d["ids_query"], d["ids_gallery"], 6, d["labels"]
    )
    expected = search_knn(d["embeddings"], d["ids_query"], d["ids_gallery"], 6, labels_gt=d["labels"])
    assert rows(found)["retrieved_ids"] == rows(expected)["retrieved_ids"]
    with pytest.raises(ValueError, match="every query must be held by exactly one process"):
        search_sharded(
            torch.arange(10), d["embeddings"][:10], d["ids_query"], d["ids_gallery"], 6, d["labels"]
        )


def test_shard_gallery_refuses_the_metrics_that_need_every_embedding():
    with pytest.raises(
        ValueError, match=r"so fmr_vals and pcf_variance cannot be computed: set fmr_vals=\[\]"
    ):
        EmbeddingMetricsDDP(ArraysDataset(), fmr_vals=(0.1,), shard_gallery=True)
    with pytest.raises(ValueError, match="set knn_backend=null$"):
        EmbeddingMetricsDDP(ArraysDataset(), pcf_variance=(), knn_backend="exact", shard_gallery=True)
    metric = EmbeddingMetricsDDP(ArraysDataset(), pcf_variance=(), shard_gallery=True, verbose=False)
    metric.setup()
    metric.update(data()["embeddings"], torch.arange(len(data()["embeddings"])))
    # compute_metrics syncs: no process group, so the search runs on this process's items
    assert "OVERALL/cmc/5" in flatten_metrics(metric.compute_metrics()) and metric.embeddings is None
