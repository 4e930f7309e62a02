"""Checkpoints that survive a kill: ``AtomicCheckpointIO`` writes every checkpoint of a Trainer atomically, and
``LastCheckpoint`` keeps ``last.ckpt`` up to date after every epoch, every N steps and on an interrupt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from lightning_fabric.plugins import TorchCheckpointIO
from pytorch_lightning.callbacks import ModelCheckpoint

from oml_core.lightning.interrupts import InterruptRequest
from oml_core.lightning.stops import NonFiniteLossError, TrainingInterrupted
from oml_core.utils.atomic import atomic_torch_save, remove_stale_temporaries
from oml_core.utils.digest import verify_checkpoint

#: The file name of the checkpoint of the latest epoch or step.
LAST_CHECKPOINT_NAME = "last.ckpt"


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
    """Writes ``dirpath/last.ckpt`` so that a run killed at any moment can be resumed from close to where it was.

    - At the end of every training epoch (after that epoch's validation, so with its metrics and random state).
    - With ``every_n_steps``, after every that many training steps of an epoch too (but its last step, which
      the end of the epoch saves): a "step checkpoint" from which the epoch is resumed in the middle
      (the loader's :class:`~oml_core.lightning.resumable.ResumableBatchSampler` replays its order).
    - With an ``interrupt`` request set (SIGINT/SIGTERM, see :mod:`oml_core.lightning.interrupts`): after the
      current step, or at the end of the epoch when the request comes during its last step or its
      validation; then it raises :class:`~oml_core.lightning.stops.TrainingInterrupted` naming the file.

    Before every save the trained weights are checked: non-finite weights are never written over a good
    checkpoint (:class:`~oml_core.lightning.stops.NonFiniteLossError` instead).

    Every process of a DDP run must have it (only process 0 writes); the interrupt request of any process
    stops all of them at the same step.

    Args:
        dirpath: The checkpoints' directory.
        every_n_steps: Save every that many training steps within an epoch too (None: only at epoch ends).
        interrupt: The request that :func:`~oml_core.lightning.interrupts.graceful_interrupts` sets.

    Attributes:
        last_saved: The checkpoint written last by this callback (None before the first).
    """

    def __init__(
        self, dirpath: Path, every_n_steps: int | None = None, interrupt: InterruptRequest | None = None
    ) -> None:
        super().__init__()
        if every_n_steps is not None and (isinstance(every_n_steps, bool) or every_n_steps < 1):
            raise ValueError(f"every_n_steps must be None or a positive int, got {every_n_steps!r}")
        self.path = Path(dirpath) / LAST_CHECKPOINT_NAME
        self.every_n_steps = every_n_steps
        self.interrupt = interrupt or InterruptRequest()
        self.last_saved: Path | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.interrupt.take_over()  # over the SIGTERM handler that Lightning installed for the fit

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.fit_loop.epoch_loop.batch_progress.is_last_batch:
            return  # on_train_epoch_end saves (and stops) after the epoch's validation
        stop = self._stop_requested(trainer)
        step_due = self.every_n_steps is not None and (batch_idx + 1) % self.every_n_steps == 0
        if stop or step_due:
            self._save(trainer, pl_module)
        if stop:
            self._raise_interrupted(trainer)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._save(trainer, pl_module)
        if self._stop_requested(trainer):
            self._raise_interrupted(trainer)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.state.fn == "fit":
            self._check_weights(
                trainer, pl_module
            )  # diverged in the epoch's last step: stop before validating

    def _stop_requested(self, trainer: pl.Trainer) -> bool:
        """Whether any process was asked to stop (one decision for all processes of a DDP run)."""
        return bool(trainer.strategy.reduce_boolean_decision(self.interrupt.requested, all=False))

    def _check_weights(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Raise :class:`NonFiniteLossError` naming the first trained weight that is NaN or infinite."""
        bad = next((name for name, p in pl_module.named_parameters() if not torch.isfinite(p).all()), None)
        if bad is not None:
            raise NonFiniteLossError(
                f"after step {trainer.global_step} (epoch {trainer.current_epoch}) the weight {bad!r} is not "
                f"finite: the optimizer diverged (lower the learning rate)",
                self.last_saved,
            )

    def _save(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._check_weights(trainer, pl_module)
        trainer.save_checkpoint(self.path, weights_only=False)  # the whole training state
        self.last_saved = self.path

    def _raise_interrupted(self, trainer: pl.Trainer) -> None:
        signum = (
            self.interrupt.signum if self.interrupt.signum is not None else 2
        )  # another process's: SIGINT
        raise TrainingInterrupted(signum, self.path, epoch=trainer.current_epoch, step=trainer.global_step)


class BestCheckpoint(ModelCheckpoint):
    """Lightning's ``ModelCheckpoint`` that goes on from the best checkpoint of the run it resumes.

    A resumed run writes into a new directory (nothing of the run it resumes is overwritten). Lightning's
    ``ModelCheckpoint`` then reloads only ``best_model_path`` and forgets the best score (with a warning that
    "the dirpath has changed"), so the new run's ``best.ckpt`` would be the best of the epochs after the resume,
    even when an earlier epoch was better. Here the best score and the best checkpoints are reloaded whatever the
    directory: the resumed run writes ``best.ckpt`` in its own directory only for an epoch better than every
    earlier one, and until then its best checkpoint is the file of the run it resumed (which is never deleted:
    it lies outside this callback's directory).
    """

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best_model_score = state_dict["best_model_score"]
        self.best_model_path = state_dict["best_model_path"]
        self.kth_best_model_path = state_dict.get("kth_best_model_path", self.kth_best_model_path)
        self.kth_value = state_dict.get("kth_value", self.kth_value)
        self.best_k_models = state_dict.get("best_k_models", self.best_k_models)


__all__ = ["LAST_CHECKPOINT_NAME", "AtomicCheckpointIO", "BestCheckpoint", "LastCheckpoint"]
