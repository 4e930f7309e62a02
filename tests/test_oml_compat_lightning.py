"""OML 4.0's Lightning names at OML's paths (``oml_core.lightning``), and OML's documented DDP pattern
(``ExtractorModuleDDP`` + ``MetricValCallback(EmbeddingMetrics(...))`` under ``DDPStrategy()``) on 2 CPU processes,
with the metrics and weights of 1 process."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

import oml_core.lightning
from oml_core.ddp.patching import DDPSamplerWrapper
from oml_core.interfaces.models import IPairwiseModel
from oml_core.lightning.callbacks.metric import MetricValCallback, MetricValCallbackDDP
from oml_core.lightning.modules import ExtractorModule, ExtractorModuleDDP, ModuleDDP, PairwiseModule
from oml_core.lightning.modules.pairwise_postprocessing import PairwiseModuleDDP
from tests.scripts.ddp_oml_lightning_pattern import run

SCRIPT = Path(__file__).parent / "scripts" / "ddp_oml_lightning_pattern.py"


def test_oml_lightning_names_resolve_at_oml_paths():
    from oml_core.lightning import ExtractorModule as OmlExtractorModule
    from oml_core.lightning import ExtractorModuleDDP as OmlExtractorModuleDDP
    from oml_core.lightning import MetricValCallback as OmlMetricValCallback
    from oml_core.lightning import PairwiseModule as OmlPairwiseModule
    from oml_core.lightning import PairwiseModuleDDP as OmlPairwiseModuleDDP
    from oml_core.lightning import logging

    assert (OmlExtractorModule, OmlExtractorModuleDDP, OmlMetricValCallback) == (
        ExtractorModule,
        ExtractorModuleDDP,
        MetricValCallback,
    )
    assert (OmlPairwiseModule, OmlPairwiseModuleDDP) == (PairwiseModule, PairwiseModuleDDP)
    assert issubclass(MetricValCallbackDDP, MetricValCallback)
    import oml_core.lightning.pipelines.logging as pipelines_logging

    assert logging is pipelines_logging and oml_core.lightning.logging is pipelines_logging
    assert logging.TensorBoardPipelineLogger.__name__ == "TensorBoardPipelineLogger"  # OML's example's logger
    assert {"ExtractorModuleDDP", "MetricValCallback", "PairwiseModuleDDP", "logging"} <= set(
        oml_core.lightning.__all__
    )
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        oml_core.lightning.Nope  # noqa: B018


class Distance(IPairwiseModel):
    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return (x1 - x2).norm(dim=1)

    def predict(self, x1: Tensor, x2: Tensor) -> Tensor:
        return self.forward(x1, x2)


class Items(Dataset):
    def __len__(self) -> int:
        return 5

    def __getitem__(self, item: int) -> dict:
        return {"embeddings": torch.tensor([float(item)]), "labels": item % 2, "idx": item}


def test_pairwise_module_ddp_serves_its_loaders_patched_in_a_process_group(tmp_path):
    """In a real (one-process, gloo) group the loaders come back wrapped by ``DDPSamplerWrapper``; without a
    group they are the given ones."""
    train, val = DataLoader(Items(), batch_size=2), DataLoader(Items(), batch_size=3)
    module = PairwiseModuleDDP(train, [val], Distance())
    assert isinstance(module, PairwiseModule) and isinstance(module, ModuleDDP)
    assert isinstance(module.model, Distance)
    assert module.train_dataloader() is train and module.val_dataloader() == [val]
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1, timeout=timedelta(seconds=60)
    )
    try:
        patched_train, [patched_val] = module.train_dataloader(), module.val_dataloader()
    finally:
        dist.destroy_process_group()
    assert isinstance(patched_train.batch_sampler, DDPSamplerWrapper)
    assert [batch["idx"].tolist() for batch in patched_val] == [[0, 1, 2], [3, 4]]


@pytest.mark.slow
def test_oml_ddp_pattern_on_two_processes_gives_the_single_process_metrics(tmp_path, oml_fork_server):
    """OML 4.0's ``train_val_pl_ddp`` example (``oml`` -> ``oml_core``): before, every process collected half of
    the 64 validation items and the metric refused them ("collected 32 out of 64 samples"); now both processes
    report the metrics (and train the weights) of the same run on one process (run here, in this process)."""
    done = oml_fork_server.run(
        [str(tmp_path), "2"], {**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300, script=SCRIPT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    single = run(devices=1)[1]
    assert set(single["metrics"]) == {
        "OVERALL/cmc/1",
        "OVERALL/cmc/5",
        "OVERALL/precision/5",
        "OVERALL/map/5",
        "OVERALL/pcf/0.5",
    }
    assert 0 < single["metrics"]["OVERALL/cmc/5"] < 1  # trained weights that neither fail nor ace
    for rank in (0, 1):
        record = json.loads((tmp_path / f"devices2_rank{rank}.json").read_text())
        assert record["metrics"] == pytest.approx(single["metrics"], abs=1e-6)
        for name, value in record["weights"].items():
            torch.testing.assert_close(
                torch.tensor(value), torch.tensor(single["weights"][name]), atol=1e-5, rtol=0
            )
