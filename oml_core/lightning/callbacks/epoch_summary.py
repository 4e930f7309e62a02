"""``EpochSummary``: one line per training epoch, for runs without a progress bar (logs written to a file).

epoch 3/24: loss 0.1234, OVERALL/cmc/1 0.8750, 2.1 s
"""

from __future__ import annotations

import time
from typing import Any

import pytorch_lightning as pl

from oml_core.utils.logs import get_logger

log = get_logger(__name__)

#: What the training modules log their epoch's mean loss as (``self.log("loss", on_epoch=True)``).
LOSS_KEY = "loss_epoch"


def format_epoch_summary(
    epoch: int,
    max_epochs: int | None,
    loss: float | None,
    seconds: float,
    metric: tuple[str, float] | None = None,
) -> str:
    """``epoch 3/24: loss 0.1234, OVERALL/cmc/1 0.8750, 2.1 s``: the epoch (counted from 1) of ``max_epochs``
    (left out when None or negative: no limit), its mean ``loss`` (left out when None), the ``(name, value)`` of
    a ``metric`` (left out when None) and the epoch's wall time."""
    of = f"/{max_epochs}" if max_epochs is not None and max_epochs >= 0 else ""
    parts = [] if loss is None else [f"loss {loss:.4f}"]
    if metric is not None:
        parts.append(f"{metric[0]} {metric[1]:.4f}")
    parts.append(f"{seconds:.1f} s")
    return f"epoch {epoch}{of}: {', '.join(parts)}"


class EpochSummary(pl.Callback):
    """Prints :func:`format_epoch_summary` at the end of every training epoch (in the main process only): the
    epoch's mean loss (the logged ``loss_key``), the value of ``monitor`` when the epoch validated, and the
    epoch's time, its validation included.

    The training pipelines add it instead of a progress bar (see
    :func:`~oml_core.lightning.pipelines.shared.training.progress_callbacks`), so that a log written to a file has a
    line per epoch rather than a bar's every redraw. The end of an epoch that a resumed run replays (Lightning
    ends again an epoch whose checkpoint was written at its end, without training or validating) prints nothing:
    its line was printed by the run that trained it.

    Args:
        monitor: The metric to show after a validation (the run's ``metric_for_checkpointing``), or None.
        loss_key: The logged value shown as the loss.
    """

    def __init__(self, monitor: str | None = None, loss_key: str = LOSS_KEY) -> None:
        super().__init__()
        self.monitor = monitor
        self.loss_key = loss_key
        self._started = time.perf_counter()
        self._validated = False
        self._batches = 0

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._started = time.perf_counter()  # a resumed epoch starts here: no on_train_epoch_start
        self._validated = False
        self._batches = 0

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._batches += 1

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.on_train_start(trainer, pl_module)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:
            self._validated = True

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._batches == 0 and not self._validated:
            return  # a replayed epoch end (the same decision on every process)
        # every process reads the metrics: under DDP reading them reduces the values logged with sync_dist,
        # a collective that would wait forever for processes that skipped it; only the main process prints
        logged = trainer.callback_metrics
        if not trainer.is_global_zero:
            return
        metric = None
        if self._validated and self.monitor is not None and self.monitor in logged:
            metric = (self.monitor, float(logged[self.monitor]))
        loss = float(logged[self.loss_key]) if self.loss_key in logged else None
        line = format_epoch_summary(
            trainer.current_epoch + 1, trainer.max_epochs, loss, time.perf_counter() - self._started, metric
        )
        log.info(line)


__all__ = ["LOSS_KEY", "EpochSummary", "format_epoch_summary"]
