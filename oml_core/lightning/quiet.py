"""Quiet runs: the messages of the libraries under oml that its users cannot act on, and where they are hidden.

- :data:`UPSTREAM_WARNINGS`: Python warnings raised inside torch or Lightning, whatever the user does (torch's
  deprecation of ``LeafSpec``, which Lightning builds in every step).
- :data:`LIGHTNING_CHATTER`: the lines Lightning logs for every Trainer: its tips (``💡 Tip: ... litlogger``,
  once per Trainer, so three times in ``oml train-postprocessor``), the accelerator banners (``GPU available:
  ...``, ``TPU available: ...``, ``LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0]``) and ``Trainer.fit stopped:
  max_epochs=N reached`` at the normal end of every training.

:func:`quiet_lightning` hides both within a block and puts everything back afterwards: the pipelines run in it
(as a decorator, ``@quiet_lightning()``), so that a Python user calling a pipeline sees neither, and a
Trainer of the user's own, outside a pipeline, is left as Lightning made it. Every other warning and log line
(Lightning's own warnings, a resumed checkpoint's "Restoring states ...") still shows. The chatter is hidden by
a :class:`logging.Filter` on the loggers Lightning writes it to (:data:`LIGHTNING_LOGGERS`), the warnings by
``warnings.catch_warnings``.

:func:`silence_upstream_warnings` hides the warnings for the rest of the process (the ``oml`` command line calls
it first thing).

This module imports neither torch nor Lightning: the command line imports it before it knows whether a pipeline
will run.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import warnings
from collections.abc import Iterator, Sequence

#: Warnings of the libraries under oml that its users cannot act on: ``(category, message regex)``. PyTorch
#: Lightning builds torch's deprecated ``LeafSpec`` in every step (its ``CombinedLoader`` flattens every batch);
#: it warns that it cannot check a custom batch sampler for prediction, which oml's ``DDPSamplerWrapper`` is (it
#: returns every index: the last share is padded, never dropped).
UPSTREAM_WARNINGS: tuple[tuple[type[Warning], str], ...] = (
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),
    (UserWarning, r"You are using a custom batch sampler `DDPSamplerWrapper` for prediction"),
)
#: Lightning's log lines of every run that tell a user nothing about it (regexes, searched in the message): its
#: advertisements, the accelerator banners (the config's ``accelerator`` and ``devices`` say what is used;
#: ``check_engine`` fails on what the machine lacks) and the normal end of a training.
LIGHTNING_CHATTER: tuple[str, ...] = (
    r"^\W*Tip: ",  # "💡 Tip: For seamless cloud logging ... litlogger", "... litmodels"
    r"^[GTHI]PU available: ",
    r"^LOCAL_RANK: \d+ - CUDA_VISIBLE_DEVICES: ",
    r"^`Trainer\.fit` stopped: `max_epochs=\d+` reached\.$",
)
#: The loggers Lightning writes :data:`LIGHTNING_CHATTER` to: its ``rank_zero_info`` (whose logger is that of
#: ``lightning_fabric`` or ``pytorch_lightning``, the one imported last) and the CUDA accelerator's; the same
#: under the unified ``lightning`` package.
LIGHTNING_LOGGERS: tuple[str, ...] = (
    "pytorch_lightning.utilities.rank_zero",
    "lightning_fabric.utilities.rank_zero",
    "lightning_utilities.core.rank_zero",
    "pytorch_lightning.accelerators.cuda",
    "lightning.pytorch.utilities.rank_zero",
    "lightning.fabric.utilities.rank_zero",
    "lightning.pytorch.accelerators.cuda",
)


class DropMessages(logging.Filter):
    """A logging filter that drops the records whose message matches one of ``patterns`` (``re.search``) and
    lets every other record through.

    Args:
        patterns: Regular expressions.
    """

    def __init__(self, patterns: Sequence[str]) -> None:
        super().__init__()
        self.patterns = [re.compile(pattern) for pattern in patterns]

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(pattern.search(message) for pattern in self.patterns)


def silence_upstream_warnings() -> None:
    """Ignore the warnings of :data:`UPSTREAM_WARNINGS` from now on, in the whole process (only those: any other
    warning is still shown). For the command line; library code uses :func:`quiet_lightning`."""
    _ignore_upstream_warnings()


@contextlib.contextmanager
def quiet_lightning() -> Iterator[None]:
    """Within the block (or the function it decorates), hide :data:`UPSTREAM_WARNINGS` and Lightning's
    :data:`LIGHTNING_CHATTER`; on the way out the warning filters and the loggers are as they were.

    Blocks may nest. The warning filters are process-wide while the block runs (as ``warnings.catch_warnings``
    makes them): a thread that warns meanwhile is filtered too.
    """
    chatter = DropMessages(LIGHTNING_CHATTER)
    loggers = _lightning_loggers()
    for logger in loggers:
        logger.addFilter(chatter)
    try:
        with warnings.catch_warnings():
            _ignore_upstream_warnings()
            yield
    finally:
        for logger in loggers:
            logger.removeFilter(chatter)


def _ignore_upstream_warnings() -> None:
    for category, message in UPSTREAM_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)


def _lightning_loggers() -> list[logging.Logger]:
    """The loggers of :data:`LIGHTNING_LOGGERS`, and the one Lightning's ``rank_zero_info`` uses now when it is
    another (read from the module when it is imported; it is never imported here)."""
    loggers = [logging.getLogger(name) for name in LIGHTNING_LOGGERS]
    rank_zero = sys.modules.get("lightning_utilities.core.rank_zero")
    current = getattr(rank_zero, "log", None)
    if isinstance(current, logging.Logger) and current not in loggers:
        loggers.append(current)
    return loggers


__all__ = [
    "LIGHTNING_CHATTER",
    "LIGHTNING_LOGGERS",
    "UPSTREAM_WARNINGS",
    "DropMessages",
    "quiet_lightning",
    "silence_upstream_warnings",
]
