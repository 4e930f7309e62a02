"""Checkpoints that survive a kill: ``AtomicCheckpointIO`` writes every checkpoint of a Trainer atomically,
``BestCheckpoint`` keeps ``best.ckpt`` (the best validation so far) and ``LastCheckpoint`` keeps ``last.ckpt`` up
to date on a time cadence, at the end, every N steps and on an interrupt, always after the epoch's ``best.ckpt``."""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from lightning_fabric.plugins import TorchCheckpointIO
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.trainer.states import TrainerFn

from oml_core.lightning.interrupts import InterruptRequest
from oml_core.lightning.stops import CallbackFailed, NonFiniteLossError, TrainingInterrupted
from oml_core.utils.atomic import atomic_torch_save, remove_stale_temporaries
from oml_core.utils.digest import CorruptCheckpointError, verify_checkpoint
from oml_core.utils.misc_torch import first_non_finite as first_non_finite_tensor

#: The file name of the checkpoint of the latest epoch or step.
LAST_CHECKPOINT_NAME = "last.ckpt"
#: The file name of the checkpoint of the best validation.
BEST_CHECKPOINT_NAME = "best.ckpt"
#: How often ``last.ckpt`` is written by default (the config key ``checkpoint_every_seconds``), as Lightning's
#: ``ModelCheckpoint(train_time_interval=...)`` would: a kill loses at most that much training.
DEFAULT_CHECKPOINT_EVERY_SECONDS = 60.0


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint IO for local files, with every write atomic (``oml_core.utils.atomic``): a
    temporary file in the same directory, flushed, ``fsync``-ed and renamed over the checkpoint. A kill or a
    full disk while saving leaves the previous checkpoint whole under its name and no truncated file
    (:func:`~oml_core.utils.atomic.atomic_torch_save`). Every checkpoint carries the sha256 of its bytes
    (:mod:`oml_core.utils.digest`), checked before it is loaded.

    Give it to the Trainer: ``pl.Trainer(plugins=[AtomicCheckpointIO()])``; every checkpoint the Trainer
    writes (``ModelCheckpoint``'s ``best.ckpt``, :class:`LastCheckpoint`'s, ``trainer.save_checkpoint``) or
    loads (``fit(ckpt_path=...)``, ``validate(ckpt_path="best")``) goes through it.

    Raises (from ``save_checkpoint``):
        AtomicWriteError: the file could not be written (the message names it and the cause, e.g. "No space
            left on device", and says that the previous file is intact).

    Raises (from ``load_checkpoint``):
        CorruptCheckpointError: the file's bytes are not the ones written (the message names it).
    """

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        """Write ``checkpoint`` to ``path`` atomically, with its digest; first remove the temporary files that
        killed writes left in its directory (:func:`~oml_core.utils.atomic.remove_stale_temporaries`)."""
        if storage_options is not None:
            raise TypeError(
                f"AtomicCheckpointIO.save_checkpoint takes no storage_options, got {storage_options!r}"
            )
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(path.parent)
        atomic_torch_save(checkpoint, path)

    def load_checkpoint(self, path: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """Lightning's ``load_checkpoint`` (its arguments), once the file's digest is checked
        (:func:`~oml_core.utils.digest.verify_checkpoint`; a file without oml's digest is loaded as before)."""
        if Path(path).is_file():  # else Lightning's own FileNotFoundError
            verify_checkpoint(path)
        return super().load_checkpoint(path, *args, **kwargs)


class LastCheckpoint(pl.Callback):
    """Writes ``dirpath/last.ckpt`` so that a run killed at any moment can be resumed from close to where it was,
    at a cost that does not grow with the number of epochs.

    - On a time cadence: at the end of an epoch (after its validation, so with its metrics, its ``best.ckpt``
      and its random state) once ``every_seconds`` have passed since the last write; with ``every_seconds`` 0
      at the end of every epoch. An epoch longer than that is saved in its middle too, after the step at which
      the time is up (a "step checkpoint", from which the epoch is resumed in the middle: the loader's
      :class:`~oml_core.lightning.resumable.ResumableBatchSampler` replays its order).
    - At the end of training: after the last epoch (``max_epochs``), or when the Trainer stops early
      (``should_stop``, ``max_steps``).
    - With ``every_n_steps``, after every that many training steps of an epoch too (but its last step, which
      the end of the epoch handles).
    - With an ``interrupt`` request set (SIGINT/SIGTERM, see :mod:`oml_core.lightning.interrupts`): after the
      current step, or at the end of the epoch when the request comes during its last step or its validation
      (so after that epoch's ``best.ckpt``); then it raises :class:`~oml_core.lightning.stops.TrainingInterrupted`
      naming the file. A request during the last epoch's end lets the run finish (it is done anyway).
    - With a plugin's callback that failed (the request's ``failure``, see
      :mod:`~oml_core.lightning.callbacks.guard`): as with an interrupt, but it raises
      :class:`~oml_core.lightning.stops.CallbackFailed`, at the end of the last epoch too.

    A resumed run starts from a state that is on disk already: the end of an epoch that the restart replays is
    not written again. Before every save the trained weights are checked (:func:`check_finite_weights`):
    non-finite weights are never written over a good checkpoint
    (:class:`~oml_core.lightning.stops.NonFiniteLossError` instead).

    Every process of a DDP run must have it (only process 0 writes): whether to stop and whether the time is up
    are decided once for all processes (any process's request or clock decides, reduced at every step and epoch
    end), so that every process saves and stops at the same step.

    Args:
        dirpath: The checkpoints' directory.
        every_n_steps: Save every that many training steps within an epoch too (None: not by steps).
        every_seconds: Save once that many seconds have passed since the last save (the start of training
            counts as one); 0: at the end of every epoch, and never by time within an epoch.
        interrupt: The request that :func:`~oml_core.lightning.interrupts.graceful_interrupts` (and the guards of
            the plugins' callbacks) set.
        clock: Seconds of a monotonic clock (for tests).

    Attributes:
        last_saved: The checkpoint written last by this callback (None before the first).
        saved_step: The ``global_step`` of that write (None before the first).
        saves: How many times it wrote ``last.ckpt``.
    """

    def __init__(
        self,
        dirpath: Path,
        every_n_steps: int | None = None,
        every_seconds: float = DEFAULT_CHECKPOINT_EVERY_SECONDS,
        interrupt: InterruptRequest | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        if every_n_steps is not None and (isinstance(every_n_steps, bool) or every_n_steps < 1):
            raise ValueError(f"every_n_steps must be None or a positive int, got {every_n_steps!r}")
        if isinstance(every_seconds, bool) or not every_seconds >= 0:
            raise ValueError(f"every_seconds must be a number >= 0, got {every_seconds!r}")
        self.path = Path(dirpath) / LAST_CHECKPOINT_NAME
        self.every_n_steps = every_n_steps
        self.every_seconds = float(every_seconds)
        self.interrupt = interrupt or InterruptRequest()
        self.clock = clock
        self.last_saved: Path | None = None
        self.saved_step: int | None = None
        self.saves = 0
        self._saved_at = clock()
        self._trained = False

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.interrupt.take_over()  # over the SIGTERM handler that Lightning installed for the fit
        self._saved_at = self.clock()
        self._trained = False  # no batch yet: the state is the initial one, or the resumed checkpoint's

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._trained = True
        if trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
            return  # on_train_epoch_end saves (and stops) after the epoch's validation and best.ckpt
        stop, time_up = self._decide(trainer)
        step_due = self.every_n_steps is not None and (batch_idx + 1) % self.every_n_steps == 0
        if stop or step_due or time_up:
            self._save(trainer, pl_module)
        if stop:
            self._raise_interrupted(trainer)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        stop, time_up = self._decide(trainer)
        ends = self._training_ends(trainer)
        # an epoch end that a resumed run replays (no batch since the start) is on disk already
        if stop or (self._trained and (self.every_seconds == 0 or time_up or ends)):
            self._save(trainer, pl_module)
        # a plugin's callback that failed is said even at the end of the last epoch
        if stop and (not ends or self.interrupt.failure is not None):
            self._raise_interrupted(trainer)

    def _decide(self, trainer: pl.Trainer) -> tuple[bool, bool]:
        """``(stop, time_up)``: whether any process was asked to stop, and whether ``every_seconds`` have passed
        since the last save on any process's clock (never with ``every_seconds`` 0); one decision for all the
        processes of a DDP run (one reduction)."""
        stop = self.interrupt.requested
        time_up = self.every_seconds > 0 and self.clock() - self._saved_at >= self.every_seconds
        if trainer.world_size == 1:
            return stop, time_up
        flags = torch.tensor([int(stop), int(time_up)], device=trainer.strategy.root_device)
        flags = trainer.strategy.reduce(flags, reduce_op="sum")
        return bool(flags[0] > 0), bool(flags[1] > 0)

    @staticmethod
    def _training_ends(trainer: pl.Trainer) -> bool:
        """Whether the epoch that ends is the run's last: ``max_epochs`` reached, the Trainer asked to stop
        (early stopping, ``max_time``) or ``max_steps`` reached."""
        max_epochs = trainer.max_epochs
        last_epoch = max_epochs is not None and max_epochs >= 0 and trainer.current_epoch + 1 >= max_epochs
        max_steps = trainer.max_steps
        return last_epoch or trainer.should_stop or (max_steps >= 0 and trainer.global_step >= max_steps)

    def _save(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        check_finite_weights(trainer, pl_module, self.last_saved)
        trainer.save_checkpoint(self.path, weights_only=False)  # the whole training state
        self.last_saved = self.path
        self.saved_step = trainer.global_step
        self.saves += 1
        self._saved_at = self.clock()

    def _raise_interrupted(self, trainer: pl.Trainer) -> None:
        """Raise :class:`~oml_core.lightning.stops.CallbackFailed` for a plugin's callback that failed, else
        :class:`~oml_core.lightning.stops.TrainingInterrupted`; both name :attr:`path`, just written."""
        failure = self.interrupt.failure
        if failure is not None:
            ends = self._training_ends(trainer)
            raise CallbackFailed(
                failure, self.path, trainer.global_step, trainer.current_epoch, finished=ends
            )
        signum = (
            self.interrupt.signum if self.interrupt.signum is not None else 2
        )  # another process's: SIGINT
        raise TrainingInterrupted(signum, self.path, epoch=trainer.current_epoch, step=trainer.global_step)


def check_finite_weights(trainer: pl.Trainer, pl_module: pl.LightningModule, last_good: Path | None) -> None:
    """Before a checkpoint is written: raise :class:`~oml_core.lightning.stops.NonFiniteLossError` naming the first
    trained weight that is NaN or infinite (:func:`first_non_finite`) and ``last_good``, the last checkpoint
    written (the training pipelines name the right one, see
    :func:`~oml_core.lightning.pipelines.shared.training.fit_keeping_checkpoints`)."""
    bad = first_non_finite(pl_module)
    if bad is not None:
        raise NonFiniteLossError(
            f"after step {trainer.global_step} (epoch {trainer.current_epoch}) the weight {bad!r} is not "
            f"finite: the optimizer diverged (lower the learning rate)",
            last_good,
        )


def first_non_finite(module: torch.nn.Module) -> str | None:
    """The name of the first parameter of ``module`` that has a NaN or infinite value, or None (see
    :func:`oml_core.utils.misc_torch.first_non_finite`)."""
    return first_non_finite_tensor(module.named_parameters())


class BestCheckpoint(ModelCheckpoint):
    """``dirpath/best.ckpt``: the whole training state at the validation with the best ``monitor`` so far.

    It is written at the end of a validation during training (before the epoch's ``last.ckpt``, which thus
    records it) whenever ``monitor`` is strictly better than at every earlier validation of the run (the
    larger for ``mode="max"``; NaN never is), so that ``best.ckpt`` and ``last.ckpt`` agree at every moment a
    run can stop gracefully. It is Lightning's ``ModelCheckpoint`` (``best_model_path``, ``best_model_score``,
    ``best_k_models``, the loggers' ``after_save_checkpoint``) with that rule, and it also records the epoch it
    holds (:attr:`best_epoch`, counted from 1) and that validation's metrics (:attr:`best_metrics`). Diverged
    weights are never written (:func:`check_finite_weights`). Under DDP every process decides alike (the
    decision is reduced; only process 0 writes).

    On a resume (the run's own folder), the best state is that of the resumed checkpoint, except when
    ``best.ckpt`` was written after it (a kill between a new best and the next ``last.ckpt``, which is written on
    a time cadence): then the state recorded in ``best.ckpt`` itself is taken, so that the best score, epoch and
    metrics are those of the file (its digest is checked first; a corrupt ``best.ckpt`` is forgotten, with a
    warning, and written anew at the next validation). With ``carry_over`` false (a resume on other data) no
    earlier best is taken: the first validation writes ``best.ckpt``.

    Args:
        dirpath: The checkpoints' directory.
        monitor: The logged metric (``metric_for_checkpointing``).
        mode: ``"max"`` or ``"min"``: whether larger or smaller values are better.
        metrics: Gives the metrics of the validation that just ended (kept in :attr:`best_metrics`).
        carry_over: Whether a resumed run goes on from the best of the run it resumes.

    Attributes:
        last_saved: The file this callback wrote (None before it wrote one; a resumed run's ``best.ckpt`` is
            :attr:`best_model_path` but not this).
        saved_step: The ``global_step`` of that write (None before the first).
        saves: How many times it wrote ``best.ckpt``.
    """

    def __init__(
        self,
        dirpath: Path,
        monitor: str,
        mode: str = "max",
        metrics: Callable[[], Mapping[str, float]] | None = None,
        carry_over: bool = True,
    ) -> None:
        super().__init__(
            dirpath=dirpath,
            filename=Path(BEST_CHECKPOINT_NAME).stem,
            monitor=monitor,
            mode=mode,
            save_top_k=1,
            auto_insert_metric_name=False,
            save_on_train_epoch_end=False,
            enable_version_counter=False,
        )
        self.metrics = metrics
        self.carry_over = carry_over
        self.best_epoch: int | None = None
        self.best_metrics: dict[str, float] = {}
        self.last_saved: Path | None = None
        self.saved_step: int | None = None
        self.saves = 0

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return
        current = trainer.callback_metrics.get(self.monitor) if self.monitor is not None else None
        better = current is not None and self.is_better(float(current))
        if not trainer.strategy.reduce_boolean_decision(better, all=True):
            return
        assert current is not None and self.dirpath is not None
        check_finite_weights(trainer, pl_module, None)  # never a best.ckpt of diverged weights
        path = str(Path(self.dirpath) / BEST_CHECKPOINT_NAME)
        score = current.detach().to("cpu", torch.float32).clone()
        self.best_model_path = self.kth_best_model_path = path
        self.best_model_score = self.kth_value = self.current_score = score
        self.best_k_models = {path: score}
        self.best_epoch = trainer.current_epoch + 1
        self.best_metrics = {
            key: float(value) for key, value in (self.metrics() if self.metrics else {}).items()
        }
        trainer.save_checkpoint(path, weights_only=self.save_weights_only)
        self.last_saved, self.saved_step = Path(path), trainer.global_step
        self.saves += 1
        if trainer.is_global_zero:  # as ModelCheckpoint tells the loggers (those that upload checkpoints)
            for logger in trainer.loggers:
                logger.after_save_checkpoint(self)

    def is_better(self, value: float) -> bool:
        """Whether ``value`` of ``monitor`` beats the best so far (any finite value when there is none)."""
        if not math.isfinite(value):
            return False
        if self.best_model_score is None:
            return True
        best = float(self.best_model_score)
        return value > best if self.mode == "max" else value < best

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "best_epoch": self.best_epoch,
            "best_metrics": dict(self.best_metrics),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take the best state of a resumed checkpoint (whatever its ``dirpath``), unless ``carry_over`` is false."""
        if not self.carry_over:
            return
        self.best_model_score = state_dict["best_model_score"]
        self.best_model_path = state_dict["best_model_path"]
        self.kth_best_model_path = state_dict.get("kth_best_model_path", self.kth_best_model_path)
        self.kth_value = state_dict.get("kth_value", self.kth_value)
        self.best_k_models = state_dict.get("best_k_models", self.best_k_models)
        self.best_epoch = state_dict.get("best_epoch")
        self.best_metrics = dict(state_dict.get("best_metrics") or {})

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        """When ``best.ckpt`` is newer than the resumed checkpoint (a later ``global_step``), put its own best
        state in place of the resumed one's (see the class); a corrupt ``best.ckpt`` clears the best state."""
        if not self.carry_over or self.dirpath is None:
            return
        path = Path(self.dirpath) / BEST_CHECKPOINT_NAME
        if not path.is_file():
            return
        states = checkpoint.setdefault("callbacks", {})
        try:
            verify_checkpoint(path)
        except CorruptCheckpointError as error:
            warnings.warn(f"{error}; it is written anew at the next validation", stacklevel=2)
            states.pop(self.state_key, None)  # no best state: the next validation is the best so far
            return
        best = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        own = best.get("callbacks", {}).get(self.state_key)
        if own is not None and best.get("global_step", -1) > checkpoint.get("global_step", -1):
            states[self.state_key] = own


__all__ = [
    "BEST_CHECKPOINT_NAME",
    "DEFAULT_CHECKPOINT_EVERY_SECONDS",
    "LAST_CHECKPOINT_NAME",
    "AtomicCheckpointIO",
    "BestCheckpoint",
    "LastCheckpoint",
    "check_finite_weights",
    "first_non_finite",
]
