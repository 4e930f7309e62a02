"""Whether the output of this process goes to a terminal (so that progress bars, which redraw themselves with
carriage returns, are drawn only there)."""

from __future__ import annotations

import sys
from typing import TextIO


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal; False for a closed stream or for one without ``isatty``."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def on_terminal() -> bool:
    """Whether the run's output is on a terminal: ``sys.stdout`` and ``sys.stderr``, as they are now, both are
    (a file, a pipe or a capture of either is not)."""
    return is_terminal(sys.stdout) and is_terminal(sys.stderr)


__all__ = ["is_terminal", "on_terminal"]
