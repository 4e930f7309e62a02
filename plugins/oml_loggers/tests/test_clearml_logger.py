"""Tests of ClearMLPipelineLogger: an offline session is read back from the zip ClearML stores when the task is
closed (``<CLEARML_CACHE_DIR>/offline/<task id>.zip``: ``task.json``, ``metrics.jsonl`` and ``data/``)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
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
def test_a_new_task_after_finalize(isolated_clients: Path) -> None:
    logger = ClearMLPipelineLogger(project_name="oml", task_name="twice")
    logger.log_metrics({"loss": 1.0}, step=3)
    first = logger.version
    logger.finalize("success")
    logger.log_metrics({"loss": 2.0}, step=4)
    second = logger.version
    logger.finalize("success")

    assert first != second and logger.name == "twice"
    offline = isolated_clients / "clearml_cache" / "offline"
    assert OfflineSession(offline / f"{first}.zip").series("loss") == [(3, 1.0)]
    assert OfflineSession(offline / f"{second}.zip").series("loss") == [(4, 2.0)]
