"""Why a training run stopped before its end, as exceptions that carry what a user needs to go on: the signal
or the loss at fault, the step, and the last good checkpoint (kept on disk)."""

from __future__ import annotations

import signal
from pathlib import Path


class TrainingStopped(RuntimeError):
    """A training run stopped early, on purpose; the checkpoints written before it are intact.

    Attributes:
        checkpoint: The last good checkpoint: the last one the run wrote (``last.ckpt``, or ``best.ckpt`` when
            it is the newer), else the checkpoint it resumed from when its digest was verified; None when there
            is none (a file never verified is never called good).
        exit_code: The exit status the command line gives it.
        resumable: Whether resuming from ``checkpoint`` goes on with the run as it was (an interrupt), or
            something must change first (a diverged loss).
    """

    exit_code = 1
    resumable = False

    def __init__(self, message: str, checkpoint: Path | None = None) -> None:
        super().__init__(message)
        self.checkpoint = checkpoint


class TrainingInterrupted(TrainingStopped):
    """SIGINT or SIGTERM stopped the run after its current step, which was saved to ``checkpoint``.

    ``exit_code`` is ``128 + signal``: 130 for SIGINT, 143 for SIGTERM (the shell's convention).
    """

    resumable = True

    def __init__(self, signum: int, checkpoint: Path | None, epoch: int, step: int) -> None:
        self.signum = signum
        self.exit_code = 128 + signum
        name = signal.Signals(signum).name
        super().__init__(f"{name} received: stopped after step {step} (epoch {epoch})", checkpoint)
        self.signal_name = name


class NonFiniteLossError(TrainingStopped):
    """The loss (or the weights) became NaN or infinite at a step; the run stopped there, and nothing was
    saved from that step on (the earlier ``last.ckpt`` and ``best.ckpt`` are kept)."""

    def __init__(self, message: str, checkpoint: Path | None = None) -> None:
        super().__init__(message, checkpoint)
        self.detail = message

    def with_checkpoint(self, checkpoint: Path | None) -> NonFiniteLossError:
        """The same error, naming ``checkpoint`` as the last good one."""
        return NonFiniteLossError(self.detail, checkpoint)

    def __str__(self) -> str:
        last = str(self.checkpoint) if self.checkpoint else "none written yet"
        return f"{self.detail}; last good checkpoint: {last}"


__all__ = ["NonFiniteLossError", "TrainingInterrupted", "TrainingStopped"]
