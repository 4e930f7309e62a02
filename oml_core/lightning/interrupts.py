"""Stopping a training run on SIGINT (Ctrl-C) or SIGTERM without losing it.

Within :func:`graceful_interrupts` the first SIGINT or SIGTERM only *asks* the run to stop: the training goes
on to the end of its current step (or, during an epoch's last step and its validation, to the end of the
epoch, after that epoch's ``best.ckpt``), saves ``last.ckpt`` there, whatever its time cadence, and raises
:class:`~oml_core.lightning.stops.TrainingInterrupted` (see
:class:`~oml_core.lightning.callbacks.checkpoint.LastCheckpoint`); at the end of the last epoch the run simply
finishes. A second signal ends the process at once
with status ``128 + signal`` (the checkpoints written so far are whole: they are written atomically).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

#: The signals that stop a run gracefully.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class InterruptRequest:
    """The first stop signal received (``signum``, None until one is), set by the handler that
    :func:`graceful_interrupts` installs and read by the checkpoint callback.

    Attributes:
        active: Whether :func:`graceful_interrupts` has installed the handler (and may install it again, see
            :meth:`take_over`).
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.active = False

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        """The signal handler: the first signal is recorded (and said on stderr), a second one exits at once."""
        name = signal.Signals(signum).name
        if self.signum is not None:
            sys.stderr.write(
                f"\n{name} received again: exiting at once (checkpoints written so far are kept)\n"
            )
            sys.stderr.flush()
            os._exit(128 + signum)
        self.signum = signum
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


__all__ = ["STOP_SIGNALS", "InterruptRequest", "graceful_interrupts"]
