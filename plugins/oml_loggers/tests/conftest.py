"""Fixtures of the loggers plugin's tests: every client writes under tmp_path, offline, with no credentials."""

from __future__ import annotations

import socket
from argparse import Namespace
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure

from oml_core.interfaces.loggers import IPipelineLogger

#: Environment variables that would make a client log online, elsewhere or with someone's credentials.
CLIENT_VARIABLES = (
    "MLFLOW_TRACKING_URI",
    "MLFLOW_ALLOW_FILE_STORE",
    "WANDB_API_KEY",
    "WANDB_MODE",
    "WANDB_PROJECT",
    "NEPTUNE_API_TOKEN",
    "NEPTUNE_PROJECT",
    "NEPTUNE_MODE",
    "NEPTUNE_DATA_DIRECTORY",
    "CLEARML_API_ACCESS_KEY",
    "CLEARML_API_SECRET_KEY",
    "CLEARML_API_HOST",
)
#: Variables set for the whole process by the loggers (the clients' switches they set when they log offline) or
#: by the clients (ClearML's marker of the process that runs a task, which makes a child process's task a stub).
PROCESS_VARIABLES = (
    "MLFLOW_DISABLE_TELEMETRY",
    "WANDB_ERROR_REPORTING",
    "CLEARML_PROC_MASTER_ID",
    "TRAINS_PROC_MASTER_ID",
)
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@pytest.fixture(autouse=True)
def isolated_clients(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in ``tmp_path/work`` with every client's home, cache and config dirs under ``tmp_path``, no
    credentials in the environment, and ClearML configured to report from a thread (no subprocess to wait for).
    Returns the folder of the clients' own files."""
    clients = tmp_path / "clients"
    clients.mkdir()
    for name in CLIENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name in PROCESS_VARIABLES:  # unset, and unset again after the test whatever was set meanwhile
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(clients / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(clients / "xdg_cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(clients / "xdg_config"))
    for name in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(clients / name.lower()))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("CLEARML_CACHE_DIR", str(clients / "clearml_cache"))
    clearml_conf = clients / "clearml.conf"
    clearml_conf.write_text("sdk {\n  development {\n    report_use_subprocess: false\n  }\n}\n")
    monkeypatch.setenv("CLEARML_CONFIG_FILE", str(clearml_conf))
    monkeypatch.setenv("CLEARML_OFFLINE_MODE", "")  # Task.set_offline sets it: restored after the test
    monkeypatch.setenv("OML_CACHE_DIR", str(clients / "oml_cache"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return clients


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection to anything but this machine fails the test (the W&B client talks to its local service)."""
    connect = socket.socket.connect

    def local_only(sock: socket.socket, address: Any) -> None:
        host = address[0] if isinstance(address, tuple) else None
        if sock.family != socket.AF_UNIX and host not in LOCAL_HOSTS:
            raise AssertionError(f"a test tried to reach the network: {address!r}")
        connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)


@pytest.fixture()
def clearml_offline_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Restore ClearML's process-wide offline switch after a test (``Task.set_offline(False)`` would connect),
    closing first a task the test left open (closed online, it would try to reach a server)."""
    from clearml import Task
    from clearml.backend_api import Session
    from clearml.backend_interface.base import InterfaceBase

    monkeypatch.setattr(InterfaceBase, "_offline_mode", InterfaceBase._offline_mode)
    monkeypatch.setattr(Session, "_offline_mode", Session._offline_mode)
    yield
    leftover = Task.current_task()
    if leftover is not None:
        leftover.close()


@pytest.fixture()
def dataset_root(tmp_path: Path) -> Path:
    """A folder with a small dataframe ``df.csv``."""
    root = tmp_path / "dataset"
    root.mkdir()
    (root / "df.csv").write_text("label,path,split,is_query,is_gallery\n0,a.jpg,train,,\n1,b.jpg,train,,\n")
    return root


@pytest.fixture()
def pipeline_cfg(dataset_root: Path) -> dict[str, Any]:
    """A pipeline config naming the dataframe, with tags and a postfix."""
    return {
        "postfix": "metric_learning",
        "seed": 42,
        "dataset_root": str(dataset_root),
        "dataframe_name": "df.csv",
        "optimizer": {"name": "adam", "args": {"lr": 0.001}},
        "metric_args": {"cmc_top_k": [1, 5]},
        "scheduler": None,
        "tags": ["mock", "resnet"],
    }


@pytest.fixture()
def figure() -> Figure:
    """A 100 x 50 pixels matplotlib figure (no pyplot: no GUI backend involved)."""
    fig = Figure(figsize=(2, 1), dpi=50)
    fig.gca().plot([0, 1], [1, 0])
    return fig


@dataclass
class Session:
    """What every logger test logs (:meth:`run`) and so expects to read back."""

    cfg: dict[str, Any]
    figure: Figure
    metrics: dict[int, dict[str, float]] = field(
        default_factory=lambda: {
            1: {"loss": 0.5, "OVERALL/cmc/1": 0.25},
            2: {"loss": 0.125, "OVERALL/cmc/1": 0.75},
        }
    )
    figure_title: str = "worst_queries"
    figure_step: int = 2
    tags: tuple[str, ...] = ("mock", "resnet", "metric_learning")

    def run(self, logger: IPipelineLogger) -> None:
        """Log the metrics at their steps, the hyper-parameter ``batch_size = 32`` (as a ``Namespace``), the
        figure and the pipeline info, then finalize."""
        for step, values in self.metrics.items():
            logger.log_metrics(values, step=step)
        logger.log_hyperparams(Namespace(batch_size=32))
        logger.log_figure(self.figure, self.figure_title, self.figure_step)
        logger.log_pipeline_info(self.cfg)
        logger.finalize("success")

    def series(self, name: str) -> list[tuple[int, float]]:
        """``[(step, value)]`` of the metric ``name``."""
        return [(step, values[name]) for step, values in self.metrics.items()]


@pytest.fixture()
def session(pipeline_cfg: dict[str, Any], figure: Figure) -> Session:
    """The standard logging session of the tests."""
    return Session(cfg=pipeline_cfg, figure=figure)
