"""``oml NAME ...`` where NAME is a command that a plugin registered (``oml_register_commands``, a ``command`` row
of its table; ``oml serve`` is one): the plugin's command gets its own parser and its errors are reported as every
command's are."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from oml_core.cli.errors import EXIT_USAGE, flushed, is_user_error, reporting_errors, unknown_command
from oml_core.cli.guard import vetted
from oml_core.cli.parser import CommandParser, common_parser
from oml_core.registry import Registry, UnknownNameError
from oml_core.registry.registry import FAILED_COMPONENT_ATTR, failed_component


def run_plugin_command(name: str, argv: Sequence[str], commands: Sequence[str]) -> int:
    """Run ``oml ... NAME ...``, where ``NAME`` is none of oml's ``commands``: the plugins are loaded and the
    command ``NAME`` that one registered (``oml_register_commands``; ``plugin:NAME`` names one of two) gets its own
    parser (``oml NAME``, with ``--traceback``) from its factory, which returns the handler, called with the
    arguments parsed (those before ``NAME`` too); its status (None: 0) is the exit status. Errors are reported as
    every command's are (:func:`~oml_core.cli.errors.error_report`); a name no plugin registered is the one-line
    ``unknown command`` error, listing the plugins' commands. The plugins are loaded under the vetting of
    :mod:`~oml_core.cli.guard`."""
    args = argparse.Namespace()
    position = list(argv).index(name)
    arguments = [*argv[:position], *argv[position + 1 :]]

    def run() -> int:
        registry = Registry()
        try:
            entry = registry.get("command", name)
        except UnknownNameError:
            print(
                f"oml: error: {unknown_command(name, commands, registry.names('command'))}", file=sys.stderr
            )
            return EXIT_USAGE
        parser = CommandParser(
            prog=f"oml {entry.name}", description=entry.description, parents=[common_parser()]
        )
        handler = registry.build("command", entry.qualified_name, parser=parser)
        try:
            parser.parse_args(arguments, namespace=args)
        except (
            SystemExit
        ) as e:  # --help (0) or a bad command line (2, reported on one line by CommandParser.error)
            return flushed(e.code if isinstance(e.code, int) else EXIT_USAGE)
        try:
            status = handler(args)
        except Exception as e:  # a bug of the plugin's command is named as such (a user error stays one)
            if not is_user_error(e) and failed_component(e) is None:
                setattr(e, FAILED_COMPONENT_ATTR, entry)
            raise
        return 0 if status is None else int(status)

    return reporting_errors(f"oml {name}", vetted(f"oml {name}", run), args, argv)


__all__ = ["run_plugin_command"]
