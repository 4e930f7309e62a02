"""The ``oml`` console script.

    oml train [--config-path DIR] [--config-name NAME] [hydra overrides ...]
    oml validate [--config-path DIR] [--config-name NAME] [hydra overrides ...]
    oml predict [--config-path DIR] [--config-name NAME] [hydra overrides ...]
    oml train-postprocessor [--config-path DIR] [--config-name NAME] [hydra overrides ...]
    oml validate-postprocessor [--config-path DIR] [--config-name NAME] [hydra overrides ...]
    oml plugins [--all] [--format table|json] [--check]
    oml registry [KIND] [--format table|json]
    oml mock-dataset DIR [--seed N]
    oml check-dataframe CSV [--dataset-root DIR] [--sep SEP]

``GROUP@KEY=OPTION`` among the overrides replaces a component whole (``loss@criterion=arcface``), see
:mod:`oml_core.compose`.

Errors a user can fix (an unknown or missing component, a bad config) are printed as one message and the
command exits with status 2, with no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from oml_core.compose import compose_config
from oml_core.registry import KINDS, ConfigError, Registry, RegistryError

EXIT_USAGE = 2
#: ``oml COMMAND`` -> the pipeline it runs; its default config has the pipeline's name (as OML's do).
PIPELINE_CONFIGS = {
    "train": "extractor_training_pipeline",
    "validate": "extractor_validation_pipeline",
    "predict": "extractor_prediction_pipeline",
    "train-postprocessor": "postprocessor_training_pipeline",
    "validate-postprocessor": "postprocessor_validation_pipeline",
}
PIPELINE_HELP = {
    "train": "train an extractor (defaults: the built-in mock dataset)",
    "validate": "compute the retrieval metrics of an extractor (defaults: the built-in mock dataset)",
    "predict": "save an extractor's features of every image to predictions.json (defaults: the mock images)",
    "train-postprocessor": "train a pairwise re-ranker on top of an extractor (defaults: the mock dataset)",
    "validate-postprocessor": "compute the retrieval metrics before and after a pairwise re-ranker "
    "(defaults: the mock dataset)",
}


#: Warnings of the libraries under oml that its users cannot act on, hidden from the command line's output:
#: ``(category, message regex)``. PyTorch Lightning builds torch's deprecated ``LeafSpec`` in every step.
UPSTREAM_WARNINGS = ((FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),)


def silence_upstream_warnings() -> None:
    """Ignore the warnings of :data:`UPSTREAM_WARNINGS` (only those: any other warning is still shown)."""
    for category, message in UPSTREAM_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``oml`` console script; returns the exit status."""
    silence_upstream_warnings()
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if rest and args.command not in PIPELINE_CONFIGS:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return args.handler(args, rest)
    except (RegistryError, ConfigError) as e:
        print(f"oml {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oml", description="oml: metric learning with plugins")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for command, config_name in PIPELINE_CONFIGS.items():
        pipeline = sub.add_parser(command, help=PIPELINE_HELP[command])
        pipeline.add_argument("--config-path", help="directory of your yaml configs (default: oml's own)")
        pipeline.add_argument("--config-name", default=config_name, help="config name without .yaml")
        pipeline.set_defaults(handler=_cmd_pipeline)

    plugins = sub.add_parser("plugins", help="list the installed plugins and what they provide")
    plugins.add_argument("--all", action="store_true", help="include the core's built-in plugin")
    plugins.add_argument("--format", choices=("table", "json"), default="table")
    plugins.add_argument("--check", action="store_true", help="import every component; exit 1 on any failure")
    plugins.set_defaults(handler=_cmd_plugins)

    registry = sub.add_parser("registry", help="list registered names, by kind")
    registry.add_argument("kind", nargs="?", choices=list(KINDS), help="only this kind, with details")
    registry.add_argument("--format", choices=("table", "json"), default="table")
    registry.set_defaults(handler=_cmd_registry)

    mock = sub.add_parser("mock-dataset", help="generate the mock 'figures' dataset into DIR")
    mock.add_argument("dir", type=Path)
    mock.add_argument("--seed", type=int, default=0)
    mock.set_defaults(handler=_cmd_mock_dataset)

    check = sub.add_parser(
        "check-dataframe",
        help="check that a csv is in OML's retrieval format; exit 1 with the problems if not",
    )
    check.add_argument("csv", type=Path)
    check.add_argument(
        "--dataset-root",
        type=Path,
        help="the folder the relative paths are joined to (default: the csv's folder)",
    )
    check.add_argument("--sep", default=",", help="the csv's separator (default: ',')")
    check.set_defaults(handler=_cmd_check_dataframe)
    return parser


# -------------------------------------------------------------------------------------------- pipelines
def _cmd_pipeline(args: argparse.Namespace, overrides: list[str]) -> int:
    """Run the pipeline of ``args.command`` on its config composed with ``overrides``."""
    from oml_core.lightning import pipelines

    run_pipeline = getattr(pipelines, PIPELINE_CONFIGS[args.command])
    registry = Registry()
    cfg = compose_config(args.config_name, overrides, args.config_path, registry)
    run_pipeline(cfg, registry=registry)
    return 0


# ---------------------------------------------------------------------------------------------- plugins
def plugins_report(
    registry: Registry, include_builtins: bool = False, check: bool = False
) -> list[dict[str, Any]]:
    """One dict per plugin: name, distribution, version, hooks, provides ``{kind: [names]}``, error.

    With ``check``, every component is imported and the failures are listed under ``broken``.
    """
    report = []
    for record in registry.plugins():
        info = record.info
        if info.name == "oml_core" and not include_builtins:
            continue
        row: dict[str, Any] = {
            "name": info.name,
            "distribution": info.distribution,
            "version": info.version,
            "hooks": record.hooks,
            "provides": registry.provided_by(info.name),
            "error": record.error,
        }
        if check:
            row["broken"] = _broken_components(registry, info.name)
        report.append(row)
    return report


def _broken_components(registry: Registry, plugin_name: str) -> list[str]:
    broken = []
    for kind in KINDS:
        for entry in registry.entries(kind):
            if entry.plugin.name == plugin_name:
                try:
                    entry.load()
                except RegistryError as e:
                    broken.append(str(e))
    return broken


def _cmd_plugins(args: argparse.Namespace, _: list[str]) -> int:
    report = plugins_report(Registry(), include_builtins=args.all, check=args.check)
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        print(_plugins_table(report))
    failed = any(row["error"] or row.get("broken") for row in report)
    return 1 if args.check and failed else 0


def _plugins_table(report: list[dict[str, Any]]) -> str:
    if not report:
        return "No oml plugins installed (see `pip install oml-models oml-losses ...`)."
    lines = []
    for row in report:
        version = f" {row['version']}" if row["version"] else ""
        lines.append(f"{row['name']}  [{row['distribution'] or 'in code'}{version}]")
        if row["error"]:
            lines.append(f"    FAILED: {row['error']}")
        for kind, names in row["provides"].items():
            lines.append(f"    {kind:<16} {', '.join(names)}")
        for problem in row.get("broken", []):
            lines.append(f"    BROKEN: {problem}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- registry
def _cmd_registry(args: argparse.Namespace, _: list[str]) -> int:
    registry = Registry()
    kinds = [args.kind] if args.kind else list(KINDS)
    rows = [
        {
            "kind": e.kind,
            "name": e.name,
            "plugin": e.plugin.name,
            "aliases": list(e.aliases),
            "description": e.description,
        }
        for kind in kinds
        for e in registry.entries(kind)
    ]
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    for kind in kinds:
        entries = [r for r in rows if r["kind"] == kind]
        print(f"{kind} ({KINDS[kind].description}):")
        if not entries:
            print("    (none)")
        for r in sorted(entries, key=lambda r: r["name"]):
            detail = f" - {r['description']}" if args.kind and r["description"] else ""
            print(f"    {r['name']:<32} {r['plugin']}{detail}")
    return 0


# ----------------------------------------------------------------------------------------- mock dataset
def _cmd_mock_dataset(args: argparse.Namespace, _: list[str]) -> int:
    from oml_core.datasets.mock import generate_mock_dataset

    root = args.dir.expanduser().resolve()
    if root.exists() and any(root.iterdir()):
        raise ConfigError(f"{str(root)!r} exists and is not empty; choose a new directory")
    generate_mock_dataset(root, seed=args.seed)
    print(f"Mock dataset written to {root}")
    return 0


# ------------------------------------------------------------------------------------- check dataframe
def _cmd_check_dataframe(args: argparse.Namespace, _: list[str]) -> int:
    import warnings

    from oml_core.datasets.dataframe_format import DataFrameFormatError, check_retrieval_dataframe_format

    root = args.dataset_root if args.dataset_root is not None else args.csv.parent
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            check_retrieval_dataframe_format(args.csv, dataset_root=root, sep=args.sep, verbose=True)
        except (DataFrameFormatError, FileNotFoundError) as e:
            print(f"oml check-dataframe: error: {e}", file=sys.stderr)
            return 1
    for warning in caught:
        print(f"oml check-dataframe: warning: {warning.message}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
