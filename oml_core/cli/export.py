"""``oml export SOURCE --output DIR [--config FILE]``: the extractor of a checkpoint, an index folder or a zoo key
written to ONNX, checked against PyTorch first (:mod:`oml_core.export`; what it says:
:class:`~oml_core.reports.export.Exported`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from oml_core.cli.parser import Subparsers, common_parser
from oml_core.registry import Registry
from oml_core.reports.export import exported


def add_parser(subparsers: Subparsers) -> None:
    """Add ``oml export`` to ``subparsers``."""
    export = subparsers.add_parser(
        "export",
        help="export the extractor of a checkpoint, an index or a zoo key to ONNX (checked against PyTorch)",
        description="oml export: write the extractor of SOURCE (a checkpoint of oml train, an index folder of oml "
        "index build, or a zoo key) to ONNX in the new folder DIR: model.onnx (dynamic batch axis), export.json "
        "(inputs, preprocessing, weights sha256, parity figures) and the preprocessing's files; the graph is run "
        "on onnxruntime and compared with PyTorch before the folder appears. Run it with the extractor onnx: "
        "oml validate extractor@extractor=onnx extractor.args.path=DIR. Needs pip install 'oml-core[onnx]'.",
        parents=[common_parser()],
    )
    export.add_argument(
        "source", metavar="SOURCE", help="a checkpoint file, an index folder, or a key of the pretrained zoo"
    )
    export.add_argument(
        "--output", "-o", type=Path, required=True, metavar="DIR", help="a new or empty folder for the export"
    )
    export.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="with a checkpoint: the yaml config it was trained with, composed (as oml train --show-config prints "
        "it; its extractor, transforms_val, dataset are read); default: the config that oml train recorded in the "
        "checkpoint",
    )
    export.set_defaults(handler=run)


def run(args: argparse.Namespace, _: list[str]) -> int:
    """Export the extractor of ``SOURCE`` to the new folder ``--output`` and print what was written."""
    from oml_core.export import export_onnx

    result = export_onnx(args.source, args.output, config=args.config, registry=Registry())
    print(exported(result).as_text())
    return 0


__all__ = ["add_parser", "run"]
