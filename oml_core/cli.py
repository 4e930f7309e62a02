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

Every command takes ``--traceback`` (before or after the command's name). Errors are printed on one line of
stderr, never as a traceback (``OML_TRACEBACK=1`` or ``--traceback`` re-raises them, for debugging):

- an error a user can fix exits with status 2, ``oml COMMAND: error: <message>``: a bad config, override or
  yaml file, an unknown or missing component (:class:`~oml_core.registry.RegistryError`), a bad dataframe,
  checkpoint or download, and an ``OSError`` on a user's path (permission, missing file or folder, a file
  where a folder should be, a full disk), which names the path and the system's reason;
- a run stopped on purpose exits with its own status: Ctrl-C or SIGTERM during training 130 or 143, ``oml
  train: <why>; to go on: oml train <the same arguments> resume=<last checkpoint>``; a loss gone NaN 1,
  ``oml train: <the step, loss and learning rate>; last good checkpoint: <path>``;
  a Ctrl-C anywhere else exits with 130, ``oml COMMAND: interrupted``;
- any other exception is a bug of oml or a plugin: status 1, ``oml COMMAND: internal error: <Type>: <message>
  (run with OML_TRACEBACK=1 for the traceback)``.

When the reader of stdout goes away (``oml registry --format json | head -1``), the command stops quietly
with status 1, as Python's documentation recommends (see :func:`_stdout_closed`).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import shlex
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from oml_core.compose import compose_config, one_line
from oml_core.registry import KINDS, ConfigError, Registry, RegistryError

EXIT_USAGE = 2
#: The status of a bug (an exception that is no user error), and of a closed stdout (Python's own for EPIPE).
EXIT_INTERNAL = 1
#: The status of a Ctrl-C: ``128 + SIGINT``, the shell's convention.
EXIT_INTERRUPTED = 130
#: Set to 1 (or true, yes, on), the CLI shows the traceback of every error, as ``--traceback`` does.
TRACEBACK_ENV = "OML_TRACEBACK"
#: ``OSError`` types that mean a user's path is wrong (the message names the path), and the error numbers of
#: other ``OSError`` s that the user can fix: a full disk or quota, a read-only file system, a too long name.
USER_OS_ERRORS = (FileNotFoundError, FileExistsError, PermissionError, NotADirectoryError, IsADirectoryError)
USER_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENAMETOOLONG})
#: oml's exceptions that are user errors, beside ``RegistryError``: ``(module, class name)``. They are looked
#: up among the modules already imported (an error of a module never imported was never raised), so that the
#: CLI imports neither torch nor pandas to tell them apart.
USER_ERROR_TYPES = (
    ("oml_core.utils.checkpoints", "CheckpointError"),
    ("oml_core.datasets.dataframe_format", "DataFrameFormatError"),
    ("oml_core.zoo.store", "PretrainedDownloadError"),
)
#: The exception of a run stopped on purpose: it carries its last good checkpoint (``checkpoint``), whether the
#: run goes on from it as it was (``resumable``) and its exit status (``exit_code``). Looked up as
#: :data:`USER_ERROR_TYPES` are.
STOPPED_TYPE = ("oml_core.lightning.stops", "TrainingStopped")
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
    """Entry point of the ``oml`` console script; returns the exit status (see the module's docstring)."""
    silence_upstream_warnings()
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args, rest = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if rest and args.command not in PIPELINE_CONFIGS:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    command = f"oml {args.command}"
    try:
        status = args.handler(args, rest)
        sys.stdout.flush()  # a closed stdout shows here, not at exit
        return status
    except BrokenPipeError:
        return _stdout_closed()
    except KeyboardInterrupt:
        if wants_traceback(args):
            raise
        print(f"{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:
        if wants_traceback(args):
            raise
        message, status = error_report(e, argv)
        print(f"{command}: {message}", file=sys.stderr)
        return status


def wants_traceback(args: argparse.Namespace) -> bool:
    """Whether errors are to be re-raised with their traceback: ``--traceback`` or ``OML_TRACEBACK=1``."""
    from_env = os.environ.get(TRACEBACK_ENV, "").strip().lower() in {"1", "true", "yes", "on"}
    return from_env or getattr(args, "traceback", False)


def error_report(error: Exception, argv: Sequence[str]) -> tuple[str, int]:
    """The one line (after ``oml COMMAND: ``) and the exit status that the CLI gives ``error``, raised by the
    command ``oml ARGV``.

    ``error: <message>`` and :data:`EXIT_USAGE` for a user error (see :func:`is_user_error`); for a run stopped
    on purpose, its message, the command that resumes it (:func:`resume_command`) and its own ``exit_code``;
    else ``internal error: <Type>: <message> (run with OML_TRACEBACK=1 for the traceback)`` and
    :data:`EXIT_INTERNAL`.
    """
    stopped = _loaded_type(*STOPPED_TYPE)
    if stopped is not None and isinstance(error, stopped):
        if error.resumable and error.checkpoint is not None:
            return one_line(f"{error}; to go on: {resume_command(argv, error.checkpoint)}"), error.exit_code
        return one_line(str(error)), error.exit_code
    if is_user_error(error):
        text = _os_error_text(error) if isinstance(error, OSError) else str(error)
        return f"error: {one_line(text)}", EXIT_USAGE
    detail = one_line(str(error))
    described = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
    return f"internal error: {described} (run with {TRACEBACK_ENV}=1 for the traceback)", EXIT_INTERNAL


def is_user_error(error: BaseException) -> bool:
    """Whether ``error`` is one a user can fix: a ``RegistryError`` (``ConfigError`` among them), one of
    :data:`USER_ERROR_TYPES`, or an ``OSError`` of :data:`USER_OS_ERRORS` or :data:`USER_ERRNOS`."""
    if isinstance(error, OSError):
        return isinstance(error, USER_OS_ERRORS) or error.errno in USER_ERRNOS
    user_types = (_loaded_type(module, name) for module, name in USER_ERROR_TYPES)
    return isinstance(error, (RegistryError, *(t for t in user_types if t is not None)))


def resume_command(argv: Sequence[str], checkpoint: str | os.PathLike[str]) -> str:
    """``oml ARGV resume=CHECKPOINT``, shell-quoted, where ARGV loses the overrides of ``resume`` it had."""
    kept = [arg for arg in argv if arg.lstrip("+").partition("=")[0] != "resume"]
    return shlex.join(["oml", *kept, f"resume={os.fspath(checkpoint)}"])


def _loaded_type(module: str, name: str) -> type[BaseException] | None:
    """The class ``module.name`` if ``module`` is imported already, else None (nothing is imported)."""
    loaded = sys.modules.get(module)
    return getattr(loaded, name, None) if loaded is not None else None


def _os_error_text(error: OSError) -> str:
    """``<the system's reason>: '<path>'`` (``'<path>' -> '<path2>'`` for a rename) of an ``OSError`` raised by
    the system; the message of one raised with a message of its own."""
    if error.strerror is None:
        return str(error)
    paths = " -> ".join(repr(path) for path in (error.filename, error.filename2) if path is not None)
    return f"{error.strerror}: {paths}" if paths else error.strerror


def _stdout_closed() -> int:
    """What Python's documentation recommends when the reader of stdout has gone (``BrokenPipeError``, see
    "Note on SIGPIPE" in the docs of :mod:`signal`): point stdout at devnull, so that the flush at exit does not
    fail again, and end with status 1, Python's own for EPIPE, without a message."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_INTERNAL


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: a command that is not given the flag leaves the one given before the command's name as it is
    common.add_argument(
        "--traceback",
        action="store_true",
        default=argparse.SUPPRESS,
        help=f"show the traceback of an error (as {TRACEBACK_ENV}=1 does)",
    )
    parser = argparse.ArgumentParser(
        prog="oml", description="oml: metric learning with plugins", parents=[common]
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    for command, config_name in PIPELINE_CONFIGS.items():
        pipeline = sub.add_parser(command, help=PIPELINE_HELP[command], parents=[common])
        pipeline.add_argument("--config-path", help="directory of your yaml configs (default: oml's own)")
        pipeline.add_argument("--config-name", default=config_name, help="config name without .yaml")
        if command == "train":
            pipeline.add_argument(
                "--skip-image-check",
                action="store_true",
                help="do not read every image before training (the override check_images=false)",
            )
        pipeline.set_defaults(handler=_cmd_pipeline)

    plugins = sub.add_parser(
        "plugins", help="list the installed plugins and what they provide", parents=[common]
    )
    plugins.add_argument("--all", action="store_true", help="include the core's built-in plugin")
    plugins.add_argument("--format", choices=("table", "json"), default="table")
    plugins.add_argument("--check", action="store_true", help="import every component; exit 1 on any failure")
    plugins.set_defaults(handler=_cmd_plugins)

    registry = sub.add_parser("registry", help="list registered names, by kind", parents=[common])
    registry.add_argument("kind", nargs="?", choices=list(KINDS), help="only this kind, with details")
    registry.add_argument("--format", choices=("table", "json"), default="table")
    registry.set_defaults(handler=_cmd_registry)

    mock = sub.add_parser(
        "mock-dataset", help="generate the mock 'figures' dataset into DIR", parents=[common]
    )
    mock.add_argument("dir", type=Path)
    mock.add_argument("--seed", type=int, default=0)
    mock.set_defaults(handler=_cmd_mock_dataset)

    check = sub.add_parser(
        "check-dataframe",
        help="check that a csv is in OML's retrieval format; exit 1 with the problems if not",
        parents=[common],
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
    """Run the pipeline of ``args.command`` on its config composed with ``overrides`` (composed first, so that
    a bad config or override fails before Lightning is imported)."""
    registry = Registry()
    if getattr(args, "skip_image_check", False):
        overrides = [*overrides, "check_images=false"]
    cfg = compose_config(args.config_name, overrides, args.config_path, registry)
    from oml_core.lightning import pipelines

    getattr(pipelines, PIPELINE_CONFIGS[args.command])(cfg, registry=registry)
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
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{str(root)!r} exists and is not a directory; choose a new directory")
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
