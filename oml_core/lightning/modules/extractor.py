"""``ExtractorModule`` (and ``ExtractorModuleDDP``): trains an extractor with a ``forward(features, labels)``
criterion."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
from torch import Tensor, nn
from torch.optim import Optimizer

from oml_core.ddp.gather import gather_across_devices
from oml_core.interfaces.models import IExtractor
from oml_core.lightning.modules.ddp import ModuleDDP, TLoaders
from oml_core.lightning.modules.optimization import (
    check_optimization_args,
    finite_loss_or_none,
    freeze_for_epochs,
    log_learning_rate,
    optimizers_config,
)
from oml_core.utils.precision import full_precision, to_full_precision


class ExtractorModule(pl.LightningModule):
    """This is a base module to train your model with Lightning.

    Training: ``loss = criterion(extractor(batch[input_tensors_key]), batch[labels_key])``; the loss and, when
    the criterion has them, its ``last_logs`` (positive/negative distances, active triplets) are logged. With
    ``gather_across_devices`` the criterion (its miner too) gets the embeddings and labels of every DDP process's
    batch (:func:`~oml_core.ddp.gather.gather_across_devices`): a run on N processes trains as one process on the
    global batch, each process holding the N processes' embeddings.
    Validation/prediction: returns ``{embeddings_key: extractor.extract(x), "idx": batch["idx"]}``, which
    :class:`~oml_core.lightning.callbacks.metric.MetricValCallback` accumulates.
    Mixed precision (``16-mixed``, ``bf16-mixed``): the extractor runs under autocast, the criterion does not:
    it gets the embeddings as float32 (:mod:`oml_core.utils.precision`), and the embeddings of validation and
    prediction are float32 too, so that losses, distances and metrics keep 32-bit precision.

    Args:
        extractor: Extractor to train.
        criterion: Criterion to optimise (``None`` for validation or prediction only).
        optimizer: Optimizer.
        scheduler: Learning-rate scheduler.
        scheduler_interval: Interval of calling the scheduler (``step`` or ``epoch``).
        scheduler_frequency: Frequency of calling the scheduler.
        input_tensors_key: Key to get tensors from the batches.
        labels_key: Key to get labels from the batches.
        embeddings_key: Key under which the embeddings are returned.
        scheduler_monitor_metric: Metric to monitor for schedulers that depend on a metric value.
        freeze_n_epochs: Number of epochs to keep the model frozen (the extractor must be ``IFreezable``);
            it is unfrozen when ``current_epoch >= freeze_n_epochs`` (epochs start at 0).
        nan_policy: A NaN or infinite loss ``stop``-s the run (``NonFiniteLossError``) or ``skip_batch``-es
            that batch (see :func:`~oml_core.lightning.modules.optimization.finite_loss_or_none`).
        gather_across_devices: In DDP, compute the loss on the embeddings and labels of every process's batch
            (cross-device negatives) instead of this process's; no effect on one process.
    """

    def __init__(
        self,
        extractor: IExtractor,
        criterion: nn.Module | None = None,
        optimizer: Optimizer | None = None,
        scheduler: Any | None = None,
        scheduler_interval: str = "step",
        scheduler_frequency: int = 1,
        input_tensors_key: str = "input_tensors",
        labels_key: str = "labels",
        embeddings_key: str = "embeddings",
        scheduler_monitor_metric: str | None = None,
        freeze_n_epochs: int = 0,
        nan_policy: str = "stop",
        gather_across_devices: bool = False,
    ):
        super().__init__()
        check_optimization_args(extractor, "extractor", scheduler_interval, freeze_n_epochs, nan_policy)
        self.extractor = extractor
        self.criterion = criterion
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.scheduler_interval = scheduler_interval
        self.scheduler_frequency = scheduler_frequency
        self.input_tensors_key = input_tensors_key
        self.labels_key = labels_key
        self.embeddings_key = embeddings_key
        self.scheduler_monitor_metric = scheduler_monitor_metric
        self.freeze_n_epochs = freeze_n_epochs
        self.nan_policy = nan_policy
        self.gather_across_devices = gather_across_devices

    def forward(self, x: Tensor) -> Tensor:
        return self.extractor(x)

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> Tensor | None:
        if self.criterion is None:
            raise RuntimeError("ExtractorModule was built without a criterion, so it cannot be trained")
        embeddings = self.extractor(batch[self.input_tensors_key])
        batch_size = len(embeddings)
        with full_precision(embeddings.device):  # the loss in float32 under mixed precision
            embeddings, labels = to_full_precision(embeddings), batch[self.labels_key]
            if self.gather_across_devices:
                embeddings, labels = gather_across_devices(embeddings, labels)
            loss = finite_loss_or_none(self, self.criterion(embeddings, labels), self.nan_policy, embeddings)
        if loss is None:
            return None
        # sync_dist: in DDP the logs are the means over the processes (no-op on one device)
        logged: dict[str, Any] = {
            "on_step": True,
            "on_epoch": True,
            "batch_size": batch_size,
            "sync_dist": True,
        }
        self.log("loss", loss.detach(), prog_bar=True, **logged)
        for name, value in (getattr(self.criterion, "last_logs", None) or {}).items():
            self.log(name, float(value), **logged)
        log_learning_rate(self, self.optimizer, batch_size)
        return loss

    def _embed(self, batch: dict[str, Any]) -> dict[str, Any]:
        embeddings = to_full_precision(self.extractor.extract(batch[self.input_tensors_key]))
        return {self.embeddings_key: embeddings, "idx": batch["idx"]}

    def validation_step(
        self, batch: dict[str, Any], batch_idx: int, dataloader_idx: int = 0
    ) -> dict[str, Any]:
        return self._embed(batch)

    def predict_step(self, batch: dict[str, Any], batch_idx: int, dataloader_idx: int = 0) -> dict[str, Any]:
        return self._embed(batch)

    def configure_optimizers(self) -> Any:
        if self.optimizer is None:
            raise RuntimeError("ExtractorModule was built without an optimizer, so it cannot be trained")
        return optimizers_config(
            self.optimizer,
            self.scheduler,
            self.scheduler_interval,
            self.scheduler_frequency,
            self.scheduler_monitor_metric,
        )

    def on_train_epoch_start(self) -> None:
        freeze_for_epochs(self.extractor, self.current_epoch, self.freeze_n_epochs)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["oml_extractor_class"] = (
            f"{type(self.extractor).__module__}.{type(self.extractor).__qualname__}"
        )


class ExtractorModuleDDP(ExtractorModule, ModuleDDP):
    """This is a base module for the training of your model with Lightning in DDP.

    It is an :class:`ExtractorModule` that serves its loaders itself, patched to DDP in every process (see
    :class:`~oml_core.lightning.modules.ddp.ModuleDDP`): call ``trainer.fit(module)`` without loaders, with
    ``use_distributed_sampler=False``.

    Args:
        loaders_train: The training loader(s).
        loaders_val: The validation loader(s).
        loaders_predict: The prediction loader(s) (``trainer.predict(module)``).
        args, kwargs: The arguments of :class:`ExtractorModule` (``extractor``, ``criterion``, ``optimizer``,
            ``scheduler``, ``scheduler_interval``, ``scheduler_frequency``, ``input_tensors_key``,
            ``labels_key``, ``embeddings_key``, ``scheduler_monitor_metric``, ``freeze_n_epochs``, ``nan_policy``,
            ``gather_across_devices``).
    """

    def __init__(
        self,
        loaders_train: TLoaders | None = None,
        loaders_val: TLoaders | None = None,
        *args: Any,
        loaders_predict: TLoaders | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)  # ExtractorModule, then ModuleDDP without loaders
        self.set_loaders(loaders_train, loaders_val, loaders_predict)


__all__ = ["ExtractorModule", "ExtractorModuleDDP"]
