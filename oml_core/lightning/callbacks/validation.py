"""When a training run validates, and what every validation gave: ``ValidateAfterLastEpoch`` and
``ValidationHistory``."""

from __future__ import annotations

import math
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.trainer.states import TrainerFn

from oml_core.lightning.callbacks.metric import MetricValCallback

#: The epoch under which :class:`ValidationHistory` keeps a validation run before training (``trainer.validate``).
START_EPOCH = 0


class ValidateAfterLastEpoch(pl.Callback):
    """Validate after the last epoch (``max_epochs``) whatever the Trainer's ``check_val_every_n_epoch``.

    With ``max_epochs=1`` and ``check_val_every_n_epoch=4`` Lightning never validates, so a run would end with no
    metrics and no best checkpoint. When the last epoch starts this callback sets the Trainer's
    ``check_val_every_n_epoch`` to 1 (Lightning reads it at the end of every epoch), and puts the period back
    when training ends. A run resumed in the middle of its last epoch gets it too: Lightning does not call
    ``on_train_epoch_start`` for an epoch it restarts in the middle, so the check is made when training starts as
    well. A Trainer that validates by steps (``check_val_every_n_epoch=None``) is left alone.
    """

    def __init__(self) -> None:
        super().__init__()
        self._period: int | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._validate_if_last(trainer)

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._validate_if_last(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._period is not None:
            trainer.check_val_every_n_epoch = self._period
            self._period = None

    def _validate_if_last(self, trainer: pl.Trainer) -> None:
        period = trainer.check_val_every_n_epoch
        max_epochs = trainer.max_epochs
        if period is None or max_epochs is None or max_epochs < 0:
            return
        if trainer.current_epoch + 1 >= max_epochs and period != 1:
            self._period = period
            trainer.check_val_every_n_epoch = 1


class ValidationHistory(pl.Callback):
    """The metrics of every validation of a run, by epoch: ``0`` for a validation before training
    (``trainer.validate`` before ``trainer.fit``), ``n`` for the one after the ``n``-th training epoch.

    It reads the metrics that ``metric_callback`` computed (:attr:`MetricValCallback.last_metrics`) when a
    validation ends (Lightning's sanity check is not kept). The history is part of the checkpoints (the callback's
    state), so a resumed run knows its start and earlier epochs; with ``carry_over`` false (a run resumed on
    other data) the resumed checkpoint's history is dropped, so that only validations on the new data are kept.

    Args:
        metric_callback: The callback that computes the validation metrics.
        carry_over: Whether a resumed run takes the history of the checkpoint it resumes.
    """

    def __init__(self, metric_callback: MetricValCallback, carry_over: bool = True) -> None:
        super().__init__()
        self.metric_callback = metric_callback
        self.carry_over = carry_over
        self.epochs: dict[int, dict[str, float]] = {}

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or not self.metric_callback.last_metrics:
            return
        epoch = START_EPOCH if trainer.state.fn == TrainerFn.VALIDATING else trainer.current_epoch + 1
        self.epochs[epoch] = dict(self.metric_callback.last_metrics)

    @property
    def start(self) -> dict[str, float] | None:
        """The metrics before training, or None when the run did not validate before training."""
        return self.epochs.get(START_EPOCH)

    @property
    def last_epoch(self) -> int | None:
        """The last training epoch that was validated, or None."""
        trained = [epoch for epoch in self.epochs if epoch != START_EPOCH]
        return max(trained) if trained else None

    def best_epoch(self, metric: str, mode: str) -> int | None:
        """The training epoch with the best value of ``metric`` (the largest for ``mode="max"``, the smallest for
        ``"min"``; the first of equal ones and no NaN, as Lightning's ``ModelCheckpoint`` chooses ``best.ckpt``),
        or None when no training epoch has it.

        Raises:
            ValueError: ``mode`` is neither ``"max"`` nor ``"min"``.
        """
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        sign = 1.0 if mode == "max" else -1.0
        best: int | None = None
        for epoch in sorted(self.epochs):
            value = self.epochs[epoch].get(metric)
            if epoch == START_EPOCH or value is None or math.isnan(value):
                continue
            if best is None or sign * value > sign * self.epochs[best][metric]:
                best = epoch
        return best

    def state_dict(self) -> dict[str, Any]:
        return {"epochs": {epoch: dict(metrics) for epoch, metrics in self.epochs.items()}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self.carry_over:
            return
        self.epochs = {int(epoch): dict(metrics) for epoch, metrics in state_dict.get("epochs", {}).items()}


__all__ = ["START_EPOCH", "ValidateAfterLastEpoch", "ValidationHistory"]
