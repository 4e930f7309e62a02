"""Tests of TensorBoardPipelineLogger: figures and the pipeline info end up in the event file."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from matplotlib.figure import Figure
from omegaconf import OmegaConf
from oml_loggers import TensorBoardPipelineLogger, cfg_to_yaml
from oml_loggers import plugin as loggers_plugin
from pytorch_lightning.loggers import Logger, TensorBoardLogger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import oml_core
from oml_core.interfaces.loggers import IPipelineLogger
from oml_core.registry import Registry

CFG = {
    "seed": 42,
    "extractor": {"name": "resnet", "args": {"arch": "resnet18", "gem_p": None, "normalise_features": True}},
    "optimizer": {"name": "adam", "args": {"lr": 1e-3}},
    "metric_args": {"cmc_top_k": [1, 5]},
}


def _events(log_dir: str) -> EventAccumulator:
    acc = EventAccumulator(log_dir, size_guidance={"images": 0, "tensors": 0, "scalars": 0})
    acc.Reload()
    return acc


def test_is_a_pipeline_logger_and_a_tensorboard_logger(tmp_path: Path) -> None:
    logger = TensorBoardPipelineLogger(tmp_path)
    assert isinstance(logger, IPipelineLogger)
    assert isinstance(logger, TensorBoardLogger)
    assert isinstance(logger, Logger)
    assert TensorBoardPipelineLogger.__abstractmethods__ == frozenset()
    assert Path(logger.log_dir) == tmp_path / "version_0"
    named = TensorBoardPipelineLogger(tmp_path, name="exp", version="v7", default_hp_metric=False)
    assert Path(named.log_dir) == tmp_path / "exp" / "v7"


def test_log_figure_and_metrics_are_in_event_file(tmp_path: Path) -> None:
    logger = TensorBoardPipelineLogger(save_dir=tmp_path)
    fig = Figure(figsize=(2, 1), dpi=50)  # no pyplot: no GUI backend involved
    fig.gca().plot([0, 1], [1, 0])
    logger.log_figure(fig, "worst_queries/epoch", 3)
    logger.log_metrics({"OVERALL/cmc/1": 0.75}, step=3)
    logger.finalize("success")

    acc = _events(logger.log_dir)
    assert "worst_queries/epoch" in acc.Tags()["images"]
    (image,) = acc.Images("worst_queries/epoch")
    assert (image.step, image.width, image.height) == (3, 100, 50)
    assert image.encoded_image_string.startswith(b"\x89PNG")
    (scalar,) = acc.Scalars("OVERALL/cmc/1")
    assert (scalar.step, scalar.value) == (3, 0.75)


@pytest.mark.parametrize("as_dictconfig", [False, True])
def test_log_pipeline_info_writes_yaml_and_text(tmp_path: Path, as_dictconfig: bool) -> None:
    logger = TensorBoardPipelineLogger(tmp_path)
    cfg = OmegaConf.create(CFG) if as_dictconfig else CFG
    logger.log_pipeline_info(cfg)
    logger.finalize("success")

    config_file = Path(logger.log_dir) / "config.yaml"
    assert OmegaConf.to_container(OmegaConf.load(config_file)) == CFG

    acc = _events(logger.log_dir)
    assert "config/text_summary" in acc.Tags()["tensors"]
    (event,) = acc.Tensors("config/text_summary")
    text = event.tensor_proto.string_val[0].decode()
    assert text.startswith("```yaml\n") and text.endswith("```")
    assert OmegaConf.to_container(OmegaConf.create(text[len("```yaml\n") : -3])) == CFG
    assert "arch: resnet18" in text


def test_log_pipeline_info_writes_dataframe_source_tags_and_hparams(tmp_path: Path, session) -> None:
    logger = TensorBoardPipelineLogger(tmp_path / "tb")
    session.run(logger)
    log_dir = Path(logger.log_dir)

    assert OmegaConf.to_container(OmegaConf.load(log_dir / "config.yaml")) == session.cfg
    df = Path(session.cfg["dataset_root"]) / "df.csv"
    assert (log_dir / "dataset" / "df.csv").read_text() == df.read_text()
    assert (log_dir / "code" / "oml_core" / "__init__.py").read_text() == Path(oml_core.__file__).read_text()
    assert (log_dir / "code" / "oml_core" / "registry" / "registry.py").is_file()
    hparams = OmegaConf.to_container(OmegaConf.load(log_dir / "hparams.yaml"))
    assert hparams["optimizer"] == {"name": "adam", "args": {"lr": 0.001}}
    assert hparams["batch_size"] == 32

    acc = _events(logger.log_dir)
    (tags,) = acc.Tensors("tags/text_summary")
    assert tags.tensor_proto.string_val[0].decode() == ", ".join(session.tags)
    for name in ("loss", "OVERALL/cmc/1"):
        assert [(s.step, s.value) for s in acc.Scalars(name)] == session.series(name)
    (image,) = acc.Images(session.figure_title)
    assert (image.step, image.width, image.height) == (session.figure_step, 100, 50)


def test_cfg_to_yaml_resolves_interpolations_and_stringifies_objects() -> None:
    cfg = OmegaConf.create({"a": 2, "b": "${a}", "c": {"d": "${oc.env:OML_SURELY_UNSET_VARIABLE_123}"}})
    assert "b: ${a}" in cfg_to_yaml(cfg)  # resolving fails (unset env var): written unresolved, not lost
    assert OmegaConf.create(cfg_to_yaml(OmegaConf.create({"a": 2, "b": "${a}"}))) == {"a": 2, "b": 2}
    plain = OmegaConf.create(cfg_to_yaml({"lr": 0.1, "weights": torch.tensor([1.0]), "tags": ("x", "y")}))
    assert plain == {"lr": 0.1, "weights": "tensor([1.])", "tags": ["x", "y"]}


def test_registry_builds_tensorboard_logger(tmp_path: Path) -> None:
    registry = Registry(plugins=[("oml_loggers", loggers_plugin)], load_entrypoints=False)
    logger = registry.build("logger", {"name": "tensorboard", "args": {"save_dir": str(tmp_path)}})
    assert isinstance(logger, TensorBoardPipelineLogger)
    assert Path(logger.log_dir) == tmp_path / "version_0"
    assert (
        registry.describe("logger", "tensorboard")["factory"]
        == "oml_loggers.tensorboard:TensorBoardPipelineLogger"
    )


def test_installed_entry_point_provides_tensorboard() -> None:
    assert Registry().get("logger", "tensorboard").plugin.distribution == "oml-loggers"


@pytest.mark.slow
def test_a_training_is_one_version_folder_with_config_tags_and_curves(tensorboard_training) -> None:
    result = tensorboard_training  # the reference weights of the other loggers' end-to-end tests
    (log_dir,) = result.run_dir.glob("version_*")  # trainer.validate and trainer.fit share it
    assert result.log_dir == log_dir

    hparams = OmegaConf.to_container(OmegaConf.load(log_dir / "hparams.yaml"))
    assert (hparams["seed"], hparams["max_epochs"], hparams["bs_train"]) == (7, 1, 32)
    acc = _events(str(log_dir))
    (tags,) = acc.Tensors("tags/text_summary")
    assert tags.tensor_proto.string_val[0].decode() == "logger-test, tiny"
    cmc = [
        (s.step, s.value) for s in acc.Scalars("OVERALL/cmc/1")
    ]  # before training (step 0), after the epoch
    assert [value for _, value in cmc] == [
        result.epochs[0]["OVERALL/cmc/1"],
        result.epochs[1]["OVERALL/cmc/1"],
    ]
    assert cmc[0][0] == 0
    assert [s.step for s in acc.Scalars("loss_step")] == [0, 1, 2, 3]  # 128 training images / 32
