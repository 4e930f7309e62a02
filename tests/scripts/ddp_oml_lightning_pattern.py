"""OML 4.0's documented Lightning DDP pattern (docs/readme/examples_source/extractor/train_val_pl_ddp.md), with
``oml`` -> ``oml_core`` and a tiny model on embeddings instead of BERT on texts, on DEVICES CPU processes.

Usage: python ddp_oml_lightning_pattern.py OUT_DIR DEVICES (or ``run(devices)`` in a process). With DEVICES=2
Lightning re-runs this script as the second process. ``ExtractorModuleDDP(loaders_train=..., loaders_val=...)``
trains a linear extractor with ArcFace for one epoch, and ``MetricValCallback(metric=EmbeddingMetrics(dataset=val,
postprocessor=AdaptiveThresholding(n_std=3)))`` validates it, under ``DDPStrategy()``. The balance sampler's
batches of 8 are split 4 + 4 among 2 processes and ArcFace is a mean of per-item losses, so 2 processes train the
weights of 1. Every process writes ``OUT_DIR/devices<DEVICES>_rank<RANK>.json``: the metrics of its callback and
the weights.
"""

import json
import sys
from pathlib import Path

import pytorch_lightning as pl
import torch
from oml_core.losses import ArcFaceLoss
from oml_core.samplers import BalanceSampler
from pytorch_lightning.strategies import DDPStrategy
from torch import Tensor, nn
from torch.optim import Adam
from torch.utils.data import DataLoader

from oml_core.datasets import EmbeddingsQueryGalleryLabeledDataset
from oml_core.interfaces.models import IExtractor
from oml_core.lightning import ExtractorModuleDDP, MetricValCallback
from oml_core.metrics import EmbeddingMetrics
from oml_core.retrieval import AdaptiveThresholding

N_LABELS, N_INSTANCES, DIM = 16, 4, 8  # 64 validation items, as in the "collected 32 out of 64"


class LinearExtractor(IExtractor):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(DIM, DIM)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(x)

    @property
    def feat_dim(self) -> int:
        return DIM


def datasets() -> tuple[EmbeddingsQueryGalleryLabeledDataset, EmbeddingsQueryGalleryLabeledDataset]:
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(N_LABELS).repeat_interleave(N_INSTANCES)
    centers = torch.randn(N_LABELS, DIM, generator=generator)
    make = lambda: centers[labels] + 0.8 * torch.randn(len(labels), DIM, generator=generator)  # noqa: E731
    every = torch.ones(len(labels), dtype=torch.bool)
    train = EmbeddingsQueryGalleryLabeledDataset(make(), labels, is_query=every, is_gallery=every)
    val = EmbeddingsQueryGalleryLabeledDataset(make(), labels, is_query=every, is_gallery=every)
    return train, val


def run(devices: int) -> tuple[pl.Trainer, dict]:
    """The example on ``devices`` processes (``DDPStrategy()``; on one process Lightning's default strategy, no
    process group): the trainer and ``{"metrics": the callback's, "weights": the extractor's}``."""
    pl.seed_everything(0, verbose=False)
    train_dataset, val_dataset = datasets()

    # model
    extractor = LinearExtractor()

    # train
    criterion = ArcFaceLoss(in_features=DIM, num_classes=N_LABELS)
    optimizer = Adam([*extractor.parameters(), *criterion.parameters()], lr=1e-2)
    batch_sampler = BalanceSampler(train_dataset.get_labels(), n_labels=2, n_instances=4, seed=0)
    train_loader = DataLoader(train_dataset, batch_sampler=batch_sampler)

    # val
    val_loader = DataLoader(val_dataset, batch_size=4)
    metric = EmbeddingMetrics(
        dataset=val_dataset, cmc_top_k=(1, 5), verbose=False, postprocessor=AdaptiveThresholding(n_std=3)
    )
    metric_callback = MetricValCallback(metric=metric)

    # run
    pl_model = ExtractorModuleDDP(
        extractor=extractor,
        criterion=criterion,
        optimizer=optimizer,
        loaders_train=train_loader,
        loaders_val=val_loader,  # DDP specific
    )
    strategy = DDPStrategy() if devices > 1 else "auto"
    ddp_args = {
        "accelerator": "cpu",
        "devices": devices,
        "strategy": strategy,
        "use_distributed_sampler": False,
    }
    trainer = pl.Trainer(
        max_epochs=1,
        callbacks=[metric_callback],
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **ddp_args,
    )
    trainer.fit(pl_model)  # we don't pass loaders to .fit() in DDP
    weights = {name: value.tolist() for name, value in extractor.state_dict().items()}
    return trainer, {"metrics": metric_callback.last_metrics, "weights": weights}


if __name__ == "__main__":
    out, devices = Path(sys.argv[1]), int(sys.argv[2])
    trainer, record = run(devices)
    (out / f"devices{devices}_rank{trainer.global_rank}.json").write_text(json.dumps(record))
