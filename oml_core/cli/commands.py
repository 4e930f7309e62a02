"""The top parser of ``oml``: every command's module adds its parser to it (``add_parser(subparsers)``), each
command's parser naming its handler (``handler``: ``run(args, overrides) -> int``, the exit status)."""

from __future__ import annotations

from oml_core.cli import datasets, export, index, pipelines, plugins, registry, search
from oml_core.cli.parser import CommandParser, common_parser

#: The modules of oml's commands, in the order of ``oml --help``.
COMMAND_MODULES = (pipelines, plugins, registry, datasets, index, search, export)


def build_parser() -> CommandParser:
    """The parser of ``oml``: ``--version``, ``--traceback`` and the commands of :data:`COMMAND_MODULES`; its
    ``commands`` are their names. Building it imports no schema, no torch and no plugin."""
    parser = CommandParser(
        prog="oml",
        description="oml: metric learning with plugins",
        epilog="plugins add commands of their own: `oml plugins` lists them (as 'command'); run one as "
        "oml NAME [ARGUMENTS ...] (oml NAME --help)",
        parents=[common_parser()],
    )
    parser.add_argument(
        "--version",
        action="store_true",
        help="print the versions of oml-core and of the installed plugin distributions",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_parser(subparsers)
    parser.commands = list(subparsers.choices)
    return parser


__all__ = ["COMMAND_MODULES", "build_parser"]
