"""Lightning parts: ExtractorModule (scheduling, freezing), the DDP modules, MetricValCallback with several
validation loaders, and the random state kept in checkpoints."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from oml_core.interfaces.datasets import IQueryGalleryLabeledDataset
from oml_core.interfaces.metrics import IBasicMetric
from oml_core.interfaces.models import IExtractor, IFreezable
from oml_core.lightning.callbacks import MetricValCallback, MetricValCallbackDDP, RNGStateCallback
from oml_core.lightning.modules import ExtractorModule, ExtractorModuleDDP, ModuleDDP
from oml_core.metrics import EmbeddingMetrics, EmbeddingMetricsDDP
from oml_core.utils.rng_state import get_rng_state, set_rng_state

# the modules are trained here without a validation loader, on purpose
pytestmark = pytest.mark.filterwarnings("ignore:You defined a `validation_step` but have no `val_dataloader`")


class TwoLayers(IExtractor, IFreezable):
    """``head(backbone(x))``; freezing stops the backbone's gradients."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Linear(2, 2)
        self.head = nn.Linear(2, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.backbone(x))

    @property
    def feat_dim(self) -> int:
        return 2

    def freeze(self) -> None:
        self.backbone.requires_grad_(False)

    def unfreeze(self) -> None:
        self.backbone.requires_grad_(True)


class Identity(IExtractor):
    """The inputs are the embeddings."""

    def __init__(self) -> None:
        super().__init__()
        self.unused = nn.Parameter(torch.zeros(1))

    def forward(self, x: Tensor) -> Tensor:
        return x

    @property
    def feat_dim(self) -> int:
        return 1


class SquaredNorm(nn.Module):
    def forward(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        return embeddings.pow(2).mean()


class PointsDataset(IQueryGalleryLabeledDataset):
    """1-d points as items; every item is a query and in the gallery."""

    def __init__(self, points: list[float], labels: list[int]) -> None:
        self.points, self.labels = points, labels

    def __len__(self) -> int:
        return len(self.points)

    def __getitem__(self, item: int) -> dict:
        return {"input_tensors": torch.tensor([self.points[item]]), "labels": self.labels[item], "idx": item}

    def get_labels(self) -> np.ndarray:
        return np.array(self.labels)

    def get_query_ids(self) -> torch.LongTensor:
        return torch.arange(len(self))

    def get_gallery_ids(self) -> torch.LongTensor:
        return torch.arange(len(self))


def train_loader(n_batches: int = 4) -> DataLoader:
    x = torch.randn(2 * n_batches, 2, generator=torch.Generator().manual_seed(0))
    items = [{"input_tensors": row, "labels": 0} for row in x]
    return DataLoader(items, batch_size=2)


def fit(module: ExtractorModule, max_epochs: int) -> pl.Trainer:
    trainer = pl.Trainer(
        max_epochs=max_epochs,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, train_dataloaders=train_loader())
    return trainer


@pytest.mark.parametrize(("max_epochs", "backbone_trained"), [(2, False), (3, True)])
def test_the_extractor_is_frozen_for_freeze_n_epochs_then_trained(max_epochs, backbone_trained):
    torch.manual_seed(0)
    extractor = TwoLayers()
    backbone, head = extractor.backbone.weight.clone(), extractor.head.weight.clone()
    optimizer = torch.optim.SGD(extractor.parameters(), lr=0.1)
    fit(ExtractorModule(extractor, SquaredNorm(), optimizer, freeze_n_epochs=2), max_epochs)
    assert not torch.equal(extractor.head.weight, head)
    assert torch.equal(extractor.backbone.weight, backbone) is not backbone_trained


def test_freezing_needs_a_freezable_extractor():
    with pytest.raises(TypeError, match="freeze_n_epochs=1 needs an IFreezable extractor, got Identity"):
        ExtractorModule(Identity(), freeze_n_epochs=1)
    with pytest.raises(
        ValueError, match="scheduler_interval must be one of \\('step', 'epoch'\\), got 'batch'"
    ):
        ExtractorModule(Identity(), scheduler_interval="batch")


@pytest.mark.parametrize(
    ("interval", "frequency", "max_epochs", "halvings"),
    [("step", 1, 1, 4), ("step", 2, 1, 2), ("epoch", 1, 2, 2), ("epoch", 2, 2, 1)],
)
def test_the_scheduler_steps_at_its_interval_and_frequency(interval, frequency, max_epochs, halvings):
    extractor = TwoLayers()
    optimizer = torch.optim.SGD(extractor.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    module = ExtractorModule(
        extractor,
        SquaredNorm(),
        optimizer,
        scheduler,
        scheduler_interval=interval,
        scheduler_frequency=frequency,
    )
    fit(module, max_epochs)  # 4 steps per epoch
    assert optimizer.param_groups[0]["lr"] == 0.5**halvings


def test_a_monitored_scheduler_is_given_its_metric():
    extractor = TwoLayers()
    optimizer = torch.optim.SGD(extractor.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
    module = ExtractorModule(
        extractor, SquaredNorm(), optimizer, scheduler, "epoch", 3, scheduler_monitor_metric="OVERALL/cmc/1"
    )
    assert module.configure_optimizers() == {
        "optimizer": optimizer,
        "lr_scheduler": {
            "scheduler": scheduler,
            "interval": "epoch",
            "frequency": 3,
            "monitor": "OVERALL/cmc/1",
        },
    }
    assert ExtractorModule(extractor, SquaredNorm(), optimizer).configure_optimizers() is optimizer


def test_ddp_modules_serve_their_own_loaders():
    loader_train, loader_val = train_loader(), DataLoader(PointsDataset([0.0], [0]), batch_size=1)
    module = ExtractorModuleDDP(
        loaders_train=loader_train,
        loaders_val=[loader_val],
        extractor=Identity(),
        criterion=SquaredNorm(),
        freeze_n_epochs=0,
    )
    assert isinstance(module, ModuleDDP) and isinstance(module.criterion, SquaredNorm)
    assert module.train_dataloader() is loader_train  # no process group: nothing to patch
    assert module.val_dataloader() == [loader_val]
    assert ModuleDDP(loaders_train=loader_train).val_dataloader() == []
    with pytest.raises(RuntimeError, match="ModuleDDP was built without loaders_train"):
        ModuleDDP().train_dataloader()


POINTS = [0.0, 0.1, 1.0, 1.1]
DATASETS = (PointsDataset(POINTS, [0, 0, 1, 1]), PointsDataset(POINTS, [0, 1, 0, 1]))  # cmc@1: 1 and 0


@pytest.mark.parametrize("callback_class", [MetricValCallback, MetricValCallbackDDP])
def test_every_validation_loader_gets_its_own_metrics(callback_class):
    metric_class = EmbeddingMetricsDDP if callback_class is MetricValCallbackDDP else EmbeddingMetrics
    callbacks = [
        callback_class(
            metric_class(dataset, cmc_top_k=(1,), precision_top_k=(), map_top_k=(), verbose=False),
            loader_idx=i,
        )
        for i, dataset in enumerate(DATASETS)
    ]
    trainer = pl.Trainer(accelerator="cpu", logger=False, callbacks=callbacks, enable_progress_bar=False)
    loaders = [DataLoader(dataset, batch_size=3) for dataset in DATASETS]
    trainer.validate(ExtractorModule(Identity()), dataloaders=loaders, verbose=False)
    assert callbacks[0].last_metrics == {"OVERALL/cmc/1": 1.0, "OVERALL/pcf/0.5": 1.0}
    assert callbacks[1].last_metrics == {"OVERALL/cmc/1": 0.0, "OVERALL/pcf/0.5": 1.0}
    logged = {key: float(value) for key, value in trainer.callback_metrics.items()}
    assert logged == {
        "OVERALL/cmc/1/dataloader_idx_0": 1.0,
        "OVERALL/pcf/0.5/dataloader_idx_0": 1.0,
        "OVERALL/cmc/1/dataloader_idx_1": 0.0,
        "OVERALL/pcf/0.5/dataloader_idx_1": 1.0,
    }


def test_callbacks_check_their_metric():
    class NoFigures(IBasicMetric):
        def setup(self, *args, **kwargs): ...
        def update(self, *args, **kwargs): ...
        def compute_metrics(self, *args, **kwargs): ...

    MetricValCallbackDDP(EmbeddingMetrics(DATASETS[0], verbose=False))  # it gathers under DDP by itself
    with pytest.raises(TypeError, match="MetricValCallbackDDP needs an IMetricDDP metric, got NoFigures"):
        MetricValCallbackDDP(NoFigures())
    with pytest.raises(TypeError, match="log_images=True needs an IMetricVisualisable metric, got NoFigures"):
        MetricValCallback(NoFigures(), log_images=True)


@pytest.mark.parametrize(
    "callback",
    [
        MetricValCallbackDDP(EmbeddingMetricsDDP(DATASETS[0], verbose=False)),
        MetricValCallback(EmbeddingMetrics(DATASETS[0], verbose=False)),  # OML 4.0's DDP callback
    ],
)
def test_the_callbacks_refuse_loaders_that_are_not_patched_under_ddp(callback):
    loader = DataLoader(DATASETS[0], batch_size=2)
    with pytest.raises(RuntimeError, match="the validation loaders are not patched to DDP"):
        callback.on_validation_start(
            SimpleNamespace(world_size=2, val_dataloaders=[loader]), ExtractorModule(Identity())
        )
    callback.on_validation_start(
        SimpleNamespace(world_size=1, val_dataloaders=[loader]), ExtractorModule(Identity())
    )


def draws(generator: torch.Generator) -> tuple:
    return (
        random.random(),
        float(np.random.rand()),
        float(torch.rand(())),
        float(torch.rand((), generator=generator)),
    )


def test_the_random_state_is_saved_and_restored(tmp_path):
    generator = torch.Generator().manual_seed(5)
    callback = RNGStateCallback({"sampler": generator})
    state = callback.state_dict()
    torch.save(state, tmp_path / "state.pt")
    expected = draws(generator)
    draws(generator)
    callback.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert draws(generator) == expected
    with pytest.raises(KeyError, match="no state of the generator 'other' \\(it has: \\['sampler'\\]\\)"):
        set_rng_state(get_rng_state({"sampler": generator}), {"other": generator})
