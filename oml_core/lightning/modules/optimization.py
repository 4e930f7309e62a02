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

from oml_core.config.options import NAN_POLICIES, SCHEDULER_INTERVALS
from oml_core.interfaces.models import IFreezable
from oml_core.utils.misc_torch import first_non_finite

#: ``nan_policy: skip_batch`` stops the run at this many non-finite losses in a row: the skipped batches leave the
#: weights as they were, so batch after batch failing with the same weights means the weights, not the data, are
#: at fault (a learning rate too high), and the rest of the run would be skipped too.
MAX_SKIPPED_IN_A_ROW = 5
#: The attribute of a training module that counts its batches skipped in a row (see :func:`finite_loss_or_none`).
_SKIPPED_IN_A_ROW_ATTR = "_oml_skipped_in_a_row"


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


def finite_loss_or_none(
    module: pl.LightningModule, loss: Tensor, nan_policy: str, outputs: Tensor | None = None
) -> Tensor | None:
    """``loss`` when it is finite; else, by ``nan_policy`` (one of :data:`NAN_POLICIES`), stop the run or skip
    the batch (None, which makes Lightning skip the backward pass and the optimizer step; a warning names the
    step). In DDP the processes decide together: a non-finite loss in any of them counts for all.

    ``skip_batch`` skips a batch only while skipping can help, and stops the run as ``stop`` does as soon as it
    cannot (in DDP: in any process), that is when

    1. a weight of ``module`` (a parameter or a buffer, such as the running statistics of a batch norm) is NaN
       or infinite itself, or the model's ``outputs`` for the batch (its embeddings, from which the loss was
       computed) are: the weights are broken or so large that the forward pass overflows, and every later loss,
       and the validation, would be NaN too;
    2. :data:`MAX_SKIPPED_IN_A_ROW` batches in a row had a non-finite loss: skipped batches leave the weights as
       they were, so the weights (a learning rate too high), not the data, are at fault;
    3. or the last batch of an epoch is skipped, as every other batch of that epoch was: nothing was trained.

    The batches skipped in a row are counted on ``module`` (a finite loss resets the count).

    The check reads the loss's value, i.e. it waits for the step's forward pass on an accelerator.

    Raises:
        NonFiniteLossError: the loss is NaN or infinite and ``nan_policy="stop"``, or ``skip_batch`` cannot help;
            the message names the step, the epoch, the loss value and the learning rate(s), and why skipping
            cannot help (the pipeline adds the last good checkpoint).
    """
    from oml_core.lightning.stops import NonFiniteLossError

    finite = bool(torch.isfinite(loss.detach()).all())
    trainer = attached_trainer(module)
    if trainer is not None and trainer.world_size > 1:
        finite = bool(trainer.strategy.reduce_boolean_decision(finite, all=True))
    if finite:
        if getattr(module, _SKIPPED_IN_A_ROW_ATTR, 0):
            setattr(module, _SKIPPED_IN_A_ROW_ATTR, 0)
        return loss
    where = "outside a fit"
    if trainer is not None:
        batch = trainer.fit_loop.epoch_loop.batch_idx + 1
        where = f"at step {trainer.global_step + 1} (epoch {module.current_epoch}, batch {batch})"
    rates = sorted({group["lr"] for optimizer in _optimizers(module) for group in optimizer.param_groups})
    lr = ", ".join(f"{rate:g}" for rate in rates) or "unknown"
    what = f"{where} the loss is {float(loss.detach().float().mean()):g} (learning rate {lr})"
    if nan_policy != "skip_batch":
        raise NonFiniteLossError(f"{what}: training stopped (nan_policy: skip_batch skips such batches)")
    skipped = getattr(module, _SKIPPED_IN_A_ROW_ATTR, 0) + 1
    why = _skipping_cannot_help(module, trainer, skipped, outputs)
    if trainer is not None and trainer.world_size > 1:  # one process's reason (its batch norm) stops them all
        if trainer.strategy.reduce_boolean_decision(why is not None, all=False):
            why = why or "and skipping cannot help in another process"
    if why is not None:
        raise NonFiniteLossError(
            f"{what}, {why}: training stopped (nan_policy: skip_batch cannot help); lower the learning rate"
        )
    setattr(module, _SKIPPED_IN_A_ROW_ATTR, skipped)
    rank_zero_warn(f"{what}: the batch is skipped (nan_policy: skip_batch)")
    return None


def _skipping_cannot_help(
    module: pl.LightningModule, trainer: pl.Trainer | None, skipped: int, outputs: Tensor | None
) -> str | None:
    """Why skipping the current batch, the ``skipped``-th in a row with a non-finite loss, of the model's
    ``outputs``, cannot help (the rules of :func:`finite_loss_or_none`), or None when it can."""
    bad_weight = first_non_finite(module.state_dict().items())
    if bad_weight is not None:
        return f"and the weight {bad_weight!r} is not finite itself"
    if outputs is not None and not bool(torch.isfinite(outputs.detach()).all()):
        return "and so are the model's outputs (the forward pass overflows: the weights are too large)"
    if skipped >= MAX_SKIPPED_IN_A_ROW:
        return f"{skipped} batches in a row with a non-finite loss"
    if trainer is not None:
        batch = trainer.fit_loop.epoch_loop.batch_idx + 1
        if batch == trainer.num_training_batches and skipped >= batch:
            return f"as was every batch of epoch {module.current_epoch} ({batch} batches, nothing trained)"
    return None


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
    "MAX_SKIPPED_IN_A_ROW",
    "NAN_POLICIES",
    "SCHEDULER_INTERVALS",
    "check_optimization_args",
    "finite_loss_or_none",
    "freeze_for_epochs",
    "log_learning_rate",
    "optimizers_config",
]
