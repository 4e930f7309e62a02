"""``PairwiseModule``: trains a pairwise model (a re-ranker such as STIR's ``ConcatSiamese``) on the pairs a
miner finds in batches of an extractor's cached embeddings."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
from torch import Tensor, nn
from torch.optim import Optimizer

from oml_core.interfaces.miners import IPairsMiner
from oml_core.interfaces.models import IPairwiseModel
from oml_core.lightning.modules.ddp import ModuleDDP, TLoaders
from oml_core.lightning.modules.optimization import (
    check_optimization_args,
    finite_loss_or_none,
    freeze_for_epochs,
    log_learning_rate,
    optimizers_config,
)


class PairwiseModule(pl.LightningModule):
    """This is a module to train a pairwise model (a post-processor of retrieval results) with Lightning.

    Training: ``ids1, ids2, is_negative = pairs_miner.sample(batch[embeddings_key], batch[labels_key])`` mines
    the pairs of the batch on the extractor's embeddings (with hard mining: the pairs the extractor struggles
    with most); the pairwise model gets the IMAGES of the pairs, ``logits = pairwise_model(x1=x[ids1],
    x2=x[ids2])`` with ``x = batch[input_tensors_key]``, and ``loss = criterion(logits, is_negative.float())``
    (``BCEWithLogitsLoss``: the model learns to score a negative pair high). A batch without any pair makes
    no optimisation step.

    Validation: returns ``{embeddings_key: batch[embeddings_key], "idx": batch["idx"]}``, the cached embeddings,
    which :class:`~oml_core.lightning.callbacks.metric.MetricValCallback` accumulates; its metric re-ranks the
    retrieval results with a post-processor that holds this module's :attr:`model`, so the metrics are those of
    the model as trained so far, on the module's device.

    Args:
        pairwise_model: Pairwise model to train (kept as :attr:`model`: a checkpoint of the module holds its
            weights under ``model.``, which the pairwise models' ``weights`` argument strips).
        pairs_miner: Miner of pairs (``None`` for validation only).
        criterion: Criterion to optimise, e.g. ``BCEWithLogitsLoss`` (``None`` for validation only).
        optimizer: Optimizer (``None`` for validation only).
        scheduler: Learning-rate scheduler.
        scheduler_interval: Interval of calling the scheduler (``step`` or ``epoch``).
        scheduler_frequency: Frequency of calling the scheduler.
        input_tensors_key: Key to get the images from the batches.
        labels_key: Key to get the labels from the batches.
        embeddings_key: Key to get the embeddings from the batches.
        scheduler_monitor_metric: Metric to monitor for the schedulers that depend on a metric value.
        freeze_n_epochs: Number of epochs to keep the model frozen (it must be ``IFreezable``); it is unfrozen
            when ``current_epoch >= freeze_n_epochs`` (epochs start at 0).
        nan_policy: A NaN or infinite loss ``stop``-s the run (``NonFiniteLossError``) or ``skip_batch``-es
            that batch (see :func:`~oml_core.lightning.modules.optimization.finite_loss_or_none`).

    Raises:
        ValueError: an unknown ``scheduler_interval`` or ``nan_policy``.
        TypeError: ``freeze_n_epochs > 0`` with a model that is not ``IFreezable``.
    """

    def __init__(
        self,
        pairwise_model: IPairwiseModel,
        pairs_miner: IPairsMiner | None = None,
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
    ):
        super().__init__()
        check_optimization_args(
            pairwise_model, "pairwise model", scheduler_interval, freeze_n_epochs, nan_policy
        )
        self.model = pairwise_model
        self.miner = pairs_miner
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

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> Tensor | None:
        if self.miner is None or self.criterion is None:
            raise RuntimeError("PairwiseModule was built without a pairs miner or criterion: it cannot train")
        ids1, ids2, is_negative = self.miner.sample(batch[self.embeddings_key], batch[self.labels_key])
        if len(ids1) == 0:
            return None  # Lightning skips the optimisation step
        images = batch[self.input_tensors_key]
        logits = self.model(x1=images[ids1], x2=images[ids2])
        loss = finite_loss_or_none(
            self, self.criterion(logits, is_negative.float().to(logits.device)), self.nan_policy, logits
        )
        if loss is None:
            return None
        batch_size = len(batch[self.labels_key])
        self.log("loss", loss.detach(), prog_bar=True, on_step=True, on_epoch=True, batch_size=batch_size)
        self.log("n_pairs", float(len(ids1)), on_step=True, on_epoch=True, batch_size=batch_size)
        log_learning_rate(self, self.optimizer, batch_size)
        return loss

    def validation_step(
        self, batch: dict[str, Any], batch_idx: int, dataloader_idx: int = 0
    ) -> dict[str, Any]:
        # the post-processor runs the model when the metric is computed, after the last batch
        return {self.embeddings_key: batch[self.embeddings_key], "idx": batch["idx"]}

    def configure_optimizers(self) -> Any:
        if self.optimizer is None:
            raise RuntimeError("PairwiseModule was built without an optimizer, so it cannot be trained")
        return optimizers_config(
            self.optimizer,
            self.scheduler,
            self.scheduler_interval,
            self.scheduler_frequency,
            self.scheduler_monitor_metric,
        )

    def on_train_epoch_start(self) -> None:
        freeze_for_epochs(self.model, self.current_epoch, self.freeze_n_epochs)


class PairwiseModuleDDP(PairwiseModule, ModuleDDP):
    """:class:`PairwiseModule` for DDP: it serves its loaders itself, patched to DDP in every process (see
    :class:`~oml_core.lightning.modules.ddp.ModuleDDP`): call ``trainer.fit(module)`` without loaders, with
    ``use_distributed_sampler=False``.

    Args:
        loaders_train: The training loader(s).
        loaders_val: The validation loader(s).
        loaders_predict: The prediction loader(s).
        args, kwargs: The arguments of :class:`PairwiseModule` (``pairwise_model``, ``pairs_miner``,
            ``criterion``, ``optimizer``, ...).
    """

    def __init__(
        self,
        loaders_train: TLoaders | None = None,
        loaders_val: TLoaders | None = None,
        *args: Any,
        loaders_predict: TLoaders | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)  # PairwiseModule, then ModuleDDP without loaders
        self.set_loaders(loaders_train, loaders_val, loaders_predict)


__all__ = ["PairwiseModule", "PairwiseModuleDDP"]
