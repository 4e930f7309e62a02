"""Why a training run stopped before its end, as exceptions that carry what a user needs to go on: the signal
or the loss at fault, the step, and the last good checkpoint (kept on disk)."""

from __future__ import annotations

import signal
from dataclasses import dataclass
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
        resume_overrides: ``key=value`` overrides that the command resuming the run adds (replacing those of the
            same keys), e.g. the one that switches off a callback that failed.
    """

    exit_code = 1
    resumable = False
    resume_overrides: tuple[str, ...] = ()

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


@dataclass(frozen=True)
class CallbackFailure:
    """A plugin's callback that failed in one of its hooks: it raised, or a stop signal came while it ran (a hang
    that Ctrl-C stopped).

    Attributes:
        callback: The callback, named with its qualified name, its plugin and distribution (and its config key
            when the config names it): ``the callback 'p:log' of the plugin p (p-dist 1.0)``.
        hook: The hook it was in (``on_train_epoch_end``).
        error: ``Type: message`` of what it raised; None when a signal stopped it.
        signum: The signal that stopped it; None when it raised.
        switch_off: The override that switches it off (``callbacks_disabled=[p:log]``); None for a callback that
            the config names in ``callbacks`` (its key is in ``callback``).
    """

    callback: str
    hook: str
    error: str | None = None
    signum: int | None = None
    switch_off: str | None = None

    def __str__(self) -> str:
        if self.signum is not None:
            return f"{signal.Signals(self.signum).name} received while {self.callback} was in {self.hook}"
        return f"{self.callback} failed in {self.hook}: {self.error}"


class CallbackFailed(TrainingStopped):
    """A plugin's callback failed (:class:`CallbackFailure`) and the run stopped: after the current step, saved to
    ``checkpoint`` (``step`` and ``epoch`` given), or at once, ``checkpoint`` being the last good one. It is
    resumed with the callback switched off (:attr:`resume_overrides`); a run whose training had ended
    (``finished``: the failure came after its last epoch was saved) is not resumable (nothing is left to train).

    ``exit_code``: ``128 + signal`` when a signal stopped the callback (130 for Ctrl-C), else 1 (a plugin's bug).
    """

    resumable = True

    def __init__(
        self,
        failure: CallbackFailure,
        checkpoint: Path | None = None,
        step: int | None = None,
        epoch: int | None = None,
        finished: bool = False,
    ) -> None:
        self.failure = failure
        self.exit_code = 128 + failure.signum if failure.signum is not None else 1
        self.resume_overrides = (failure.switch_off,) if failure.switch_off else ()
        self.resumable = checkpoint is not None and not finished
        if finished:
            where = f"the training had ended; its last checkpoint: {checkpoint}"
        elif step is not None:
            where = f"stopped after step {step} (epoch {epoch})"
        elif checkpoint is not None:
            where = f"last good checkpoint: {checkpoint}"
        else:
            where = "nothing was saved yet"
        if not self.resumable and failure.switch_off:
            where += f" (to run without it: {failure.switch_off})"
        super().__init__(f"{failure}; {where}", checkpoint)

    def with_checkpoint(self, checkpoint: Path | None) -> CallbackFailed:
        """The same failure, naming ``checkpoint`` as the last good one."""
        return CallbackFailed(self.failure, checkpoint)


__all__ = [
    "CallbackFailed",
    "CallbackFailure",
    "NonFiniteLossError",
    "TrainingInterrupted",
    "TrainingStopped",
]
