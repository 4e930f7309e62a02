"""``oml index build|add|remove|calibrate``: a gallery index built from a config (its default ``index_build.yaml``
and hydra overrides), and an index changed in place: items put by id, removed by id, its match threshold calibrated
again (each written as a new generation, durably, before it prints; :mod:`oml_core.reports.index`).

    oml index build [--config-path DIR] [--config-name NAME] [--show-config] [hydra overrides ...]
    oml index add INDEX SOURCE... [--ids ID,...] [--labels LABEL,...] [--dataset-root DIR] [--accelerator ...]
        [--devices ...] [--lock-timeout SECONDS]
    oml index remove INDEX ID... [--lock-timeout SECONDS]
    oml index calibrate INDEX [--accelerator ...] [--devices ...] [--lock-timeout SECONDS]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from oml_core.cli.arguments import add_one_device_arguments, device_of_arguments, positive_seconds
from oml_core.cli.parser import Subparsers, common_parser
from oml_core.cli.pipelines import show_config
from oml_core.config.compose import OML_CONFIGS_DIR, compose_config
from oml_core.registry import Registry
from oml_core.reports.index import ItemsAdded, ItemsRemoved, Recalibrated, index_built

#: The default config of ``oml index build`` (in :data:`~oml_core.config.compose.OML_CONFIGS_DIR`).
INDEX_BUILD_CONFIG = "index_build"


def add_parser(subparsers: Subparsers) -> None:
    """Add ``oml index`` and its commands (build, add, remove, calibrate) to ``subparsers``."""
    common = common_parser()
    index = subparsers.add_parser(
        "index",
        help="build a gallery index to serve, or change one (oml index build|add|remove|calibrate)",
        parents=[common],
    )
    index_subparsers = index.add_subparsers(dest="index_command", metavar="INDEX_COMMAND", required=True)
    build = index_subparsers.add_parser(
        "build",
        help="build a gallery index from a dataframe or a folder of images (defaults: the mock dataset)",
        description="oml index build: embed a gallery with an extractor, put it in a knn backend, calibrate a "
        "match threshold on the validation split and save it all to a new folder. Options, then hydra "
        "overrides, e.g. oml index build index_dir=my_index extractor.args.weights=best.ckpt "
        "knn_backend.name=exact calibration.value=0.95",
        epilog=f"the default config: {(OML_CONFIGS_DIR / f'{INDEX_BUILD_CONFIG}.yaml').resolve()}",
        parents=[common],
        config_keys_of=INDEX_BUILD_CONFIG,
    )
    build.add_argument("--config-path", "-cp", metavar="DIR", help="directory of your yaml configs")
    build.add_argument(
        "--config-name",
        "-cn",
        metavar="NAME",
        default=INDEX_BUILD_CONFIG,
        help=f"config name without .yaml (default: {INDEX_BUILD_CONFIG})",
    )
    build.add_argument(
        "--show-config",
        action="store_true",
        help="print the config composed with the overrides (interpolations resolved) as yaml, then what a build "
        "would refuse of it (exit status 2); build nothing",
    )
    build.set_defaults(handler=run_build, command="index build", takes_overrides=True)
    add = index_subparsers.add_parser(
        "add",
        help="add items to an index, or replace those of the same ids (durable when it prints)",
        description="oml index add: embed the items of SOURCE as the index's dataset component reads queries "
        "and put them into the index by id; prints: added N, updated M, generation G",
        parents=[common],
    )
    add.add_argument("index", type=Path, metavar="INDEX", help="the folder of an index (oml index build)")
    add.add_argument(
        "sources",
        nargs="+",
        metavar="SOURCE",
        help="the items, as oml search reads queries (images: image files, folders of images, CSVs of OML's "
        "format; texts: CSVs with a text column, or text files, an item a line)",
    )
    add.add_argument(
        "--ids",
        type=id_list,
        metavar="ID,...",
        help="the items' ids, one per item in order (an id the index has replaces that item); default: new "
        "ids after the largest ever given (a removed item's id is never given again)",
    )
    add.add_argument(
        "--labels",
        type=label_list,
        metavar="LABEL,...",
        help="the items' labels, one per item in order (an empty one: unknown); default: unknown",
    )
    add.add_argument(
        "--dataset-root",
        type=Path,
        metavar="DIR",
        help="the folder the relative paths inside a CSV are joined to (default: its folder)",
    )
    add_one_device_arguments(add, "embeds the items")
    add_lock_timeout(add)
    add.set_defaults(handler=run_add, command="index add")
    remove = index_subparsers.add_parser(
        "remove",
        help="remove items from an index by id (durable when it prints)",
        description="oml index remove: remove the items of the ids from the index; prints: removed N, "
        "generation G",
        parents=[common],
    )
    remove.add_argument("index", type=Path, metavar="INDEX", help="the folder of an index (oml index build)")
    remove.add_argument("ids", nargs="+", type=item_id, metavar="ID", help="the ids of the items to remove")
    add_lock_timeout(remove)
    remove.set_defaults(handler=run_remove, command="index remove")
    calibrate = index_subparsers.add_parser(
        "calibrate",
        help="calibrate an index's match threshold again (after changes) on its validation split",
        description="oml index calibrate: calibrate the match threshold again with the index's calibration "
        "target, on the validation split of its dataset component; prints the calibration and the generation",
        parents=[common],
    )
    calibrate.add_argument(
        "index", type=Path, metavar="INDEX", help="the folder of an index (oml index build)"
    )
    add_one_device_arguments(calibrate, "embeds the validation split")
    add_lock_timeout(calibrate)
    calibrate.set_defaults(handler=run_calibrate, command="index calibrate")


def run_build(args: argparse.Namespace, overrides: list[str]) -> int:
    """Build the index of the config composed with ``overrides`` (composed first, so that a bad override fails
    before anything is read); with ``--show-config`` print that config and what a build would refuse of it
    instead (:func:`~oml_core.cli.pipelines.show_config`), and build nothing."""
    registry = Registry()
    cfg = compose_config(args.config_name, overrides, args.config_path, registry)
    if args.show_config:
        return show_config(cfg, INDEX_BUILD_CONFIG)
    from oml_core.index.build import build_gallery_index

    result = build_gallery_index(cfg, registry=registry)
    print(index_built(result).as_text())
    return 0


def run_add(args: argparse.Namespace, _: list[str]) -> int:
    """Embed the items of ``SOURCE...`` (read as ``oml search`` reads queries) on the device of the options, put
    them into the index (``--ids``, ``--labels``: one per item) and commit a new generation."""
    from oml_core.index import GalleryIndex, GalleryIndexError
    from oml_core.index.queries import collect_queries

    device = device_of_arguments(args, "index add")
    index = GalleryIndex.load(args.index, registry=Registry(), device=device)
    # the items are named by their absolute paths, as a build names them, so that the index is searched and
    # served from any working folder (a relative path would resolve against the reader's); a blank source stays
    # blank, for collect_queries to refuse (resolved, it would be the working folder)
    sources = [Path(source).expanduser().resolve() if source.strip() else source for source in args.sources]
    root = None if args.dataset_root is None else Path(args.dataset_root).expanduser().resolve()
    items = collect_queries(index.data, sources, root)
    for option, values in (("--ids", args.ids), ("--labels", args.labels)):
        if values is not None and len(values) != len(items.names):
            raise GalleryIndexError(
                f"{option} gives {len(values)} values to the {len(items.names)} items of SOURCE"
            )
    done = index.upsert(items.dataset, ids=args.ids, labels=args.labels)
    generation = index.commit(timeout=args.lock_timeout)
    print(ItemsAdded(done.added, done.updated, generation).as_text())
    return 0


def run_remove(args: argparse.Namespace, _: list[str]) -> int:
    """Remove the items of ``ID...`` (each id once) from the index and commit a new generation."""
    from oml_core.index import GalleryIndex, GalleryIndexError

    if len(set(args.ids)) != len(args.ids):
        twice = next(i for i in args.ids if args.ids.count(i) > 1)
        raise GalleryIndexError(f"the id {twice} is given twice")
    index = GalleryIndex.load(args.index, registry=Registry())
    removed = index.remove(args.ids)
    generation = index.commit(timeout=args.lock_timeout)
    print(ItemsRemoved(removed, generation).as_text())
    return 0


def run_calibrate(args: argparse.Namespace, _: list[str]) -> int:
    """Calibrate the index's match threshold again on the validation split and commit a new generation."""
    from oml_core.index import CalibrationError, GalleryIndex, GalleryIndexError

    device = device_of_arguments(args, "index calibrate")
    index = GalleryIndex.load(args.index, registry=Registry(), device=device)
    try:
        calibration = index.recalibrate()
    except CalibrationError as e:
        raise GalleryIndexError(f"calibration: {e}") from e
    generation = index.commit(timeout=args.lock_timeout)
    print(Recalibrated(calibration.summary(), generation).as_text())
    return 0


def add_lock_timeout(parser: argparse.ArgumentParser) -> None:
    """Add ``--lock-timeout`` to a command that changes an index."""
    parser.add_argument(
        "--lock-timeout",
        type=positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for another process that is changing the index (default: 10)",
    )


def item_id(value: str) -> int:
    """An item's id, an integer (argparse's type of ``oml index remove ID``)."""
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer id, got {value!r}") from None


def label_list(value: str) -> list[int | None]:
    """Integer labels separated by commas, an empty one unknown (argparse's type of ``oml index add --labels``)."""
    try:
        return [int(part) if part.strip() else None for part in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be integer labels separated by commas, got {value!r}"
        ) from None


def id_list(value: str) -> list[int]:
    """Distinct integer ids separated by commas (argparse's type of ``oml index add --ids``)."""
    ids = [item_id(part.strip()) for part in value.split(",")]
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise argparse.ArgumentTypeError(f"the id {twice} is given twice")
    return ids


__all__ = [
    "INDEX_BUILD_CONFIG",
    "add_lock_timeout",
    "add_parser",
    "id_list",
    "item_id",
    "label_list",
    "run_add",
    "run_build",
    "run_calibrate",
    "run_remove",
]
