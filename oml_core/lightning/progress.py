"""Whether a run draws progress bars: only on a terminal, unless the config says.

A progress bar redraws itself with carriage returns; written into a file or a pipe (``oml train > log.txt
2>&1``, a CI job, ``nohup``) it becomes one long line of every state it went through (32 KB for the default
training). So by default the pipelines draw bars only when the run is on a terminal: stdout, where Lightning's
``TQDMProgressBar`` draws, and stderr, where the image check's bar goes (tqdm's default), are both terminals.
Otherwise there are no bars, and a training run prints one line per epoch instead (see
:class:`~oml_core.lightning.callbacks.epoch_summary.EpochSummary`). A config's
``lightning_trainer_extra_args.enable_progress_bar: true`` or ``false`` decides instead; ``null`` (the default
configs' value) or no such key is the automatic choice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from oml_core.utils.terminal import is_terminal, on_terminal

if TYPE_CHECKING:
    import pytorch_lightning as pl

#: The ``pl.Trainer`` argument (and key of ``lightning_trainer_extra_args``) of the progress bar.
PROGRESS_BAR_ARG = "enable_progress_bar"


def progress_bar_enabled(trainer_args: Mapping[str, Any] | None) -> bool:
    """Whether to draw progress bars, for Trainer arguments or a config's ``lightning_trainer_extra_args``
    (None for none): their ``enable_progress_bar`` when it is true or false, else (absent or None) whether the
    run is on a terminal (:func:`on_terminal`)."""
    value = (trainer_args or {}).get(PROGRESS_BAR_ARG)
    return on_terminal() if value is None else bool(value)


def progress_bar_callbacks(trainer_args: Mapping[str, Any]) -> list[pl.Callback]:
    """The progress bar of a Trainer built with ``trainer_args`` (whose ``enable_progress_bar`` the pipelines
    always set): ``[TQDMProgressBar()]`` when it draws one, else none. Named, because Lightning's own choice is
    ``RichProgressBar`` whenever ``rich`` can be imported (other packages' command lines install it), and a run's
    output must not depend on what else is installed."""
    from pytorch_lightning.callbacks import TQDMProgressBar

    return [TQDMProgressBar()] if trainer_args.get(PROGRESS_BAR_ARG, True) else []


__all__ = ["PROGRESS_BAR_ARG", "is_terminal", "on_terminal", "progress_bar_callbacks", "progress_bar_enabled"]
