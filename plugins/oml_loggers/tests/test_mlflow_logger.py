"""Tests of MLFlowPipelineLogger: what it logs is read back with MlflowClient from the local store."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf
from oml_loggers import MLFlowPipelineLogger
from PIL import Image

import oml_core


def _artifact_paths(client: MlflowClient, run_id: str, path: str | None = None) -> set[str]:
    """Every artifact file of the run, recursively."""
    found: set[str] = set()
    for info in client.list_artifacts(run_id, path):
        found |= _artifact_paths(client, run_id, info.path) if info.is_dir else {info.path}
    return found


def test_default_store_is_sqlite_under_save_dir_and_holds_everything(tmp_path: Path, session) -> None:
    logger = MLFlowPipelineLogger(experiment_name="oml", run_name="r1", save_dir=tmp_path / "mlruns")
    assert logger.save_dir == str(tmp_path / "mlruns")
    session.run(logger)

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    run = client.get_run(logger.run_id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "r1"
    assert client.get_experiment(run.info.experiment_id).name == "oml"
    assert run.info.artifact_uri.startswith((tmp_path / "mlruns" / "artifacts").as_uri())

    for name in ("loss", "OVERALL/cmc/1"):
        history = client.get_metric_history(logger.run_id, name)
        assert sorted((m.step, m.value) for m in history) == session.series(name)

    params = run.data.params
    assert params["optimizer/args/lr"] == "0.001"
    assert params["metric_args/cmc_top_k"] == "[1, 5]"
    assert params["dataframe_name"] == "df.csv"
    assert params["batch_size"] == "32"
    assert {tag: run.data.tags.get(tag) for tag in session.tags} == dict.fromkeys(session.tags, "tag")

    artifacts = _artifact_paths(client, logger.run_id)
    assert {"figures/worst_queries/2.png", "config.yaml", "dataset/df.csv"} <= artifacts
    assert {"code/oml_core/__init__.py", "code/oml_core/registry/registry.py"} <= artifacts
    assert "code/oml_core/configs/extractor_training_pipeline.yaml" in artifacts

    png = Path(client.download_artifacts(logger.run_id, "figures/worst_queries/2.png", str(tmp_path / "dl")))
    assert Image.open(io.BytesIO(png.read_bytes())).size == (100, 50)
    config = Path(client.download_artifacts(logger.run_id, "config.yaml", str(tmp_path / "dl")))
    assert OmegaConf.to_container(OmegaConf.load(config)) == session.cfg
    df = Path(client.download_artifacts(logger.run_id, "dataset/df.csv", str(tmp_path / "dl")))
    assert df.read_text() == (Path(session.cfg["dataset_root"]) / "df.csv").read_text()
    source = Path(client.download_artifacts(logger.run_id, "code/oml_core/__init__.py", str(tmp_path / "dl")))
    assert source.read_text() == Path(oml_core.__file__).read_text()


def test_tracking_uri_from_environment_and_a_run_named_by_mlflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, random_state_kept_by
) -> None:
    uri = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    logger = MLFlowPipelineLogger(experiment_name="from_env", artifact_location=(tmp_path / "art").as_uri())
    assert logger.save_dir is None  # not a local folder of its own
    with random_state_kept_by(7):  # no run_name: MLflow draws one from Python's random generator
        logger.log_metrics({"loss": 2.0}, step=7)
    logger.finalize("failed")
    run = MlflowClient(uri).get_run(logger.run_id)
    assert (run.info.status, run.data.metrics) == ("FAILED", {"loss": 2.0})
    assert run.info.run_name  # a name of MLflow's making, e.g. "bold-fox-123"


def test_file_store_needs_mlflow_allow_file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    uri = f"file:{tmp_path / 'ml-runs'}"
    with pytest.raises(ValueError, match="MLFLOW_ALLOW_FILE_STORE=true") as error:
        MLFlowPipelineLogger(experiment_name="exp", tracking_uri=uri)
    assert "MLFlowPipelineLogger" in str(error.value) and "sqlite:///" in str(error.value)

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # OML's example: a file store, allowed
    logger = MLFlowPipelineLogger(experiment_name="exp", tracking_uri=uri)
    logger.log_metrics({"OVERALL/cmc/1": 0.5}, step=1)
    logger.finalize("success")
    assert logger.save_dir == str(tmp_path / "ml-runs")
    run = MlflowClient(uri).get_run(logger.run_id)
    assert run.data.metrics == {"OVERALL/cmc/1": 0.5}
    assert (tmp_path / "ml-runs" / run.info.experiment_id / logger.run_id).is_dir()


@pytest.mark.slow
def test_a_training_is_one_run_with_config_tags_curves_checkpoint_and_unchanged_weights(
    train_tiny, tensorboard_training, assert_same_weights
) -> None:
    result = train_tiny({"name": "mlflow", "args": {"experiment_name": "oml", "log_model": True}})
    client = MlflowClient(f"sqlite:///{result.run_dir / 'mlflow.db'}")
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    (run,) = client.search_runs(experiments)  # the only run: trainer.validate and trainer.fit share it

    assert run.info.status == "FINISHED"
    params = run.data.params
    assert (params["seed"], params["max_epochs"], params["bs_train"]) == ("7", "1", "32")
    assert {tag: run.data.tags.get(tag) for tag in ("logger-test", "tiny")} == {
        "logger-test": "tag",
        "tiny": "tag",
    }
    cmc = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "OVERALL/cmc/1"))
    assert [value for _, value in cmc] == [
        result.epochs[0]["OVERALL/cmc/1"],
        result.epochs[1]["OVERALL/cmc/1"],
    ]
    assert cmc[0][0] == 0
    loss = client.get_metric_history(run.info.run_id, "loss_step")
    assert sorted(m.step for m in loss) == [0, 1, 2, 3]  # 128 training images / 32
    assert "best/best.ckpt" in _artifact_paths(client, run.info.run_id)  # log_model: the best checkpoint
    assert_same_weights(result, tensorboard_training)
