"""Plugins' callbacks, guarded: one that raises in a hook, or hangs there until Ctrl-C, stops the run with one line
naming it (its qualified name, plugin and distribution) and the hook, the run's state saved first.

:func:`guard_callback` wraps every hook that the callback's class overrides, on the instance (its class, so its
``state_key`` and what Lightning takes it for, stay the same). When a hook raises (anything but a
``KeyboardInterrupt``), or a stop signal comes while it runs
(:class:`~oml_core.lightning.interrupts.CallbackInterrupted`):

- the callback is switched off: its hooks are ``pl.Callback``'s from then on (nothing; no state in the
  checkpoints), so that it neither fails nor hangs again while the run stops;
- the run's :class:`~oml_core.lightning.interrupts.InterruptRequest` records the failure (the first one);
- within an epoch of a fit (:data:`EPOCH_HOOKS`) and while a checkpoint is written (:data:`SAVE_HOOKS`: the file
  goes without the callback's state), the run goes on to its next save point as on an interrupt:
  :class:`~oml_core.lightning.callbacks.checkpoint.LastCheckpoint` saves ``last.ckpt`` after the current step (or
  at the end of the epoch, from its last step or its validation) and raises
  :class:`~oml_core.lightning.stops.CallbackFailed`;
- after the last epoch of a fit was saved (:data:`END_HOOKS`), the fit ends and the error is raised then
  (:func:`~oml_core.lightning.pipelines.shared.training.fit_keeping_checkpoints`);
- anywhere else (before the first step, loading a checkpoint, a validation before training) it raises
  :class:`~oml_core.lightning.stops.CallbackFailed` at once: nothing was trained since the last checkpoint. In
  ``on_exception`` nothing is raised: the run ends with its own error.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.trainer.states import TrainerFn

from oml_core.lightning.interrupts import CallbackInterrupted, InterruptRequest
from oml_core.lightning.stops import CallbackFailed, CallbackFailure, TrainingStopped
from oml_core.registry.errors import describe_error, is_plugin_failure
from oml_core.utils.text import one_line

#: The hooks a callback may override (``pl.Callback``'s).
HOOKS = tuple(
    name for name, value in vars(pl.Callback).items() if callable(value) and not name.startswith("_")
)
#: The hooks within an epoch of a fit: a failure there stops the run at its next save point.
EPOCH_HOOKS = frozenset(
    {
        "on_train_epoch_start",
        "on_train_batch_start",
        "on_before_backward",
        "on_after_backward",
        "on_before_optimizer_step",
        "on_before_zero_grad",
        "on_train_batch_end",
        "on_train_epoch_end",
        "on_validation_start",
        "on_validation_epoch_start",
        "on_validation_batch_start",
        "on_validation_batch_end",
        "on_validation_epoch_end",
        "on_validation_end",
    }
)
#: The hooks of a fit after its last epoch was saved: a failure there is raised when the fit ends.
END_HOOKS = frozenset({"on_train_end", "on_fit_end", "teardown"})
#: The hooks that give a checkpoint the callback's part: a failure there leaves it out of the file.
SAVE_HOOKS = frozenset({"state_dict", "on_save_checkpoint"})


def guard_callback(
    callback: pl.Callback, name: str, switch_off: str | None = None, *, request: InterruptRequest
) -> pl.Callback:
    """Guard the hooks of ``callback`` (see the module) and return it.

    Args:
        callback: A plugin's callback.
        name: How messages name it: ``the callback 'p:log' of the plugin p (p-dist 1.0)``.
        switch_off: The override that switches it off (``callbacks_disabled=[p:log]``), None when there is none.
        request: The run's request to stop, which records the failure and which the checkpoint callback reads.

    Hooks, once guarded, raise:
        CallbackFailed: the callback failed outside an epoch of a fit (see the module).
    """
    guard = _Guard(name, request, switch_off)
    for hook in HOOKS:
        if getattr(type(callback), hook, None) is not getattr(pl.Callback, hook):
            base = getattr(pl.Callback, hook).__get__(callback)  # what the callback does once switched off
            setattr(callback, hook, guard.guarded(hook, getattr(callback, hook), base))
    return callback


class _Guard:
    """The state of one guarded callback: its name, whether it failed, and the run's request."""

    def __init__(self, name: str, request: InterruptRequest, switch_off: str | None) -> None:
        self.name = name
        self.request = request
        self.switch_off = switch_off
        self.failed = False

    def guarded(self, hook: str, method: Callable[..., Any], base: Callable[..., Any]) -> Callable[..., Any]:
        """``method`` (the callback's ``hook``) guarded; ``base`` runs instead once the callback failed."""

        @functools.wraps(method)
        def run(*args: Any, **kwargs: Any) -> Any:
            if self.failed:
                return base(*args, **kwargs)
            outer = self.request.in_callback  # a hook may run another callback's (a save: their state_dict)
            try:
                self.request.in_callback = f"{hook} of {self.name}"
                try:
                    return method(*args, **kwargs)
                finally:  # a signal until this is done is still this hook's: the handlers below get it
                    self.request.in_callback = outer
            except TrainingStopped:  # oml's own stop, or a callback's failure raised within this hook
                raise
            except CallbackInterrupted as stop:
                self._fail(hook, args, self._failure(hook, signum=stop.signum), stop)
            except BaseException as error:
                if not is_plugin_failure(error):
                    raise
                self._fail(hook, args, self._failure(hook, error=one_line(describe_error(error))), error)
            return base(*args, **kwargs)

        return run

    def _failure(self, hook: str, error: str | None = None, signum: int | None = None) -> CallbackFailure:
        return CallbackFailure(self.name, hook, error, signum, self.switch_off)

    def _fail(self, hook: str, args: tuple[Any, ...], failure: CallbackFailure, error: BaseException) -> None:
        """Switch the callback off and record ``failure``; raise the run's first failure at once unless the run
        stops at its next save point (see the module)."""
        self.failed = True
        self.request.failure = self.request.failure or failure
        in_fit = hook in EPOCH_HOOKS | END_HOOKS and _fitting(args[0] if args else None)
        if in_fit or hook in SAVE_HOOKS or hook == "on_exception":
            return
        raise CallbackFailed(self.request.failure) from error


def _fitting(trainer: Any) -> bool:
    """Whether ``trainer`` is in a fit's epochs (not in its sanity check, nor in a ``validate``)."""
    state = getattr(trainer, "state", None)
    return state is not None and state.fn == TrainerFn.FITTING and not trainer.sanity_checking


__all__ = ["END_HOOKS", "EPOCH_HOOKS", "HOOKS", "SAVE_HOOKS", "guard_callback"]
