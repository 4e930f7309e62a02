"""Messages of the core's library code: logged, never printed.

Library modules log to ``get_logger(__name__)``, children of the package logger ``oml_core``
(:data:`PACKAGE_LOGGER`). Unless the application has configured that logger (given it a handler of its own)
before, the package logger gets a default output, as Lightning gives its own logger one: its ``INFO`` messages
and above are written as they are (no level or name prefix) to ``sys.stdout``, looked up at every message so
that redirections and pytest's capture apply, and not propagated to the root logger (no message twice).

What the user sees is decided by the application, e.g. the command line: ``logging.getLogger("oml_core")
.setLevel(logging.WARNING)`` hides the summaries, and removing :class:`StdoutHandler` from that logger (then
``propagate = True``) hands the messages to the application's own logging configuration.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

#: The logger that every library module's logger descends from.
PACKAGE_LOGGER = "oml_core"


class StdoutHandler(logging.StreamHandler):
    """Writes every record's message, as it is, to the ``sys.stdout`` of the moment (as ``print`` would)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self) -> TextIO:
        return sys.stdout

    @stream.setter
    def stream(self, value: TextIO) -> None:
        """Ignored: the stream is always the current ``sys.stdout``."""


def _default_output() -> None:
    """Give the package logger :class:`StdoutHandler` at ``INFO``, unless it already has a handler."""
    package = logging.getLogger(PACKAGE_LOGGER)
    if package.handlers:
        return
    package.addHandler(StdoutHandler())
    package.setLevel(logging.INFO)
    package.propagate = False


_default_output()


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` for a module of the core (``name``: its ``__name__``, under ``oml_core``),
    the package logger having its default output (see the module's docstring)."""
    return logging.getLogger(name)


__all__ = ["PACKAGE_LOGGER", "StdoutHandler", "get_logger"]
