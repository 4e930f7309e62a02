"""The parser of ``oml``'s commands: argparse's, with errors on one line (:class:`CommandParser`), and the options
every command takes (:func:`common_parser`). Each command's module adds its own parser to the top one
(:mod:`oml_core.cli.commands`)."""

from __future__ import annotations

import argparse
from typing import Any

from oml_core.cli.errors import EXIT_USAGE, TRACEBACK_ENV
from oml_core.utils.text import one_line

#: The subparsers of ``oml``, to which each command's module adds its parser (``add_parser(subparsers)``).
Subparsers = argparse._SubParsersAction


class CommandParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line, ``oml COMMAND: error: <message>``, exit status 2 (no usage:
    ``oml COMMAND --help`` shows it); ``commands`` are the names of the commands (set on the top parser). The help
    of a parser given ``config_keys_of`` (a pipeline's name, or ``index_build``) ends with the "config keys"
    section of that schema (:func:`~oml_core.config.reference.help_section`), written when the help is shown, so
    that building the parser imports no schema."""

    commands: list[str]

    def __init__(self, *args: Any, config_keys_of: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.config_keys_of = config_keys_of

    def error(self, message: str) -> Any:  # argparse's signature: NoReturn
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)}\n")

    def format_help(self) -> str:
        if self.config_keys_of is None:
            return super().format_help()
        from oml_core.config.reference import help_section

        return f"{super().format_help()}\n{help_section(self.config_keys_of)}"


def common_parser() -> CommandParser:
    """The parent of every command's parser (which are CommandParsers, as argparse types them): ``--traceback``."""
    common = CommandParser(add_help=False)
    # SUPPRESS: a command that is not given the flag leaves the one given before the command's name as it is
    common.add_argument(
        "--traceback",
        action="store_true",
        default=argparse.SUPPRESS,
        help=f"show the traceback of an error (as {TRACEBACK_ENV}=1 does)",
    )
    return common


def command_name(argv: list[str]) -> str | None:
    """The command of a command line: its first argument that is no option (None: there is none)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


__all__ = ["CommandParser", "Subparsers", "command_name", "common_parser"]
