"""OML 4.0's ``oml.metrics.accumulation.Accumulator`` at ``oml_core.metrics.accumulation`` (values by hand, on one
process and on 2 gloo processes), and ``EmbeddingMetrics`` collecting through it (``acc``, ``update_data``, no
explicit ``sync`` under DDP)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from oml_core.metrics import EmbeddingMetrics, EmbeddingMetricsDDP, flatten_metrics
from oml_core.metrics.accumulation import INDICES_KEY, Accumulator, unique_rows_by_ids
from tests.test_embedding_metrics import LineDataset, embeddings_2d

SCRIPTS = Path(__file__).parent / "scripts"


def batches() -> list[dict]:
    """Samples 0..4 with values 10 * i, in two batches of 3 and 2."""
    return [
        {"t": torch.tensor([[0.0], [10.0], [20.0]]), "a": np.array([0, 10, 20]), "l": ["0", "10", "20"]},
        {"t": torch.tensor([[30.0], [40.0]]), "a": np.array([30, 40]), "l": ("30", "40"), "ignored": 1},
    ]


def test_accumulates_tensors_arrays_and_lists_in_order():
    acc = Accumulator(keys_to_accumulate=("t", "a", "l"))
    for _ in range(2):  # refresh forgets the previous epoch
        acc.refresh(num_samples=5)
        assert acc.collected_samples == 0 and not acc.is_storage_full()
        for batch in batches():
            acc.update_data(batch)
        assert acc.collected_samples == 5 and acc.is_storage_full()
    assert acc.storage["t"].tolist() == [[0.0], [10.0], [20.0], [30.0], [40.0]]
    assert acc.storage["a"].tolist() == [0, 10, 20, 30, 40]
    assert acc.storage["l"] == ["0", "10", "20", "30", "40"]
    assert acc.sync() is acc  # one process, no indices: nothing to gather, order or deduplicate


def test_sync_orders_by_index_and_keeps_every_index_once():
    acc = Accumulator(keys_to_accumulate=("t", "l"))
    acc.refresh(num_samples=5)
    acc.update_data({"t": torch.tensor([3.0, 1.0, 0.0]), "l": ["c", "b", "a"]}, indices=[3, 1, 0])
    acc.update_data({"t": torch.tensor([2.0, -1.0]), "l": ["x", "y"]}, indices=torch.tensor([2, 1]))
    synced = acc.sync()
    assert (
        synced is not acc and synced.num_samples == synced.collected_samples == 4 and synced.is_storage_full()
    )
    assert synced.storage[INDICES_KEY] == [0, 1, 2, 3] and synced.storage[acc._indices_key] == [0, 1, 2, 3]
    assert synced.storage["t"].tolist() == [0.0, 1.0, 2.0, 3.0]  # index 1: its first value (OML's rule)
    assert synced.storage["l"] == ["a", "b", "x", "c"]
    assert acc.sync(keep="last").storage["t"].tolist() == [0.0, -1.0, 2.0, 3.0]


def test_more_samples_than_expected_grow_the_storage_but_only_a_partial_sync_takes_them():
    acc = Accumulator(keys_to_accumulate=("t",))
    acc.refresh(num_samples=2)
    acc.update_data({"t": torch.tensor([5.0, 6.0, 7.0])}, indices=[2, 0, 2])
    assert acc.collected_samples == 3 and not acc.is_storage_full()
    with pytest.raises(ValueError, match="Cannot sync. Collected: 3/2 items"):
        acc.sync()
    assert acc.sync(require_full=False).storage["t"].tolist() == [6.0, 5.0]


@pytest.mark.parametrize(
    ("act", "error", "match"),
    [
        (lambda acc: acc.update_data({"a": [1]}), ValueError, r"call refresh\(num_samples\)"),
        (lambda acc: acc.refresh(0), ValueError, "num_samples must be an int >= 1, got 0"),
        (lambda acc: (acc.refresh(4), acc.update_data({"b": [1]})), ValueError, r"the batch has no \['a'\]"),
        (lambda acc: (acc.refresh(4), acc.update_data({"a": 1})), TypeError, "Type 'int' of 'a'"),
        (lambda acc: (acc.refresh(4), acc.update_data({"a": [1, 2]}, [0])), ValueError, "same length"),
        (
            lambda acc: (
                acc.refresh(4),
                acc.update_data({"a": [1]}),
                acc.update_data({"a": [2]}, indices=[1]),
            ),
            RuntimeError,
            "were not with the earlier ones",
        ),
        (
            lambda acc: (acc.refresh(4), acc.update_data({"a": [1]}, [0]), acc.update_data({"a": [2]})),
            RuntimeError,
            "indices were given with the earlier batches",
        ),
        (
            lambda acc: (
                acc.refresh(4),
                acc.update_data({"a": torch.ones(1, 2)}),
                acc.update_data({"a": torch.ones(1, 3)}),
            ),
            ValueError,
            r"'a' is a Tensor of rows \(3,\), the earlier batches gave a Tensor of rows \(2,\)",
        ),
        (
            lambda acc: (acc.refresh(4), acc.update_data({"a": [1]}), acc.update_data({"a": np.ones(1)})),
            ValueError,
            r"'a' is a ndarray of rows \(\), the earlier batches gave a list",
        ),
    ],
)
def test_bad_use_is_refused(act, error, match):
    with pytest.raises(error, match=match):
        act(Accumulator(keys_to_accumulate=("a",)))


def test_keys_must_be_unique():
    with pytest.raises(ValueError, match="All the keys have to be unique"):
        Accumulator(keys_to_accumulate=("a", "a"))


def test_unique_rows_by_ids():
    assert unique_rows_by_ids([2, 0, 2], ["x", "y", "z"]) == ["y", "x"]
    assert unique_rows_by_ids([2, 0, 2], np.array([1, 2, 3]), keep="last").tolist() == [2, 3]
    with pytest.raises(ValueError, match="got 1 ids for 2 rows"):
        unique_rows_by_ids([0], [1, 2])


def test_embedding_metrics_collect_through_their_accumulator():
    dataset = LineDataset()
    metric = EmbeddingMetrics(dataset, cmc_top_k=(1,), precision_top_k=(), map_top_k=(), verbose=False)
    metric.setup()
    assert isinstance(metric.acc, Accumulator) and metric.acc.num_samples == 5
    embeddings = embeddings_2d()
    metric.update_data({"embeddings": embeddings[[4, 1]]}, indices=torch.tensor([4, 1]))  # OML's form
    metric.update(embeddings[[0, 2, 3]], [0, 2, 3])
    assert metric.acc.collected_samples == 5 and metric.embeddings is None  # not gathered yet
    metrics = flatten_metrics(metric.compute_metrics())
    assert metrics["OVERALL/cmc/1"] == pytest.approx(0.2)  # q0 only (see test_embedding_metrics)
    assert metric.acc.collected_samples == 5 and torch.equal(metric.embeddings, embeddings)
    assert metric.acc.storage[INDICES_KEY] == [0, 1, 2, 3, 4]


def test_two_processes_gather_and_deduplicate(tmp_path):
    """2 gloo processes: the Accumulator's storage after ``sync`` is the hand-made one in both, and
    ``EmbeddingMetrics`` set up as OML's callback does (with this process's number of samples) or without
    arguments computes the single-process metrics in ``compute_metrics`` alone."""
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "ddp_accumulator.py"), str(tmp_path), "2"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(SCRIPTS), os.environ.get("PYTHONPATH", "")])},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    sys.path.insert(0, str(SCRIPTS))
    try:
        from ddp_embedding_metrics import N_ITEMS, RandomDataset, embeddings
    finally:
        sys.path.remove(str(SCRIPTS))
    single = EmbeddingMetricsDDP(
        RandomDataset(), cmc_top_k=(1, 3), map_top_k=(3,), fmr_vals=(0.2,), verbose=False
    )
    single.setup()
    single.update(embeddings(), torch.arange(N_ITEMS))
    expected = flatten_metrics(single.compute_metrics())
    for rank in (0, 1):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        # rank 0: 0, 2, 4, 6, 8; rank 1: 1, 3, 5, 7, 9 and 0 again with the value -1: rank 0's value is kept
        assert record["indices"] == list(range(10)) and record["num_samples"] == 10 and record["is_full"]
        assert record["tensor"] == [[10.0 * i] * 2 for i in range(10)]
        assert record["array"] == [10 * i for i in range(10)]
        assert record["list"] == [str(10 * i) for i in range(10)]
        assert record["metrics"] == pytest.approx(expected)
        assert record["collected_after_compute"] == N_ITEMS


def test_a_refused_batch_changes_nothing():
    acc = Accumulator(keys_to_accumulate=("l", "t"))
    acc.refresh(num_samples=4)
    acc.update_data({"l": ["a"], "t": torch.ones(1, 2)})
    with pytest.raises(ValueError, match="'t' is a Tensor of rows"):
        acc.update_data({"l": ["b"], "t": torch.ones(1, 3)})
    assert acc.collected_samples == 1 and acc.storage["l"] == ["a"]


def test_omls_ddp_and_metrics_helper_names():
    from torch.utils.data import DataLoader

    from oml_core.ddp.patching import extract_loader_parameters
    from oml_core.ddp.utils import WarningDDP, is_main_process
    from oml_core.functional.metrics import calc_topological_metrics
    from oml_core.metrics import calc_topological_metrics as from_metrics

    assert is_main_process()  # no process group: the only process is the main one
    assert issubclass(WarningDDP, UserWarning) and from_metrics is calc_topological_metrics

    def collate(items: list) -> list:
        return items

    generator = torch.Generator()
    loader = DataLoader(list(range(5)), batch_size=2, drop_last=True, collate_fn=collate, generator=generator)
    parameters = extract_loader_parameters(loader)
    assert parameters["batch_size"] == 2 and parameters["drop_last"] and parameters["generator"] is generator
    assert parameters["collate_fn"] is collate and parameters["dataset"] == list(range(5))
    like = extract_loader_parameters(loader, ignore_data_related_parameters=True)
    assert not {"dataset", "batch_size", "drop_last", "sampler", "batch_sampler", "shuffle"} & set(like)
    assert list(DataLoader(list(range(3)), batch_size=2, **like)) == [[0, 1], [2]]  # the collate_fn kept
