"""Tests of NeptunePipelineLogger: an offline run is read back from the operations Neptune queues on disk
(``<save_dir>/.neptune/offline/run__<id>__.../data-*.log``, one JSON operation a line) for ``neptune sync``."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from omegaconf import OmegaConf
from oml_loggers import NeptunePipelineLogger, TensorBoardPipelineLogger
from PIL import Image

import oml_core


def read_offline_run(save_dir: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The folder of the only offline run under ``save_dir`` and its queued operations, in order."""
    (folder,) = (save_dir / ".neptune" / "offline").glob("run__*")
    operations = [
        json.loads(line)["obj"]
        for log in sorted(folder.glob("data-*.log"))
        for line in log.read_text().splitlines()
        if line.strip()
    ]
    return folder, operations


def _at(operations: list[dict[str, Any]], *path: str, kind: str | None = None) -> list[dict[str, Any]]:
    return [op for op in operations if op["path"] == list(path) and kind in (None, op["type"])]


def _series(operations: list[dict[str, Any]], *path: str) -> list[tuple[int, float]]:
    return [(v["step"], v["value"]) for op in _at(operations, *path, kind="LogFloats") for v in op["values"]]


def test_offline_run_holds_metrics_hyperparams_figure_tags_and_files(tmp_path: Path, session) -> None:
    logger = NeptunePipelineLogger(mode="offline", name="r1", save_dir=tmp_path / "nep")
    assert logger.save_dir == str(tmp_path / "nep" / ".neptune")
    assert logger.name == "r1"
    session.run(logger)
    folder, ops = read_offline_run(tmp_path / "nep")

    assert folder.name.startswith("run__")
    assert _series(ops, "training", "loss") == session.series("loss")
    assert _series(ops, "training", "OVERALL", "cmc", "1") == session.series("OVERALL/cmc/1")
    assert _at(ops, "training", "hyperparams", "optimizer", "args", "lr")[0]["value"] == 0.001
    assert _at(ops, "training", "hyperparams", "metric_args", "cmc_top_k")[0]["value"] == "[1, 5]"
    assert _at(ops, "training", "hyperparams", "dataframe_name")[0]["value"] == "df.csv"
    assert _at(ops, "training", "hyperparams", "batch_size")[0]["value"] == 32
    assert _at(ops, "sys", "name")[0]["value"] == "r1"
    assert set(_at(ops, "sys", "tags")[-1]["values"]) == set(session.tags)
    assert _at(ops, "training", "status")[-1]["value"] == "success"

    ((image,),) = [op["values"] for op in _at(ops, "worst_queries", kind="LogImages")]
    assert image["step"] == session.figure_step
    png = Image.open(io.BytesIO(base64.b64decode(image["value"]["data"])))
    assert png.format == "PNG" and png.width > png.height  # Neptune saves it with a tight bounding box

    (config,) = _at(ops, "config", kind="UploadFile")
    config_text = (folder / "upload_path" / config["tmp_file_name"]).read_text()
    assert OmegaConf.to_container(OmegaConf.create(config_text)) == session.cfg
    (dataset,) = _at(ops, "dataset", kind="UploadFileSet")
    assert dataset["file_globs"] == [str(Path(session.cfg["dataset_root"]).resolve() / "df.csv")]
    (code,) = _at(ops, "code", kind="UploadFileSet")
    package = Path(oml_core.__file__).resolve().parent
    expected = {str(p) for pattern in ("*.py", "*.yaml") for p in package.rglob(pattern)}
    assert set(code["file_globs"]) == expected
    assert str(package / "registry" / "registry.py") in expected


def test_checkpoints_are_uploaded_when_asked(tmp_path: Path) -> None:
    checkpoints = SimpleNamespace(
        best_model_path=str(tmp_path / "best.ckpt"), last_model_path=str(tmp_path / "last.ckpt")
    )
    quiet = NeptunePipelineLogger(mode="offline", save_dir=tmp_path / "quiet", log_model_checkpoints=False)
    quiet.after_save_checkpoint(checkpoints)  # type: ignore[arg-type]
    assert quiet._run is None  # nothing logged: the run was not even created

    logger = NeptunePipelineLogger(mode="offline", save_dir=tmp_path / "nep", prefix="fit")
    logger.after_save_checkpoint(checkpoints)  # type: ignore[arg-type]
    run_id = logger.version
    logger.finalize("failed")
    folder, ops = read_offline_run(tmp_path / "nep")

    assert run_id in folder.name
    assert [op["file_path"] for op in _at(ops, "fit", "model", "checkpoints", "best", kind="UploadFile")] == [
        checkpoints.best_model_path
    ]
    assert [op["file_path"] for op in _at(ops, "fit", "model", "checkpoints", "last", kind="UploadFile")] == [
        checkpoints.last_model_path
    ]
    assert _at(ops, "fit", "model", "best_model_path")[0]["value"] == checkpoints.best_model_path
    assert _at(ops, "fit", "status")[0]["value"] == "failed"


def test_the_stages_of_a_pipeline_log_into_one_run_and_the_next_logger_stops_it(tmp_path: Path) -> None:
    first = NeptunePipelineLogger(mode="offline", save_dir=tmp_path / "first")
    first.log_metrics({"loss": 1.0}, step=0)
    first.finalize("success")  # the end of trainer.validate
    run = first.experiment
    first.log_metrics({"loss": 0.5}, step=1)
    first.finalize("success")  # the end of trainer.fit
    assert first.experiment is run and run.get_state() == "started"

    second = NeptunePipelineLogger(mode="offline", save_dir=tmp_path / "second")
    second.log_metrics({"loss": 2.0}, step=1)  # its own run, after stopping the first pipeline's
    assert run.get_state() == "stopped"
    second.close()
    _, ops = read_offline_run(tmp_path / "first")  # the only run folder
    assert _series(ops, "training", "loss") == [(0, 1.0), (1, 0.5)]
    assert [op["value"] for op in _at(ops, "training", "status")] == ["success"] * 3
    _, later = read_offline_run(tmp_path / "second")
    assert _series(later, "training", "loss") == [(1, 2.0)]


def test_a_tensorboard_logger_starting_the_next_pipeline_stops_it_too(tmp_path: Path) -> None:
    first = NeptunePipelineLogger(mode="offline", save_dir=tmp_path / "nep")
    first.log_metrics({"loss": 1.0}, step=0)
    first.finalize("success")
    run = first.experiment
    TensorBoardPipelineLogger(tmp_path / "tb").log_metrics({"loss": 2.0}, step=0)  # the next pipeline's
    assert run.get_state() == "stopped"


@pytest.mark.slow
def test_a_training_is_one_run_with_config_tags_curves_checkpoint_and_unchanged_weights(
    train_tiny, tensorboard_training, assert_same_weights
) -> None:
    result = train_tiny({"name": "neptune", "args": {"mode": "offline", "log_model_checkpoints": True}})
    # the only run folder: trainer.validate and trainer.fit share it
    folder, ops = read_offline_run(result.run_dir)

    hyperparams = {
        key: _at(ops, "training", "hyperparams", key)[0]["value"] for key in ("seed", "max_epochs")
    }
    assert hyperparams == {"seed": 7, "max_epochs": 1}
    assert set(_at(ops, "sys", "tags")[-1]["values"]) == {"logger-test", "tiny"}
    cmc = _series(
        ops, "training", "OVERALL", "cmc", "1"
    )  # before training (epoch 0, step 0) and after the epoch
    assert [value for _, value in cmc] == [
        result.epochs[0]["OVERALL/cmc/1"],
        result.epochs[1]["OVERALL/cmc/1"],
    ]
    assert cmc[0][0] == 0
    assert [step for step, _ in _series(ops, "training", "loss_step")] == [0, 1, 2, 3]  # 128 images / 32
    (checkpoint,) = _at(ops, "training", "model", "checkpoints", "best", kind="UploadFile")
    assert checkpoint["file_path"] == str(result.best_checkpoint)
    assert _at(ops, "training", "status")[-1]["value"] == "success"
    assert_same_weights(result, tensorboard_training)
