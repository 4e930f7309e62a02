"""Fixtures of the loggers plugin's tests: every client writes under tmp_path, offline, with no credentials."""

from __future__ import annotations

import random
import socket
from argparse import Namespace
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure
from oml_loggers.lifetime import ClientRunLogger, end_open_runs

from oml_core.interfaces.loggers import IPipelineLogger
from oml_core.lightning.pipelines.train import TrainingResult, extractor_training_pipeline
from oml_core.registry import Registry
from oml_core.utils.rng_state import get_rng_state

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
#: ``norm_resize`` args of 32 px images under which white (the mock figures' background) becomes 0.
IMAGE_ARGS = {"im_size": 32, "mean": [1.0] * 3, "std": [0.25] * 3}
#: The tiny training of the end-to-end tests (with ``logs_root`` and ``logger`` added): one epoch of the
#: example plugin's ``tiny_conv`` on the mock dataset (4 steps of 32 randomly flipped images, so that a changed
#: random state changes the weights), validated before training (a ``trainer.validate`` before the
#: ``trainer.fit``: two Trainer stages into one run) and after the epoch.
TINY_TRAINING: dict[str, Any] = {
    "postfix": "tiny",
    "tags": ["logger-test"],
    "seed": 7,
    "accelerator": "cpu",
    "devices": 1,
    "dataframe_name": "df.csv",
    "check_images": False,
    "transforms_train": {"name": "augs_flip", "args": IMAGE_ARGS},
    "transforms_val": {"name": "norm_resize", "args": IMAGE_ARGS},
    "sampler": None,
    "bs_train": 32,
    "bs_val": 64,
    "max_epochs": 1,
    "validate_before_training": True,
    "metric_args": {"cmc_top_k": [1], "map_top_k": [5], "return_only_overall_category": True},
    "metric_for_checkpointing": "OVERALL/cmc/1",
    "extractor": {"name": "tiny_conv", "args": {"feat_dim": 8}},
    "criterion": {"name": "contrastive_example", "args": {"margin": 0.5}},
    "optimizer": {"name": "sgd", "args": {"lr": 0.05}},
    "lightning_trainer_extra_args": {"enable_progress_bar": False},
}
#: The plugins the tiny training needs (``tiny_conv`` and ``contrastive_example`` come from the example plugin).
TINY_TRAINING_PLUGINS = ("oml_plugin_example", "oml_loggers")


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
def clearml_offline_state() -> Iterator[None]:
    """Close, after a test, a ClearML task the test left open. ClearML's process-wide offline switch, which the
    logger turns on, stays on for the rest of the process: no test uses ClearML online, and turning it off without
    ``Task.set_offline(False)`` (which would connect) leaves the sessions built offline unconnected, so that
    anything ClearML still sent would fail and be retried forever (``'Session' object has no attribute
    '_Session__max_req_size'``), holding the process at exit."""
    from clearml import Task

    yield
    end_open_runs()
    leftover = Task.current_task()
    if leftover is not None:
        leftover.close()


@pytest.fixture(autouse=True)
def no_run_left_open(isolated_clients: Path, no_network: None) -> Iterator[None]:
    """End the runs a test's loggers left open after a successful stage, within the test's isolation (another
    test's logger would end them otherwise)."""
    yield
    end_open_runs()


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


@contextmanager
def random_state_kept(seed: int) -> Iterator[None]:
    """Seed Python's, NumPy's and torch's global generators with ``seed`` (as a pipeline does before it logs),
    then assert that the block left each of them as it was."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    before = get_rng_state({})
    yield
    after = get_rng_state({})
    assert after["python"] == before["python"], "Python's random generator was drawn from or reseeded"
    assert after["numpy"] == before["numpy"], "NumPy's global generator was drawn from or reseeded"
    assert torch.equal(after["torch"], before["torch"]), "torch's generator was drawn from or reseeded"


@pytest.fixture(scope="session")
def random_state_kept_by() -> Callable[[int], AbstractContextManager[None]]:
    """:func:`random_state_kept` (a fixture, as test modules cannot import the conftest under importlib mode)."""
    return random_state_kept


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
        figure and the pipeline info, then finalize (the end of a Trainer stage) and end the run (``close``, for
        the loggers whose run outlives a stage); and check that all this left the global random generators as
        they were (the training that the logger logs draws from them)."""
        with random_state_kept(self.cfg["seed"]):
            for step, values in self.metrics.items():
                logger.log_metrics(values, step=step)
            logger.log_hyperparams(Namespace(batch_size=32))
            logger.log_figure(self.figure, self.figure_title, self.figure_step)
            logger.log_pipeline_info(self.cfg)
            logger.finalize("success")
            if isinstance(logger, ClientRunLogger):
                logger.close()

    def series(self, name: str) -> list[tuple[int, float]]:
        """``[(step, value)]`` of the metric ``name``."""
        return [(step, values[name]) for step, values in self.metrics.items()]


@pytest.fixture()
def session(pipeline_cfg: dict[str, Any], figure: Figure) -> Session:
    """The standard logging session of the tests."""
    return Session(cfg=pipeline_cfg, figure=figure)


def _train_tiny(logs_root: Path, logger: dict[str, Any]) -> TrainingResult:
    """Train :data:`TINY_TRAINING` with the logger ``logger`` (a ``{name, args}`` spec) under ``logs_root``."""
    registry = Registry(allow=TINY_TRAINING_PLUGINS, strict=True)
    return extractor_training_pipeline(
        {**TINY_TRAINING, "logs_root": str(logs_root), "logger": logger}, registry
    )


@pytest.fixture(scope="session")
def tensorboard_training(oml_cache_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> TrainingResult:
    """The tiny training with the default logger, TensorBoard: the weights every logger must train to."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
        return _train_tiny(
            tmp_path_factory.mktemp("tensorboard_training"), {"name": "tensorboard", "args": {}}
        )


@pytest.fixture()
def train_tiny(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, oml_cache_dir: Path
) -> Callable[[dict[str, Any]], TrainingResult]:
    """Train the tiny training with a logger spec ``{name, args}`` (logs under ``tmp_path/logs``); returns its
    :class:`TrainingResult` once the run is ended (:func:`end_open_runs`: its local files are complete)."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))

    def train(logger: dict[str, Any]) -> TrainingResult:
        result = _train_tiny(tmp_path / "logs", logger)
        end_open_runs()
        return result

    return train


@pytest.fixture(scope="session")
def assert_same_weights() -> Callable[[TrainingResult, TrainingResult], None]:
    """Assert that two trainings wrote bitwise equal weights: every tensor of the ``state_dict`` of their
    ``best.ckpt`` and of their ``last.ckpt``."""

    def check(trained: TrainingResult, reference: TrainingResult) -> None:
        for name in ("best_checkpoint", "last_checkpoint"):
            ours = torch.load(getattr(trained, name), weights_only=True)["state_dict"]
            theirs = torch.load(getattr(reference, name), weights_only=True)["state_dict"]
            assert list(ours) == list(theirs)
            different = [key for key in ours if not torch.equal(ours[key], theirs[key])]
            assert different == [], f"{name}: these weights differ from the TensorBoard run's: {different}"

    return check
