"""Run pipeline loggers offline under a network guard; run as a script by ``test_offline_network.py``.

    python offline_session.py OUT_DIR LOGGER [LOGGER ...]

The guard is installed before anything else is imported: an audit hook (``sys.addaudithook``, which sees every
socket call of the Python process, from any thread, through any library) and patches of ``socket.socket.connect``
/ ``connect_ex``, ``socket.create_connection``, ``socket.getaddrinfo``, ``socket.gethostbyname`` /
``gethostbyname_ex`` / ``gethostbyaddr`` and ``socket.getnameinfo``. A connection to an address that is not
this machine's loopback, or a name lookup of a name that is not local, is appended to ``OUT_DIR/network.jsonl``
(the call, the target, the logger whose session was running or ``"exit"``, the thread and the stack) and fails
with ``OSError``. Entries are written as they happen, so that what a client does at exit (``atexit`` handlers,
daemon threads) is kept too.

Each logger, in turn and in the same process (one start of torch and Lightning for all), logs metrics at two
steps, hyper-parameters, a figure and the pipeline info under ``OUT_DIR/<logger>``, then finalizes and ends its
run. The script writes ``OUT_DIR/summary.json``: per logger, its ``save_dir`` and ``version`` and the client switches
(environment variables) that its session set.
"""

from __future__ import annotations

import ipaddress
import json
import os
import socket
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
#: Address families that reach other machines (``AF_UNIX`` and ``AF_NETLINK`` stay on this one).
NETWORK_FAMILIES = frozenset({socket.AF_INET, socket.AF_INET6})
#: The environment variables that turn the clients' own reporting off, reported in the summary.
SWITCHES = ("MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK", "WANDB_ERROR_REPORTING")

_log_path = Path(sys.argv[1]) / "network.jsonl"
_log_lock = threading.Lock()
_in_guard = threading.local()
#: The logger whose session is running ("exit" once they are all done), named in the log's entries.
_current = {"logger": "import"}


def is_local_host(host: Any) -> bool:
    """True for no host, a loopback name, or a loopback or unspecified IP address."""
    if host is None or host in ("", b""):
        return True
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    name = str(host).strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        address = ipaddress.ip_address(name.partition("%")[0])
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def record(call: str, target: Any) -> None:
    """Append the attempt to the log (with the stack that made it) and fail it."""
    if getattr(_in_guard, "active", False):  # the guard's own file writing
        return
    _in_guard.active = True
    try:
        entry = {
            "call": call,
            "target": repr(target),
            "logger": _current["logger"],
            "thread": threading.current_thread().name,
            "stack": "".join(traceback.format_stack(limit=40)[:-2]),
        }
        with _log_lock, _log_path.open("a") as log:
            log.write(json.dumps(entry) + "\n")
    finally:
        _in_guard.active = False
    raise OSError(f"network guard: {call} {target!r} refused (the logger must stay offline)")


def _check_address(call: str, family: int, address: Any) -> None:
    if family in NETWORK_FAMILIES and isinstance(address, tuple) and not is_local_host(address[0]):
        record(call, address)


def audit(event: str, args: tuple[Any, ...]) -> None:
    """The audit hook: every socket connection, datagram and lookup of the process."""
    if not event.startswith("socket."):
        return
    if event in ("socket.connect", "socket.sendto"):
        sock, address = args
        _check_address(event, getattr(sock, "family", -1), address)
    elif event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
        if not is_local_host(args[0]):
            record(event, args[0])
    elif event == "socket.getnameinfo":
        sockaddr = args[0]
        if isinstance(sockaddr, tuple) and not is_local_host(sockaddr[0]):
            record(event, sockaddr)


def install_guard() -> None:
    """Install the audit hook and the ``socket`` patches."""
    sys.addaudithook(audit)
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guarded_connect(sock: socket.socket, address: Any) -> None:
        _check_address("socket.socket.connect", sock.family, address)
        return connect(sock, address)

    def guarded_connect_ex(sock: socket.socket, address: Any) -> int:
        _check_address("socket.socket.connect_ex", sock.family, address)
        return connect_ex(sock, address)

    socket.socket.connect = guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = guarded_connect_ex  # type: ignore[method-assign]

    def lookup(name: str, function: Any, host_arg: int = 0) -> Any:
        def guarded(*args: Any, **kwargs: Any) -> Any:
            host = args[host_arg] if len(args) > host_arg else kwargs.get("host")
            if name == "socket.getnameinfo":
                host = host[0] if isinstance(host, tuple) else host
            if not is_local_host(host):
                record(name, host)
            return function(*args, **kwargs)

        return guarded

    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo"):
        setattr(socket, name, lookup(f"socket.{name}", getattr(socket, name)))
    create_connection = socket.create_connection

    def guarded_create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if not is_local_host(address[0]):
            record("socket.create_connection", address)
        return create_connection(address, *args, **kwargs)

    socket.create_connection = guarded_create_connection  # type: ignore[assignment]


def make_logger(name: str, out: Path) -> Any:
    """The logger ``name`` configured to log offline under ``out``."""
    if name == "tensorboard":
        from oml_loggers import TensorBoardPipelineLogger

        return TensorBoardPipelineLogger(save_dir=out / "tb")
    if name == "mlflow":
        from oml_loggers import MLFlowPipelineLogger

        return MLFlowPipelineLogger(experiment_name="oml", run_name="offline", save_dir=out / "mlruns")
    if name == "mlflow_file":
        from oml_loggers import MLFlowPipelineLogger

        return MLFlowPipelineLogger(experiment_name="oml", tracking_uri=(out / "ml-runs").as_uri())
    if name == "wandb":
        from oml_loggers import WandBPipelineLogger

        return WandBPipelineLogger(project="oml", name="offline", save_dir=out / "wb", offline=True)
    if name == "neptune":
        from oml_loggers import NeptunePipelineLogger

        return NeptunePipelineLogger(mode="offline", name="offline", save_dir=out / "nep")
    if name == "neptune_debug":
        from oml_loggers import NeptunePipelineLogger

        return NeptunePipelineLogger(mode="debug", name="offline", save_dir=out / "nep")
    if name == "clearml":
        from oml_loggers import ClearMLPipelineLogger

        return ClearMLPipelineLogger(project_name="oml", task_name="offline")
    raise ValueError(f"unknown logger {name!r}")


def run_session(name: str, out: Path) -> dict[str, Any]:
    """Log with the logger ``name`` what a pipeline logs (metrics, hyper-parameters, a figure, the pipeline
    info) under ``out``, then finalize; return its ``save_dir``, ``version`` and the switches it set."""
    from argparse import Namespace

    from matplotlib.figure import Figure

    before = {switch: os.environ.get(switch) for switch in SWITCHES}
    _current["logger"] = name
    out.mkdir(parents=True)
    dataset = out / "dataset"
    dataset.mkdir()
    (dataset / "df.csv").write_text("label,path,split,is_query,is_gallery\n0,a.jpg,train,,\n")
    cfg = {"seed": 42, "dataset_root": str(dataset), "dataframe_name": "df.csv", "tags": ["offline"]}
    figure = Figure(figsize=(2, 1), dpi=50)
    figure.gca().plot([0, 1], [1, 0])
    logger = make_logger(name, out)
    logger.log_metrics({"loss": 0.5, "OVERALL/cmc/1": 0.25}, step=1)
    logger.log_metrics({"loss": 0.125, "OVERALL/cmc/1": 0.75}, step=2)
    logger.log_hyperparams(Namespace(batch_size=32))
    logger.log_figure(figure, "worst_queries", 2)
    logger.log_pipeline_info(cfg)
    version = str(logger.version)
    logger.finalize("success")
    if hasattr(logger, "close"):  # a client's run outlives the stage: end it within the logger's session
        logger.close()
    after = {switch: os.environ.get(switch) for switch in SWITCHES}
    return {
        "save_dir": logger.save_dir,
        "version": version,
        "switches_set": {switch: value for switch, value in after.items() if value != before[switch]},
        "switches": after,
    }


if __name__ == "__main__":
    install_guard()
    root = Path(sys.argv[1])
    summary = {name: run_session(name, root / name) for name in sys.argv[2:]}
    _current["logger"] = "exit"
    (root / "summary.json").write_text(json.dumps(summary))
