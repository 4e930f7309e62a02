"""What the training modules (:class:`~oml_core.lightning.modules.extractor.ExtractorModule`,
:class:`~oml_core.lightning.modules.pairwise_postprocessing.PairwiseModule`) share about optimisation: the
check of their scheduling and freezing arguments, the value of ``configure_optimizers``, the logged learning
rate, the freezing of the trained model for the first epochs, and what a NaN or infinite loss does."""

from __future__ import annotations

from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_warn
from torch import Tensor, nn
from torch.optim import Optimizer

from oml_core.interfaces.models import IFreezable

#: When Lightning steps the scheduler: after every optimisation step, or after every epoch.
SCHEDULER_INTERVALS = ("step", "epoch")
#: What a NaN or infinite loss does: stop the run at that step, or skip the batch (no optimizer step).
NAN_POLICIES = ("stop", "skip_batch")


def check_optimization_args(
    model: nn.Module, model_kind: str, scheduler_interval: str, freeze_n_epochs: int, nan_policy: str = "stop"
) -> None:
    """Check a training module's ``scheduler_interval``, ``freeze_n_epochs`` and ``nan_policy`` for the
    ``model`` it trains.

    Args:
        model: The model the module trains (and freezes).
        model_kind: What ``model`` is, for the message (``"extractor"``, ``"pairwise model"``).
        scheduler_interval: One of :data:`SCHEDULER_INTERVALS`.
        freeze_n_epochs: The number of epochs ``model`` stays frozen.
        nan_policy: One of :data:`NAN_POLICIES`.

    Raises:
        ValueError: an unknown ``scheduler_interval`` or ``nan_policy``.
        TypeError: ``freeze_n_epochs > 0`` with a ``model`` that is not ``IFreezable``.
    """
    if scheduler_interval not in SCHEDULER_INTERVALS:
        raise ValueError(
            f"scheduler_interval must be one of {SCHEDULER_INTERVALS}, got {scheduler_interval!r}"
        )
    if nan_policy not in NAN_POLICIES:
        raise ValueError(f"nan_policy must be one of {NAN_POLICIES}, got {nan_policy!r}")
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


def finite_loss_or_none(module: pl.LightningModule, loss: Tensor, nan_policy: str) -> Tensor | None:
    """``loss`` when it is finite; else, by ``nan_policy`` (one of :data:`NAN_POLICIES`), stop the run or skip
    the batch (None, which makes Lightning skip the backward pass and the optimizer step; a warning names the
    step). In DDP the processes decide together: a non-finite loss in any of them counts for all.

    The check reads the loss's value, i.e. it waits for the step's forward pass on an accelerator.

    Raises:
        NonFiniteLossError: ``nan_policy="stop"`` and the loss is NaN or infinite; the message names the step,
            the epoch, the loss value and the learning rate(s) (the pipeline adds the last good checkpoint).
    """
    from oml_core.lightning.stops import NonFiniteLossError

    finite = bool(torch.isfinite(loss.detach()).all())
    trainer = attached_trainer(module)
    if trainer is not None and trainer.world_size > 1:
        finite = bool(trainer.strategy.reduce_boolean_decision(finite, all=True))
    if finite:
        return loss
    where = "outside a fit"
    if trainer is not None:
        batch = trainer.fit_loop.epoch_loop.batch_idx + 1
        where = f"at step {trainer.global_step + 1} (epoch {module.current_epoch}, batch {batch})"
    rates = sorted({group["lr"] for optimizer in _optimizers(module) for group in optimizer.param_groups})
    lr = ", ".join(f"{rate:g}" for rate in rates) or "unknown"
    what = f"{where} the loss is {float(loss.detach().float().mean()):g} (learning rate {lr})"
    if nan_policy == "skip_batch":
        rank_zero_warn(f"{what}: the batch is skipped (nan_policy: skip_batch)")
        return None
    raise NonFiniteLossError(f"{what}: training stopped (nan_policy: skip_batch skips such batches)")


def attached_trainer(module: pl.LightningModule) -> pl.Trainer | None:
    """The ``Trainer`` that ``module`` is attached to, or ``None`` outside a fit (Lightning's ``module.trainer``
    raises then)."""
    try:
        return module.trainer
    except RuntimeError:
        return None


def _optimizers(module: pl.LightningModule) -> list[Any]:
    if attached_trainer(module) is None:
        return []
    optimizers = module.optimizers(use_pl_optimizer=False)
    return list(optimizers) if isinstance(optimizers, list | tuple) else [optimizers]


def freeze_for_epochs(model: Any, current_epoch: int, freeze_n_epochs: int) -> None:
    """At the start of a training epoch: freeze the ``IFreezable`` ``model`` while ``current_epoch <
    freeze_n_epochs`` (epochs start at 0), unfreeze it afterwards; nothing when ``freeze_n_epochs`` is 0."""
    if freeze_n_epochs > 0:
        if current_epoch < freeze_n_epochs:
            model.freeze()
        else:
            model.unfreeze()


__all__ = [
    "NAN_POLICIES",
    "SCHEDULER_INTERVALS",
    "check_optimization_args",
    "finite_loss_or_none",
    "freeze_for_epochs",
    "log_learning_rate",
    "optimizers_config",
]
