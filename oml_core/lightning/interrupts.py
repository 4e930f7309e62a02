"""Stopping a training run on SIGINT (Ctrl-C) or SIGTERM without losing it.

Within :func:`graceful_interrupts` the first SIGINT or SIGTERM only *asks* the run to stop: the training goes
on to the end of its current step (or, during an epoch's last step and its validation, to the end of the
epoch, after that epoch's ``best.ckpt``), saves ``last.ckpt`` there, whatever its time cadence, and raises
:class:`~oml_core.lightning.stops.TrainingInterrupted` (see
:class:`~oml_core.lightning.callbacks.checkpoint.LastCheckpoint`); at the end of the last epoch the run simply
finishes. A second signal ends the process at once
with status ``128 + signal`` (the checkpoints written so far are whole: they are written atomically).

A signal that comes while a plugin's callback is in one of its hooks (one that hangs) stops that hook at once: the
handler raises :class:`CallbackInterrupted` there, which the callback's guard turns into a stop of the run naming
the callback (:mod:`oml_core.lightning.callbacks.guard`), so that one Ctrl-C is enough.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from oml_core.lightning.stops import CallbackFailure

#: The signals that stop a run gracefully.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class CallbackInterrupted(BaseException):  # noqa: N818 (a signal, like KeyboardInterrupt)
    """Raised by :meth:`InterruptRequest.handle` in the hook of a plugin's callback that a stop signal came in;
    the callback's guard catches it. A ``BaseException``, as ``KeyboardInterrupt`` is, so that a hook's
    ``except Exception`` does not swallow it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class InterruptRequest:
    """Why the run is asked to stop: the first stop signal received (``signum``, None until one is), set by the
    handler that :func:`graceful_interrupts` installs, or a plugin's callback that failed (``failure``, set by its
    guard); read by the checkpoint callback.

    Attributes:
        active: Whether :func:`graceful_interrupts` has installed the handler (and may install it again, see
            :meth:`take_over`).
        failure: The first plugin's callback that failed (:mod:`oml_core.lightning.callbacks.guard`), or None.
        in_callback: The hook of a plugin's callback running now (``on_train_epoch_end of the callback ...``),
            set by its guard; a first signal then raises :class:`CallbackInterrupted` there.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.active = False
        self.failure: CallbackFailure | None = None
        self.in_callback: str | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None or self.failure is not None

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        """The signal handler: the first signal is recorded (and said on stderr), a second one exits at once.

        Raises:
            CallbackInterrupted: the first signal came while a plugin's callback was in a hook
                (:attr:`in_callback`).
        """
        name = signal.Signals(signum).name
        if self.signum is not None:
            sys.stderr.write(
                f"\n{name} received again: exiting at once (checkpoints written so far are kept)\n"
            )
            sys.stderr.flush()
            os._exit(128 + signum)
        self.signum = signum
        if self.in_callback is not None:
            sys.stderr.write(
                f"\n{name} received in {self.in_callback}: the callback is stopped and switched off, the run "
                f"stops (send it again to exit at once)\n"
            )
            sys.stderr.flush()
            raise CallbackInterrupted(signum)
        sys.stderr.write(
            f"\n{name} received: the run stops after its current step and saves last.ckpt "
            f"(send it again to exit at once)\n"
        )
        sys.stderr.flush()

    def take_over(self) -> None:
        """Install :meth:`handle` for :data:`STOP_SIGNALS` again, when :func:`graceful_interrupts` is active.

        Lightning installs a SIGTERM handler of its own when a fit starts, which makes the loop leave at the
        end of the step with ``SystemExit`` (status 0) and nothing saved; the checkpoint callback calls this
        once the fit has started, so that SIGTERM is handled as SIGINT is. Lightning puts back the handler it
        found (this one) when the fit ends.
        """
        if self.active and threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                signal.signal(signum, self.handle)


@contextlib.contextmanager
def graceful_interrupts(request: InterruptRequest) -> Iterator[InterruptRequest]:
    """Within the block, SIGINT and SIGTERM set ``request`` instead of ending the process (see the module);
    the previous handlers are restored afterwards. Outside the main thread (where Python cannot install signal
    handlers) the block runs with the handlers as they are."""
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {signum: signal.signal(signum, request.handle) for signum in STOP_SIGNALS}
    request.active = True
    try:
        yield request
    finally:
        request.active = False
        for signum, handler in previous.items():
            signal.signal(signum, handler)


__all__ = ["STOP_SIGNALS", "CallbackInterrupted", "InterruptRequest", "graceful_interrupts"]
