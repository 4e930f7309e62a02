"""End to end: one epoch of ``extractor_training_pipeline`` on the mock dataset with a PML loss and a PML miner
named in the config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch.nn.functional as F
from oml_pml import PMLLoss
from torch import Tensor, nn

from oml_core import hookimpl
from oml_core.interfaces.models import IExtractor
from oml_core.lightning.pipelines.train import extractor_training_pipeline
from oml_core.registry import Registry

IMAGE_ARGS = {"im_size": 32, "mean": [1.0] * 3, "std": [0.25] * 3}


class TinyExtractor(IExtractor):
    """A strided convolution, global average pooling and a linear projection to L2-normalised embeddings."""

    def __init__(self, feat_dim: int = 16) -> None:
        super().__init__()
        self._feat_dim = feat_dim
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
        )
        self.head = nn.Linear(8, feat_dim)

    def forward(self, x: Tensor) -> Tensor:
        return F.normalize(self.head(self.backbone(x)), dim=1)

    @property
    def feat_dim(self) -> int:
        return self._feat_dim


class TinyExtractorPlugin:
    @hookimpl
    def oml_register_extractors(self, register: Any) -> None:
        register("tiny_pml_test", TinyExtractor)


@pytest.mark.slow
def test_one_epoch_with_a_pml_loss_and_miner(tmp_path: Path, oml_cache_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    registry = Registry(
        [("tiny_pml_test", TinyExtractorPlugin())],
        allow=["oml_pml", "oml_samplers", "oml_loggers"],
        strict=True,
    )
    cfg = {
        "postfix": "pml",
        "seed": 7,
        "accelerator": "cpu",
        "devices": 1,
        "dataframe_name": "df.csv",
        "logs_root": str(tmp_path),
        "transforms_train": {"name": "augs_flip", "args": IMAGE_ARGS},
        "transforms_val": {"name": "norm_resize", "args": IMAGE_ARGS},
        "sampler": {"name": "balance", "args": {"n_labels": 4, "n_instances": 4}},
        "bs_val": 32,
        "max_epochs": 1,
        "valid_period": 1,
        "metric_args": {"cmc_top_k": [1], "map_top_k": [5], "return_only_overall_category": True},
        "metric_for_checkpointing": "OVERALL/cmc/1",
        "extractor": {"name": "tiny_pml_test", "args": {"feat_dim": 16}},
        "criterion": {
            "name": "pml_multi_similarity",
            "args": {"miner": {"name": "MultiSimilarityMiner", "args": {"epsilon": 0.1}}},
        },
        "optimizer": {"name": "sgd", "args": {"lr": 0.05}},
        "lightning_trainer_extra_args": {"enable_progress_bar": False},
    }
    result = extractor_training_pipeline(cfg, registry=registry)  # the balance sampler, TensorBoard logger
    assert isinstance(registry.build("loss", cfg["criterion"]), PMLLoss)
    assert 0.0 <= float(result.metrics["OVERALL/cmc/1"]) <= 1.0
    assert result.best_checkpoint is not None and result.best_checkpoint.is_file()
