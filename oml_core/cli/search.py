"""``oml search INDEX [QUERY... | --text TEXT...] [--dataset-root DIR] [--top-k K] [--format table|json]
[--accelerator cpu|gpu|cuda|null] [--devices DEVICES]``: the nearest gallery items of each query and, when the index
is calibrated, match or no match (:class:`~oml_core.reports.search.SearchAnswer`, the answer ``oml serve`` gives
too)."""

from __future__ import annotations

import argparse
from pathlib import Path

from oml_core.cli.arguments import add_one_device_arguments, device_of_arguments, positive_int
from oml_core.cli.parser import Subparsers, common_parser
from oml_core.registry import Registry
from oml_core.reports.search import search_answer


def add_parser(subparsers: Subparsers) -> None:
    """Add ``oml search`` to ``subparsers``."""
    search = subparsers.add_parser(
        "search",
        help="search a gallery index by queries (images, or its dataset's): their nearest gallery items, match or "
        "no match",
        parents=[common_parser()],
    )
    search.add_argument("index", type=Path, metavar="INDEX", help="the folder of an index (oml index build)")
    search.add_argument(
        "queries",
        nargs="*",
        metavar="QUERY",
        help="queries, as the index's dataset component reads them (images: image files, folders of images, CSVs "
        "of queries in OML's format: a path column; texts: CSVs with a text column, or text files, a query a line)",
    )
    search.add_argument(
        "--text",
        action="append",
        default=[],
        metavar="TEXT",
        help="a query text, instead of QUERY arguments (repeatable; an index of texts)",
    )
    search.add_argument(
        "--dataset-root",
        type=Path,
        metavar="DIR",
        help="the folder the relative paths inside a list of queries (a CSV) are joined to (default: its folder)",
    )
    search.add_argument(
        "--top-k", type=positive_int, default=5, metavar="K", help="gallery items per query (default: 5)"
    )
    search.add_argument("--format", choices=("table", "json"), default="table")
    add_one_device_arguments(search, "embeds the queries")
    search.set_defaults(handler=run)


def run(args: argparse.Namespace, _: list[str]) -> int:
    """Embed the queries (as the index's dataset component reads them) on the device of the options, search the
    index and print the answer as a table or JSON."""
    from oml_core.index import GalleryIndex
    from oml_core.index.queries import collect_queries

    device = device_of_arguments(args, "search")
    index = GalleryIndex.load(args.index, registry=Registry(), device=device)
    queries = collect_queries(index.data, args.queries, args.dataset_root, args.text)
    hits = index.search(queries.dataset, top_k=args.top_k)
    answer = search_answer(
        args.index,
        index.calibration.threshold if index.calibration else None,
        queries.names,
        hits,
        calibration_stale=index.calibration_stale,
    )
    print(answer.as_json() if args.format == "json" else answer.as_text())
    return 0


__all__ = ["add_parser", "run"]
