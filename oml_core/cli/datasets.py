"""``oml mock-dataset DIR [--seed N]`` and ``oml check-dataframe CSV [--dataset-root DIR] [--sep SEP] [--encoding
ENCODING]``: the mock "figures" dataset written to a new folder, and the check of a csv in OML's format
(:mod:`oml_core.reports.datasets`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from oml_core.cli.parser import Subparsers, common_parser
from oml_core.registry import ConfigError
from oml_core.reports.datasets import MockDatasetWritten, check_dataframe


def add_parser(subparsers: Subparsers) -> None:
    """Add ``oml mock-dataset`` and ``oml check-dataframe`` to ``subparsers``."""
    common = common_parser()
    mock = subparsers.add_parser(
        "mock-dataset", help="generate the mock 'figures' dataset into DIR", parents=[common]
    )
    mock.add_argument("dir", type=Path)
    mock.add_argument("--seed", type=int, default=0)
    mock.set_defaults(handler=run_mock_dataset)

    check = subparsers.add_parser(
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
    check.add_argument(
        "--encoding",
        default="utf-8",
        help="the csv's text encoding, e.g. latin-1 or cp1252 (default: utf-8; the pipelines' dataframe_encoding)",
    )
    check.set_defaults(handler=run_check_dataframe)


def run_mock_dataset(args: argparse.Namespace, _: list[str]) -> int:
    """Write the mock dataset to ``DIR``, a new or empty folder.

    Raises:
        ConfigError: ``DIR`` is a file, or a folder that is not empty.
    """
    from oml_core.datasets.mock import generate_mock_dataset

    root = args.dir.expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise ConfigError(f"{str(root)!r} exists and is not a directory; choose a new directory")
    if root.exists() and any(root.iterdir()):
        raise ConfigError(f"{str(root)!r} exists and is not empty; choose a new directory")
    generate_mock_dataset(root, seed=args.seed)
    print(MockDatasetWritten(str(root)).as_text())
    return 0


def run_check_dataframe(args: argparse.Namespace, _: list[str]) -> int:
    """Check ``CSV`` (:func:`~oml_core.reports.datasets.check_dataframe`: its summary is logged) and print its
    problems or warnings on stderr, each after ``oml check-dataframe:``; exit 1 when it is not in the
    format."""
    answer = check_dataframe(args.csv, args.dataset_root, args.sep, args.encoding)
    for message in answer.messages():
        print(f"oml check-dataframe: {message}", file=sys.stderr)
    return 0 if answer.ok else 1


__all__ = ["add_parser", "run_check_dataframe", "run_mock_dataset"]
