"""Tests of ClearMLPipelineLogger: an offline session is read back from the zip ClearML stores when the task is
closed (``<CLEARML_CACHE_DIR>/offline/<task id>.zip``: ``task.json``, ``metrics.jsonl`` and ``data/``)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf
from oml_loggers import ClearMLPipelineLogger
from PIL import Image

import oml_core


class OfflineSession:
    """The files of an offline session zip."""

    def __init__(self, path: Path) -> None:
        self.zip = zipfile.ZipFile(path)
        self.task = json.loads(self.zip.read("task.json"))
        self.events: list[dict[str, Any]] = [
            event
            for line in self.zip.read("metrics.jsonl").splitlines()
            if line
            for event in json.loads(line)
        ]

    def series(self, metric: str) -> list[tuple[int, float]]:
        return [
            (e["iter"], e["value"])
            for e in self.events
            if e["type"] == "training_stats_scalar" and e["metric"] == e["variant"] == metric
        ]

    def param(self, name: str) -> str:
        return self.task["hyperparams"]["General"][name]["value"]

    def artifact(self, key: str) -> bytes:
        """The content of the artifact ``key`` (its file inside the session's ``data/`` folder)."""
        (uri,) = [a["uri"] for a in self.task["execution"]["artifacts"] if a["key"] == key]
        return self.zip.read("data/" + uri.partition("/data/")[2])


@pytest.mark.usefixtures("clearml_offline_state")
def test_offline_session_holds_scalars_hyperparams_image_tags_and_artifacts(
    isolated_clients: Path, session
) -> None:
    logger = ClearMLPipelineLogger(project_name="oml", task_name="r1")
    session.run(logger)
    (archive,) = (isolated_clients / "clearml_cache" / "offline").glob("offline-*.zip")
    recorded = OfflineSession(archive)

    assert (recorded.task["project_name"], recorded.task["name"]) == ("oml", "r1")
    assert recorded.task["id"] == archive.stem
    assert recorded.series("loss") == session.series("loss")
    assert recorded.series("OVERALL/cmc/1") == session.series("OVERALL/cmc/1")
    assert recorded.param("optimizer/args/lr") == "0.001"
    assert recorded.param("metric_args/cmc_top_k") == "[1, 5]"
    assert recorded.param("dataframe_name") == "df.csv"
    assert recorded.param("batch_size") == "32"
    assert set(recorded.task["tags"]) == set(session.tags)

    (image,) = [e for e in recorded.events if e["type"] == "training_debug_image"]
    assert (image["metric"], image["iter"]) == (session.figure_title, session.figure_step)
    jpeg = Image.open(io.BytesIO(recorded.zip.read("data/" + image["key"])))
    assert jpeg.format == "JPEG" and jpeg.width > jpeg.height  # ClearML saves it with a tight bounding box

    config = OmegaConf.create(recorded.artifact("config").decode())
    assert OmegaConf.to_container(config) == session.cfg
    dataset = zipfile.ZipFile(io.BytesIO(recorded.artifact("dataset")))
    assert dataset.read("df.csv") == (Path(session.cfg["dataset_root"]) / "df.csv").read_bytes()
    code = zipfile.ZipFile(io.BytesIO(recorded.artifact("code")))
    assert code.read("oml_core/__init__.py") == Path(oml_core.__file__).read_bytes()
    assert "oml_core/registry/registry.py" in code.namelist()


@pytest.mark.usefixtures("clearml_offline_state")
def test_the_stages_of_a_pipeline_share_a_task_and_a_later_use_after_close_starts_a_new_one(
    isolated_clients: Path,
) -> None:
    logger = ClearMLPipelineLogger(project_name="oml", task_name="twice")
    logger.log_metrics({"loss": 1.0}, step=3)
    logger.finalize("success")  # the end of trainer.validate
    logger.log_metrics({"loss": 0.5}, step=4)
    logger.finalize("success")  # the end of trainer.fit
    first = logger.version
    logger.close()
    logger.log_metrics({"loss": 2.0}, step=5)
    second = logger.version
    logger.close()

    assert first != second and logger.name == "twice"
    offline = isolated_clients / "clearml_cache" / "offline"
    assert sorted(path.name for path in offline.glob("*.zip")) == sorted([f"{first}.zip", f"{second}.zip"])
    assert OfflineSession(offline / f"{first}.zip").series("loss") == [(3, 1.0), (4, 0.5)]
    assert OfflineSession(offline / f"{second}.zip").series("loss") == [(5, 2.0)]


@pytest.mark.usefixtures("clearml_offline_state")
def test_the_next_logger_closes_the_task_that_a_finished_pipeline_left_open(isolated_clients: Path) -> None:
    first = ClearMLPipelineLogger(project_name="oml", task_name="first")
    first.log_metrics({"loss": 1.0}, step=1)
    first.finalize("success")
    second = ClearMLPipelineLogger(project_name="oml", task_name="second")
    second.log_metrics({"loss": 2.0}, step=1)  # its own task (Task.init would return the open one)
    offline = isolated_clients / "clearml_cache" / "offline"
    (closed,) = offline.glob("*.zip")  # the first task, zipped when closed
    assert OfflineSession(closed).task["name"] == "first"
    second.close()
    sessions = {OfflineSession(path).task["name"]: OfflineSession(path) for path in offline.glob("*.zip")}
    assert sessions["first"].series("loss") == [(1, 1.0)]
    assert sessions["second"].series("loss") == [(1, 2.0)]


@pytest.mark.usefixtures("clearml_offline_state")
def test_the_task_leaves_the_processs_argparse_alone() -> None:
    """ClearML's argparse binding would record every later ``parse_args`` of the process into the task, even
    after it closed (then retrying a server for minutes: ``oml --version`` run in process hung so)."""
    import argparse

    logger = ClearMLPipelineLogger(project_name="oml", task_name="argparse")
    task = logger.experiment
    parser = argparse.ArgumentParser()
    parser.add_argument("--learning-rate", type=float, default=0.1)
    assert parser.parse_args(["--learning-rate", "0.5"]).learning_rate == 0.5
    assert not [key for key in task.get_parameters() if "learning" in key]
    logger.close()
    assert parser.parse_args([]).learning_rate == 0.1  # a closed task is not reached


@pytest.mark.usefixtures("clearml_offline_state")
def test_the_task_neither_reseeds_nor_takes_clearmls_default_seed_from_the_caller() -> None:
    """``Task.init`` seeds random, numpy and torch with ClearML's seed (1337) unless its seeding is off."""
    from clearml import Task

    torch.manual_seed(7)
    expected = torch.rand(3, generator=torch.Generator().manual_seed(7))
    logger = ClearMLPipelineLogger(project_name="oml", task_name="seeded")
    task = logger.experiment

    assert torch.equal(torch.rand(3), expected)  # the draws the seed 7 gives, not those of 1337
    assert task.get_random_seed() is None  # the task claims no seed of its own
    logger.close()
    assert Task._random_seed == 1337  # ClearML's default seed is back for the caller's own tasks


@pytest.mark.slow
@pytest.mark.usefixtures("clearml_offline_state")
def test_a_training_is_one_task_with_config_tags_curves_and_unchanged_weights(
    isolated_clients: Path, train_tiny, tensorboard_training, assert_same_weights
) -> None:
    result = train_tiny({"name": "clearml", "args": {"project_name": "oml", "task_name": "tiny"}})
    offline = isolated_clients / "clearml_cache" / "offline"
    # the only session: trainer.validate and trainer.fit share the task
    (archive,) = offline.glob("*.zip")
    assert [path.name for path in offline.iterdir() if path.is_dir()] == [archive.stem]
    recorded = OfflineSession(archive)

    assert (recorded.param("seed"), recorded.param("max_epochs")) == ("7", "1")
    assert set(recorded.task["tags"]) == {"logger-test", "tiny"}
    cmc = recorded.series("OVERALL/cmc/1")  # before training (epoch 0, step 0) and after the epoch
    assert [value for _, value in cmc] == [
        result.epochs[0]["OVERALL/cmc/1"],
        result.epochs[1]["OVERALL/cmc/1"],
    ]
    assert cmc[0][0] == 0
    assert [step for step, _ in recorded.series("loss_step")] == [0, 1, 2, 3]  # 128 training images / 32
    assert {a["key"] for a in recorded.task["execution"]["artifacts"]} == {"config", "dataset", "code"}
    assert_same_weights(result, tensorboard_training)


#: Two pipelines' loggers in one process, with a ``sys.exit`` between them that the process survives (as when
#: argparse's ``error`` or a plugin's import that oml's registry reports calls it); prints the second task's
#: session and the threads that its close left running (against those left after the first close).
EXIT_BETWEEN_TASKS = """
import json, sys, threading
from oml_loggers import ClearMLPipelineLogger

def run(name):
    logger = ClearMLPipelineLogger(project_name="oml", task_name=name)
    logger.log_metrics({"loss": 0.5}, step=1)
    logger.finalize("success")
    logger.log_metrics({"loss": 0.25}, step=2)
    logger.close()
    return logger

def threads():
    return sorted(t.name for t in threading.enumerate())

first = run("first")
after_first = threads()
try:
    sys.exit(3)
except SystemExit:
    pass
second = run("second")
print(json.dumps({"after_first": after_first, "after_second": threads()}))
"""


@pytest.mark.usefixtures("clearml_offline_state")
def test_a_sys_exit_the_process_survived_does_not_spoil_the_next_tasks_close(isolated_clients: Path) -> None:
    """ClearML's ``sys.exit`` hook records the code of a caught ``SystemExit`` for good, and ``Task.close`` took it
    for the end of the process: no flush and its reporter thread left running, which
    kept reporting after the close and, once ClearML was online again, retried forever and held the process at
    exit. The second task is closed as the first: with every metric and nothing left running."""
    done = subprocess.run(
        [sys.executable, "-c", EXIT_BETWEEN_TASKS], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    left = json.loads(done.stdout.strip().splitlines()[-1])
    assert left["after_second"] == left["after_first"]
    sessions = {
        session.task["name"]: session
        for session in map(OfflineSession, (isolated_clients / "clearml_cache" / "offline").glob("*.zip"))
    }
    assert sorted(sessions) == ["first", "second"]
    assert [session.series("loss") for session in sessions.values()] == [[(1, 0.5), (2, 0.25)]] * 2
