"""Every command that may load plugins runs under the vetting of :mod:`oml_core.registry.vetting`: a plugin that
exits, hangs or fails in its check is skipped with one warning, and one that hangs in the command itself ends the
command with one line (status 1, a plugin's bug) instead of hanging with it."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn

from oml_core.cli.errors import EXIT_INTERNAL
from oml_core.registry.manager import guarded_loading, timeout_from_env
from oml_core.registry.vetting import PluginVetting


def vetted(command: str, run: Callable[[], int]) -> Callable[[], int]:
    """``run`` (the command ``command``'s, ``oml registry``) under a :class:`~oml_core.registry.vetting.PluginVetting`
    whose time limit is ``OML_PLUGIN_TIMEOUT``; a malformed limit is the command's error (a ``ConfigError``)."""

    def run_vetted() -> int:
        vetting = PluginVetting(timeout=timeout_from_env(), end=lambda message: end_command(command, message))
        with guarded_loading(vetting):
            return run()

    return run_vetted


def end_command(command: str, message: str) -> NoReturn:
    """End the process at once (from any thread) with ``<command>: <message>`` on stderr and status 1: the main
    thread is stuck in a plugin and cannot be unwound."""
    try:
        sys.stdout.flush()
        print(f"{command}: {message}", file=sys.stderr, flush=True)
    finally:
        os._exit(EXIT_INTERNAL)


__all__ = ["end_command", "vetted"]
