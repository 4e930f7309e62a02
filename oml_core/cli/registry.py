"""``oml registry [KIND [NAME]] [--format table|json]``: the registered names of every kind or of one kind
(:class:`~oml_core.reports.registry.RegistryListing`), or one component: its provider, its factory's arguments with
their defaults and its default config (:class:`~oml_core.reports.registry.ComponentView`)."""

from __future__ import annotations

import argparse
import difflib

from oml_core.cli.parser import Subparsers, common_parser
from oml_core.registry import KINDS, Registry
from oml_core.reports.answer import Answer
from oml_core.reports.registry import component_view, registry_listing


def add_parser(subparsers: Subparsers) -> None:
    """Add ``oml registry`` to ``subparsers``."""
    registry = subparsers.add_parser(
        "registry",
        help="list registered names, by kind; or show one component",
        description="oml registry: the registered names of every kind, of one KIND (with details), or one "
        "component (KIND NAME): its provider, its factory's arguments with their defaults, its default config.",
        parents=[common_parser()],
    )
    registry.add_argument(
        "kind", nargs="?", type=kind_name, metavar="KIND", help=f"only this kind: {', '.join(KINDS)}"
    )
    registry.add_argument("name", nargs="?", metavar="NAME", help="one component of KIND (or an alias)")
    registry.add_argument("--format", choices=("table", "json"), default="table")
    registry.set_defaults(handler=run)


def run(args: argparse.Namespace, _: list[str]) -> int:
    """Print the components of every kind, of ``KIND``, or the component ``KIND NAME``, as a table or JSON."""
    registry = Registry()
    answer: Answer
    if args.name is not None:  # argparse fills KIND first: there is a KIND
        answer = component_view(registry, args.kind, args.name)
    else:
        answer = registry_listing(registry, None if args.kind is None else [args.kind])
    print(answer.as_json() if args.format == "json" else answer.as_text())
    return 0


def kind_name(value: str) -> str:
    """A kind's name (argparse's type of ``oml registry KIND``), with the close match of an unknown one."""
    if value in KINDS:
        return value
    close = difflib.get_close_matches(value, list(KINDS), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise argparse.ArgumentTypeError(f"unknown kind {value!r}{hint} (kinds: {', '.join(KINDS)})")


__all__ = ["add_parser", "kind_name", "run"]
