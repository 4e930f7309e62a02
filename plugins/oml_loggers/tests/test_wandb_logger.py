"""Tests of WandBPipelineLogger: an offline run is read back from its folder (the ``.wandb`` records and the
files it keeps)."""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf
from oml_loggers import WandBPipelineLogger
from oml_loggers.wandb import figure_to_array
from PIL import Image
from wandb.proto import wandb_internal_pb2

import oml_core

#: Layout of a ``.wandb`` file (W&B's LevelDB-style log): a 7-byte header, then 32 KiB blocks of chunks,
#: each with a 7-byte header (crc32, length, type); a record is one FULL chunk or FIRST, MIDDLE..., LAST.
FILE_HEADER = struct.Struct("<4sHB")
CHUNK_HEADER = struct.Struct("<IHB")
BLOCK_SIZE = 32 * 1024
FULL, FIRST, LAST = 1, 2, 4


def read_records(path: Path) -> list[wandb_internal_pb2.Record]:
    """The protobuf records of a ``.wandb`` file."""
    data = path.read_bytes()
    ident, magic, version = FILE_HEADER.unpack_from(data)
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0)
    records, chunks, pos = [], b"", FILE_HEADER.size
    while pos + CHUNK_HEADER.size <= len(data):
        if BLOCK_SIZE - pos % BLOCK_SIZE < CHUNK_HEADER.size:  # the block's tail is padding
            pos += BLOCK_SIZE - pos % BLOCK_SIZE
            continue
        _, length, kind = CHUNK_HEADER.unpack_from(data, pos)
        if length == 0 and kind == 0:
            break
        chunk = data[pos + CHUNK_HEADER.size : pos + CHUNK_HEADER.size + length]
        pos += CHUNK_HEADER.size + length
        chunks = chunk if kind in (FULL, FIRST) else chunks + chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunks)
            records.append(record)
    return records


def finished_records(path: Path, timeout: float = 20.0) -> list[wandb_internal_pb2.Record]:
    """The records of a finished run's file, once W&B's service has written them all (up to the ``exit``
    record): ``finish()`` returns before the service's writer has always flushed the file."""
    deadline = time.monotonic() + timeout
    while True:
        records = read_records(path)
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.05)


def _nested(items: Any) -> dict[str, Any]:
    """``{key: value}`` of history/summary/config items (nested keys joined with ``.``)."""
    return {(item.key or ".".join(item.nested_key)): json.loads(item.value_json) for item in items}


@dataclass
class OfflineRun:
    """What an offline run folder holds, from its records."""

    folder: Path
    history: list[dict[str, Any]] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    artifacts: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None

    @classmethod
    def read(cls, save_dir: Path) -> OfflineRun:
        (folder,) = (save_dir / "wandb").glob("offline-run-*")
        (records_file,) = folder.glob("run-*.wandb")
        run = cls(folder)
        for record in finished_records(records_file):
            kind = record.WhichOneof("record_type")
            if kind == "history":
                run.history.append(_nested(record.history.item))
            elif kind == "config":
                run.config.update(_nested(record.config.update))
            elif kind == "run":
                run.tags = tuple(record.run.tags)
            elif kind == "artifact":
                run.artifacts[record.artifact.name] = record.artifact
            elif kind == "exit":
                run.exit_code = record.exit.exit_code
        return run

    def series(self, name: str) -> list[tuple[int, float]]:
        return [(row["trainer/global_step"], row[name]) for row in self.history if name in row]


def test_offline_run_holds_metrics_config_figure_tags_and_artifacts(tmp_path: Path, session) -> None:
    logger = WandBPipelineLogger(project="oml", name="r1", save_dir=tmp_path / "wb", offline=True)
    session.run(logger)
    run = OfflineRun.read(tmp_path / "wb")

    assert run.exit_code == 0
    assert run.series("loss") == session.series("loss")
    assert run.series("OVERALL/cmc/1") == session.series("OVERALL/cmc/1")
    assert run.config["optimizer"] == {"name": "adam", "args": {"lr": 0.001}}
    assert run.config["metric_args"] == {"cmc_top_k": [1, 5]}
    assert run.config["batch_size"] == 32
    assert run.tags == session.tags

    (image_row,) = [row for row in run.history if "worst_queries.filenames" in row]
    assert image_row["trainer/global_step"] == session.figure_step
    (image_file,) = image_row["worst_queries.filenames"]
    assert Image.open(run.folder / "files" / image_file).size == (100, 50)

    assert {name: a.type for name, a in run.artifacts.items()} == {
        "config": "config",
        "dataset": "dataset",
        "code": "code",
    }
    files = {
        name: {entry.path: Path(entry.local_path) for entry in a.manifest.contents}
        for name, a in run.artifacts.items()
    }
    assert OmegaConf.to_container(OmegaConf.load(files["config"]["config.yaml"])) == session.cfg
    assert (
        files["dataset"]["df.csv"].read_text() == (Path(session.cfg["dataset_root"]) / "df.csv").read_text()
    )
    assert files["code"]["oml_core/__init__.py"].read_text() == Path(oml_core.__file__).read_text()
    assert "oml_core/registry/registry.py" in files["code"]


def test_wandb_mode_offline_from_the_environment_and_a_new_run_after_a_failed_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    logger = WandBPipelineLogger(project="oml", save_dir=tmp_path / "wb")  # no key needed offline
    logger.log_metrics({"loss": 1.0}, step=1)
    run_id = logger.version
    logger.finalize("failed")  # a failed stage ends the run
    first = OfflineRun.read(tmp_path / "wb")
    assert (first.exit_code, first.series("loss")) == (1, [(1, 1.0)])

    logger.log_metrics({"loss": 0.5}, step=2)  # a later use starts a new run
    second_id = logger.version
    logger.close()
    assert second_id not in (None, run_id)
    (records_file,) = (tmp_path / "wb" / "wandb").glob(f"offline-run-*-{second_id}/run-{second_id}.wandb")
    kinds = {r.WhichOneof("record_type"): r for r in finished_records(records_file)}
    assert kinds["exit"].exit.exit_code == 0
    assert _nested(kinds["history"].history.item)["loss"] == 0.5


def test_the_stages_of_a_pipeline_log_into_one_run_until_close(tmp_path: Path) -> None:
    logger = WandBPipelineLogger(project="oml", save_dir=tmp_path / "wb", offline=True)
    logger.log_metrics({"loss": 1.0}, step=0)
    logger.finalize("success")  # the end of trainer.validate
    logger.log_metrics({"loss": 0.5}, step=1)
    logger.finalize("success")  # the end of trainer.fit
    logger.close()
    run = OfflineRun.read(tmp_path / "wb")  # the only run folder

    assert (run.exit_code, run.series("loss")) == (0, [(0, 1.0), (1, 0.5)])


def test_the_next_logger_ends_the_run_that_a_finished_pipeline_left_open(tmp_path: Path) -> None:
    first = WandBPipelineLogger(project="oml", save_dir=tmp_path / "first", offline=True)
    first.log_metrics({"loss": 1.0}, step=1)
    first.finalize("success")
    second = WandBPipelineLogger(project="oml", save_dir=tmp_path / "second", offline=True)
    second.log_metrics({"loss": 2.0}, step=1)  # starts its own run, after finishing the first one
    earlier = OfflineRun.read(tmp_path / "first")
    assert (earlier.exit_code, earlier.series("loss")) == (0, [(1, 1.0)])

    second.close()
    later = OfflineRun.read(tmp_path / "second")
    assert (later.exit_code, later.series("loss")) == (0, [(1, 2.0)])


def test_a_run_the_caller_started_is_logged_into_and_left_running(tmp_path: Path) -> None:
    import wandb

    run = wandb.init(project="oml", mode="offline", dir=tmp_path)
    logger = WandBPipelineLogger(project="oml", save_dir=tmp_path, offline=True)
    with pytest.warns(UserWarning, match="wandb run already in progress"):
        logger.log_metrics({"loss": 1.0}, step=1)
    assert logger.version == run.id
    logger.close()
    assert wandb.run is run  # not finished: the caller's run
    run.finish()
    assert OfflineRun.read(tmp_path).series("loss") == [(1, 1.0)]


@pytest.mark.slow
def test_a_training_is_one_run_with_config_tags_curves_checkpoint_and_unchanged_weights(
    train_tiny, tensorboard_training, assert_same_weights
) -> None:
    result = train_tiny({"name": "wandb", "args": {"project": "oml", "offline": True, "log_model": True}})
    run = OfflineRun.read(result.run_dir)  # the only run folder: trainer.validate and trainer.fit share it

    assert run.exit_code == 0
    assert (run.config["seed"], run.config["max_epochs"], run.config["bs_train"]) == (7, 1, 32)
    assert run.tags == ("logger-test", "tiny")
    cmc = run.series("OVERALL/cmc/1")  # before training (epoch 0, step 0) and after the epoch
    assert [value for _, value in cmc] == [
        result.epochs[0]["OVERALL/cmc/1"],
        result.epochs[1]["OVERALL/cmc/1"],
    ]
    assert cmc[0][0] == 0
    assert [step for step, _ in run.series("loss_step")] == [0, 1, 2, 3]  # 128 training images / 32
    assert {name: a.type for name, a in run.artifacts.items() if a.type != "model"} == {
        "config": "config",
        "dataset": "dataset",
        "code": "code",
    }
    (model,) = [a for a in run.artifacts.values() if a.type == "model"]  # log_model: the best checkpoint
    assert [entry.path for entry in model.manifest.contents] == ["model.ckpt"]
    assert_same_weights(result, tensorboard_training)


def test_figure_to_array_is_rgb_pixels(figure) -> None:
    pixels = figure_to_array(figure)
    assert (pixels.shape, pixels.dtype.name) == ((50, 100, 3), "uint8")
    assert pixels[0, 0].tolist() == [255, 255, 255]  # white background
