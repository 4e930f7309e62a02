"""``oml plugins [--all] [--format table|json] [--check [--timeout SECONDS]]`` and ``oml plugin new NAME [DIR]
[--kinds KIND,...]``: the installed plugins and what they provide (:class:`~oml_core.reports.plugins
.PluginsAnswer`), and a new plugin to start from (:mod:`oml_core.scaffold`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from oml_core.cli.arguments import positive_seconds
from oml_core.cli.parser import Subparsers, common_parser
from oml_core.registry import ConfigError, Registry
from oml_core.registry.isolation import check_plugins
from oml_core.registry.manager import ENV_TIMEOUT, allow_list_from_env, strict_from_env, timeout_from_env
from oml_core.registry.plugin_rows import plugins_report
from oml_core.reports.plugins import PluginsAnswer, plugin_written


def add_parser(subparsers: Subparsers) -> None:
    """Add ``oml plugins`` and ``oml plugin new`` to ``subparsers``."""
    common = common_parser()
    plugins = subparsers.add_parser(
        "plugins", help="list the installed plugins and what they provide", parents=[common]
    )
    plugins.add_argument("--all", action="store_true", help="include the core's built-in plugin")
    plugins.add_argument("--format", choices=("table", "json"), default="table")
    plugins.add_argument(
        "--check",
        action="store_true",
        help="load each plugin and import its components in a process of its own, and end with a verdict (with "
        "--format json: on stderr); exit 1 on any failure (a plugin that fails, hangs, exits or crashes)",
    )
    plugins.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help=f"with --check: the time one step of loading a plugin (its import, a hook, a component's import) may "
        f"take before the plugin is reported as hung (default: ${ENV_TIMEOUT}, else 60)",
    )
    plugins.set_defaults(handler=run)

    plugin = subparsers.add_parser(
        "plugin", help="write a new plugin to start from (oml plugin new)", parents=[common]
    )
    plugin_subparsers = plugin.add_subparsers(dest="plugin_command", metavar="PLUGIN_COMMAND", required=True)
    new = plugin_subparsers.add_parser(
        "new",
        help="write a working plugin distribution: pyproject, plugin module, components, configs, tests",
        description="oml plugin new: write the plugin distribution NAME (e.g. oml-acme, package oml_acme) to DIR "
        "(default ./NAME): its pyproject.toml with the oml entry point and package data, the plugin module, one "
        "component of each kind asked for with its default config, py.typed, a README and tests that pass. "
        "Then: pip install -e DIR; pytest DIR; oml plugins.",
        parents=[common],
    )
    new.add_argument("name", metavar="NAME", help="the distribution's name, e.g. oml-acme")
    new.add_argument(
        "dir", nargs="?", type=Path, metavar="DIR", help="a new or empty folder (default: ./NAME)"
    )
    new.add_argument(
        "--kinds",
        default=None,
        metavar="KIND,...",
        help="the components to write, comma-separated: extractor, loss, retrieval_metric, dataset (a dataset "
        "component: rows of numbers in a CSV of OML's format, a start for a modality of one's own) (default: all "
        "four)",
    )
    new.set_defaults(handler=run_new, command="plugin new")


def run(args: argparse.Namespace, _: list[str]) -> int:
    """List the plugins (:func:`~oml_core.registry.plugin_rows.plugins_report`); with ``--check`` each one is
    loaded and its components imported in a process of its own, each step within ``--timeout`` seconds
    (:func:`~oml_core.registry.isolation.check_plugins`, which keeps each plugin's verdict for the next commands), and
    the verdict ends the output (with ``--format json``
    on stderr, so that stdout is the json alone); exit 1 when the check fails."""
    if args.check:
        timeout = timeout_from_env() if args.timeout is None else args.timeout
        rows = check_plugins(
            include_builtins=args.all, allow=allow_list_from_env(), strict=strict_from_env(), timeout=timeout
        )
    elif args.timeout is not None:
        raise ConfigError("--timeout is the time limit of --check: oml plugins --check --timeout SECONDS")
    else:
        rows = plugins_report(Registry(), include_builtins=args.all)
    answer = PluginsAnswer(rows, checked=args.check)
    print(answer.as_json() if args.format == "json" else answer.as_text())
    if not answer.checked:
        return 0
    ok, verdict = answer.verdict()
    print(verdict, file=sys.stderr if args.format == "json" else sys.stdout)
    return 0 if ok else 1


def run_new(args: argparse.Namespace, _: list[str]) -> int:
    """Write the plugin distribution ``NAME`` with the components of ``--kinds`` (default: one of each kind the
    scaffold writes) and print its files and what to do next."""
    from oml_core.scaffold import SCAFFOLD_KINDS, new_plugin

    kinds = (
        SCAFFOLD_KINDS
        if args.kinds is None
        else [kind.strip() for kind in args.kinds.split(",") if kind.strip()]
    )
    folder = new_plugin(args.name, args.dir, kinds)
    print(plugin_written(args.name, folder).as_text())
    return 0


__all__ = ["add_parser", "run", "run_new"]
