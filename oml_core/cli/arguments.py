"""The argument types and options that several commands share: positive numbers, the one device that embeds
(``--accelerator``, ``--devices``: ``oml search``, ``oml index add|calibrate`` and plugin commands such as ``oml
serve``)."""

from __future__ import annotations

import argparse
import json
import math
from typing import TYPE_CHECKING, Any

from oml_core.engine import ONE_DEVICE_ACCELERATORS, one_device

if TYPE_CHECKING:
    import torch


def add_one_device_arguments(parser: argparse.ArgumentParser, role: str) -> None:
    """Add ``--accelerator`` and ``--devices`` to ``parser``: the one device on which an index's extractor
    ``role`` (e.g. "embeds the queries"), as ``oml index build``'s keys ``accelerator`` and ``devices`` name it.
    :func:`device_of_arguments` turns the parsed values into a ``torch.device``; plugin commands (``oml serve``)
    take the same options through this function."""
    parser.add_argument(
        "--accelerator",
        choices=(*ONE_DEVICE_ACCELERATORS, "null"),
        default="cpu",
        help=f"where the extractor {role}, as oml index build's accelerator: cpu (default), gpu (cuda), "
        "or null: gpu when CUDA is available, else cpu; the answers are the same",
    )
    parser.add_argument(
        "--devices",
        type=devices_value,
        default=1,
        metavar="DEVICES",
        help="the one device, as oml index build's devices: 1 (default; on gpu the first GPU), [i] "
        "(the GPU cuda:i), or null (every GPU, which must be one)",
    )


def device_of_arguments(args: argparse.Namespace, command: str) -> torch.device:
    """The ``torch.device`` of the options of :func:`add_one_device_arguments` (``--accelerator null``: CUDA when
    available); a device this machine lacks is a :class:`ValueError` naming ``command``'s option."""
    accelerator = None if args.accelerator == "null" else args.accelerator
    return one_device(accelerator, args.devices, command)


def devices_value(value: str) -> Any:
    """The value of ``--devices`` as a config holds it: ``1``, ``[0]``, ``null`` (argparse's type; JSON)."""
    try:
        return json.loads(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be 1, a list of one device index such as [0], or null, got {value!r}"
        ) from None


def positive_int(value: str) -> int:
    """An integer >= 1 (argparse's type, e.g. of ``--top-k``)."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return number


def positive_seconds(value: str) -> float:
    """A finite number of seconds > 0 (argparse's type, e.g. of ``--timeout`` and ``--lock-timeout``)."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {value!r}")
    return seconds


__all__ = [
    "add_one_device_arguments",
    "device_of_arguments",
    "devices_value",
    "positive_int",
    "positive_seconds",
]
