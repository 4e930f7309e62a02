"""``oml serve INDEX``: the command line of the service (registered as a ``command`` row of ``OML_COMPONENTS``).

    oml serve INDEX [--host 127.0.0.1] [--port 8000] [--accelerator cpu|gpu|null] [--devices DEVICES]
        [--max-batch 32] [--max-wait-ms 2] [--max-request-bytes 16777216] [--max-top-k 100] [--token TOKEN]
        [--lock-timeout 10] [--onnx DIR]

The settings are checked first (a host other than loopback needs a token: ``--token`` or ``OML_SERVE_TOKEN``),
then, with ``--onnx DIR``, the export of ``oml export`` is read (the ``onnx`` extractor) and refused unless it was
made from the index's weights (the same file or the same tensors: see :func:`onnx_extractor`), then the index is
loaded once (:meth:`GalleryIndex.load <oml_core.index.GalleryIndex.load>`: its digests, and its
probe embedded by the extractor on the device), then uvicorn serves the application until Ctrl-C or SIGTERM.
Each of these errors is one line (exit 2), before the service listens.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import cast

import torch
import uvicorn

from oml_core.cli.arguments import add_one_device_arguments, device_of_arguments
from oml_core.index import GalleryIndex
from oml_core.index.storage import INDEX_FILE, WEIGHTS_FILE, read_json, read_weights
from oml_core.interfaces.models import IExtractor
from oml_core.io.provenance import state_dict_sha256
from oml_core.registry import ConfigError, Registry
from oml_core.utils.logs import PACKAGE_LOGGER, get_logger
from oml_serve.app import create_app
from oml_serve.service import ServedIndex
from oml_serve.settings import (
    DEFAULT_HOST,
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_TOP_K,
    DEFAULT_MAX_WAIT_MS,
    DEFAULT_PORT,
    TOKEN_ENV,
    ServeSettings,
)

log = get_logger(f"{PACKAGE_LOGGER}.{__name__}")


def serve_command(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """Add ``oml serve``'s arguments to ``parser`` and return its handler (see the module)."""
    parser.add_argument("index", type=Path, metavar="INDEX", help="the folder of an index (oml index build)")
    parser.add_argument(
        "--host", default=DEFAULT_HOST, help=f"the address to listen on (default: {DEFAULT_HOST})"
    )
    parser.add_argument(
        "--port", type=_int_at_least(0), default=DEFAULT_PORT, help=f"the TCP port (default: {DEFAULT_PORT})"
    )
    add_one_device_arguments(parser, "embeds the queries")
    parser.add_argument(
        "--max-batch",
        type=_int_at_least(1),
        default=DEFAULT_MAX_BATCH,
        metavar="N",
        help=f"queries of concurrent requests embedded in one forward pass at most (default: {DEFAULT_MAX_BATCH})",
    )
    parser.add_argument(
        "--max-wait-ms",
        type=_milliseconds,
        default=DEFAULT_MAX_WAIT_MS,
        metavar="MS",
        help=f"how long a batch waits for more queries after its first (default: {DEFAULT_MAX_WAIT_MS:g})",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=_int_at_least(1),
        default=DEFAULT_MAX_REQUEST_BYTES,
        metavar="BYTES",
        help=f"the largest request (an upload) accepted; larger: 413 (default: {DEFAULT_MAX_REQUEST_BYTES})",
    )
    parser.add_argument(
        "--max-top-k",
        type=_int_at_least(1),
        default=DEFAULT_MAX_TOP_K,
        metavar="K",
        help=f"the largest top_k of a search (default: {DEFAULT_MAX_TOP_K})",
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"the bearer token that writes to the index must carry (default: ${TOKEN_ENV}); required when "
        "--host is not a loopback address",
    )
    parser.add_argument(
        "--lock-timeout",
        type=_seconds,
        default=DEFAULT_LOCK_TIMEOUT,
        metavar="SECONDS",
        help=f"how long a write waits for another process that is changing the index; then it is answered 503 "
        f"(default: {DEFAULT_LOCK_TIMEOUT:g})",
    )
    parser.add_argument(
        "--onnx",
        type=Path,
        metavar="DIR",
        help="embed the queries with the ONNX export of the index's model (oml export INDEX --output DIR) on "
        "onnxruntime instead of PyTorch; refused unless it was made from the index's weights",
    )
    return run_serve


def run_serve(args: argparse.Namespace) -> int:
    """Check the settings, load the index, serve it until stopped; 0 when stopped.

    Raises:
        ConfigError: bad settings (before the index is read); see :func:`load_served_index`.
    """
    settings = ServeSettings(
        host=args.host,
        port=args.port,
        max_batch=args.max_batch,
        max_wait_ms=args.max_wait_ms,
        max_request_bytes=args.max_request_bytes,
        max_top_k=args.max_top_k,
        token=args.token if args.token is not None else os.environ.get(TOKEN_ENV),
        lock_timeout=args.lock_timeout,
    )
    served = load_served_index(args.index, settings, device_of_arguments(args, "serve"), args.onnx)
    log.info(
        "Serving %d items of %s on %s%s (the search page: %s/, the API: %s/docs)",
        len(served.index),
        args.index,
        served.health()["device"],
        "" if args.onnx is None else f", its queries embedded by the ONNX export {args.onnx}",
        settings.url,
        settings.url,
    )
    uvicorn.run(create_app(served), host=settings.host, port=settings.port, log_level="info")
    return 0


def load_served_index(
    folder: Path, settings: ServeSettings, device: torch.device, onnx: Path | None = None
) -> ServedIndex:
    """The index of ``folder`` loaded once, its queries embedded on ``device`` (by the ONNX export ``onnx`` when
    given, see :func:`onnx_extractor`), its extractor built and checked against its probe
    (:meth:`ServedIndex.warm_up <oml_serve.service.ServedIndex.warm_up>`: an export must reproduce the probe's
    embedding as the index's own model does).

    Raises:
        GalleryIndexError: the index cannot be read or its model does not match it (naming the file); the export
            does not reproduce the embedding of the index's probe.
        ConfigError: see :func:`onnx_extractor`.
        RegistryError: a component of the index is not registered (its plugin is not installed).
    """
    registry = Registry()
    extractor = None if onnx is None else onnx_extractor(folder, onnx, registry, device)
    index = GalleryIndex.load(folder, registry=registry, device=device, extractor=extractor)
    served = ServedIndex(index, str(folder), settings, extractor=extractor)
    served.warm_up()
    return served


def onnx_extractor(folder: Path, export: Path, registry: Registry, device: torch.device) -> IExtractor:
    """The ``onnx`` extractor of the export folder ``export`` on ``device``, checked to come from the weights of the
    index ``folder``: the same file (the ``weights_sha256`` of both: an export of the index) or the same tensors
    (the export's ``state_dict_sha256`` and the digest of the index's ``weights.pt``'s tensors: an export of the
    checkpoint the index was built from).

    Raises:
        ConfigError: the export was made from other weights, or the index's digest is unknown.
        GalleryIndexError: the index's ``index.json`` or weights cannot be read.
        ExportError: ``export`` is no export of ``oml export``, or onnxruntime is missing.
    """
    extractor = registry.build(
        "extractor", {"name": "onnx", "args": {"path": str(export), "device": str(device)}}
    )
    manifest = extractor.manifest
    index_file = Path(folder) / INDEX_FILE
    meta = read_json(index_file)
    ours = meta.get("weights_sha256") if isinstance(meta, dict) else None
    if ours is not None and manifest.weights_sha256 == ours:
        return cast(IExtractor, extractor)
    if ours is not None and manifest.state_dict_sha256 is not None:
        tensors = state_dict_sha256(read_weights(Path(folder) / WEIGHTS_FILE, ours))
        if tensors == manifest.state_dict_sha256:
            return cast(IExtractor, extractor)
    raise ConfigError(
        f"--onnx {export}: its export.json says it was made from weights of sha256 {manifest.weights_sha256} "
        f"(tensors {manifest.state_dict_sha256}), and {index_file} was built with {ours}: export this index's "
        f"model (oml export {folder} --output DIR) or the checkpoint it was built from"
    )


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """argparse's type of an integer >= ``minimum``."""

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = minimum - 1
        if number < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {value!r}")
        return number

    return parse


def _seconds(value: str) -> float:
    """argparse's type of ``--lock-timeout``: a number > 0."""
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not 0 < number < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {value!r}")
    return number


def _milliseconds(value: str) -> float:
    """argparse's type of ``--max-wait-ms``: a number >= 0."""
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of milliseconds >= 0, got {value!r}")
    return number


__all__ = ["load_served_index", "run_serve", "serve_command"]
