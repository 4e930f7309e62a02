"""What the training modules (:class:`~oml_core.lightning.modules.extractor.ExtractorModule`,
:class:`~oml_core.lightning.modules.pairwise_postprocessing.PairwiseModule`) share about optimisation: the
check of their scheduling and freezing arguments, the value of ``configure_optimizers``, the logged learning
rate, and the freezing of the trained model for the first epochs."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
from torch import nn
from torch.optim import Optimizer

from oml_core.interfaces.models import IFreezable

#: When Lightning steps the scheduler: after every optimisation step, or after every epoch.
SCHEDULER_INTERVALS = ("step", "epoch")


def check_optimization_args(
    model: nn.Module, model_kind: str, scheduler_interval: str, freeze_n_epochs: int
) -> None:
    """Check a training module's ``scheduler_interval`` and ``freeze_n_epochs`` for the ``model`` it trains.

    Args:
        model: The model the module trains (and freezes).
        model_kind: What ``model`` is, for the message (``"extractor"``, ``"pairwise model"``).
        scheduler_interval: One of :data:`SCHEDULER_INTERVALS`.
        freeze_n_epochs: The number of epochs ``model`` stays frozen.

    Raises:
        ValueError: an unknown ``scheduler_interval``.
        TypeError: ``freeze_n_epochs > 0`` with a ``model`` that is not ``IFreezable``.
    """
    if scheduler_interval not in SCHEDULER_INTERVALS:
        raise ValueError(
            f"scheduler_interval must be one of {SCHEDULER_INTERVALS}, got {scheduler_interval!r}"
        )
    if freeze_n_epochs > 0 and not isinstance(model, IFreezable):
        raise TypeError(
            f"freeze_n_epochs={freeze_n_epochs} needs an IFreezable {model_kind}, got {type(model).__name__}"
        )


def optimizers_config(
    optimizer: Optimizer,
    scheduler: Any | None,
    interval: str,
    frequency: int,
    monitor: str | None,
) -> Any:
    """What ``configure_optimizers`` returns: the optimizer alone, or with Lightning's scheduler dict
    (``interval``, ``frequency``, and ``monitor`` when a scheduler depends on a metric)."""
    if scheduler is None:
        return optimizer
    config: dict[str, Any] = {"scheduler": scheduler, "interval": interval, "frequency": frequency}
    if monitor is not None:
        config["monitor"] = monitor
    return {"optimizer": optimizer, "lr_scheduler": config}


def log_learning_rate(module: pl.LightningModule, optimizer: Optimizer | None, batch_size: int) -> None:
    """Log the learning rate of the first parameter group of ``optimizer`` as ``lr`` on every step (nothing
    without an optimizer)."""
    if optimizer is not None:
        module.log("lr", optimizer.param_groups[0]["lr"], on_step=True, on_epoch=False, batch_size=batch_size)


def freeze_for_epochs(model: Any, current_epoch: int, freeze_n_epochs: int) -> None:
    """At the start of a training epoch: freeze the ``IFreezable`` ``model`` while ``current_epoch <
    freeze_n_epochs`` (epochs start at 0), unfreeze it afterwards; nothing when ``freeze_n_epochs`` is 0."""
    if freeze_n_epochs > 0:
        if current_epoch < freeze_n_epochs:
            model.freeze()
        else:
            model.unfreeze()


__all__ = [
    "SCHEDULER_INTERVALS",
    "check_optimization_args",
    "freeze_for_epochs",
    "log_learning_rate",
    "optimizers_config",
]
