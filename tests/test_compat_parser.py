"""OML 4.0's ``oml.lightning.pipelines.parser`` at OML's path (``oml_core.lightning.pipelines.parser``): the
Trainer's engine, the logger, the scheduler, the sampler and the checkpoint callback of a config (a dict or a
``DictConfig``), each checked on real inputs against values worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from oml_core.lightning.pipelines.parser import (
    check_is_config_for_ddp,
    needs_categories,
    parse_ckpt_callback_from_config,
    parse_engine_params_from_config,
    parse_logger_from_config,
    parse_sampler_from_config,
    parse_scheduler_from_config,
)
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.strategies import DDPStrategy

from oml_core.datasets.embeddings import EmbeddingsQueryGalleryLabeledDataset
from oml_core.interfaces.datasets import ILabeledDataset
from oml_core.lightning.pipelines import parser
from oml_core.registry import ConfigError, UnknownNameError, default_registry

OML_ALL = {
    "parse_engine_params_from_config",
    "check_is_config_for_ddp",
    "parse_scheduler_from_config",
    "parse_sampler_from_config",
    "parse_ckpt_callback_from_config",
}


def test_the_module_has_omls_names():
    assert set(parser.__all__) == OML_ALL
    assert callable(parser.parse_logger_from_config)  # public in OML, though not in its __all__


@pytest.fixture()
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine, as the engine sees it, has no GPU (whatever machine the test runs on)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


@pytest.fixture()
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine sees two GPUs (nothing runs on them: parsing only reads the count)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def engine(devices: object, accelerator: str, ddp: bool) -> dict[str, object]:
    """The four keys OML's function returns, its strategy as a type (DDPStrategy itself, or the str "auto")."""
    return {
        "devices": devices,
        "accelerator": accelerator,
        "strategy": DDPStrategy if ddp else str,
        "use_distributed_sampler": False,
    }


def parsed(cfg: object) -> dict[str, object]:
    params = parse_engine_params_from_config(cfg)  # type: ignore[arg-type]
    strategy = params["strategy"]
    assert strategy == "auto" or type(strategy) is DDPStrategy  # Lightning's own class, not a subclass
    return {**params, "strategy": type(strategy)}


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        (
            {"accelerator": "cpu", "devices": [3]},
            engine(1, "cpu", ddp=False),
        ),  # a list on the CPU: its length
        ({"accelerator": "cpu", "devices": [0, 3]}, engine(2, "cpu", ddp=True)),
        ({"accelerator": "cpu", "devices": 1}, engine(1, "cpu", ddp=False)),
        ({"accelerator": "cpu", "devices": 4}, engine(4, "cpu", ddp=True)),
        ({"accelerator": "gpu", "devices": [2]}, engine([2], "gpu", ddp=False)),  # GPU ids are kept
        ({"accelerator": "gpu", "devices": [0, 2]}, engine([0, 2], "gpu", ddp=True)),
        ({"accelerator": "gpu", "devices": 1}, engine(1, "gpu", ddp=False)),
        ({"accelerator": "gpu", "devices": 3}, engine(3, "gpu", ddp=True)),
    ],
)
def test_engine_of_given_accelerator_and_devices(cfg: dict[str, object], expected: dict[str, object]) -> None:
    assert parsed(cfg) == expected


@pytest.mark.parametrize(
    "cfg", [{}, {"accelerator": None}, {"devices": None}, {"accelerator": None, "devices": None}]
)
def test_engine_without_accelerator_or_devices_on_a_machine_without_gpu(no_gpu: None, cfg: dict) -> None:
    assert parsed(cfg) == engine(1, "cpu", ddp=False)


@pytest.mark.parametrize("cfg", [{}, {"accelerator": None, "devices": None}])
def test_engine_without_accelerator_or_devices_takes_every_gpu(two_gpus: None, cfg: dict) -> None:
    assert parsed(cfg) == engine(2, "gpu", ddp=True)


def test_engine_of_gpu_without_devices_on_a_machine_without_gpu(no_gpu: None) -> None:
    assert parsed({"accelerator": "gpu"}) == engine(1, "gpu", ddp=False)


def test_engine_of_a_dictconfig_and_find_unused_parameters() -> None:
    cfg = OmegaConf.create({"accelerator": "cpu", "devices": [0, 1, 2], "find_unused_parameters": True})
    params = parse_engine_params_from_config(cfg)
    assert params["devices"] == 3
    assert params["strategy"]._ddp_kwargs == {"find_unused_parameters": True}
    default = parse_engine_params_from_config({"accelerator": "cpu", "devices": 2})["strategy"]
    assert default._ddp_kwargs == {"find_unused_parameters": False}


def test_engine_ignores_num_nodes_as_omls_does() -> None:
    params = parse_engine_params_from_config({"accelerator": "cpu", "devices": 1, "num_nodes": 2})
    assert set(params) == {"devices", "strategy", "accelerator", "use_distributed_sampler"}
    assert params["strategy"] == "auto"


@pytest.mark.parametrize("devices", ["two", 0, []])
def test_engine_refuses_devices_that_are_no_count_nor_list(devices: object) -> None:
    with pytest.raises(ConfigError, match="devices must be null, a positive number of devices or a list"):
        parse_engine_params_from_config({"accelerator": "cpu", "devices": devices})


@pytest.mark.parametrize(
    ("cfg", "is_ddp"),
    [
        ({"accelerator": "cpu", "devices": 1}, False),  # OML says True here: bool("auto")
        ({"accelerator": "cpu", "devices": [5]}, False),
        ({"accelerator": "cpu", "devices": 2}, True),
        ({"accelerator": "gpu", "devices": [0, 1]}, True),
    ],
)
def test_check_is_config_for_ddp_of_parsed_params(cfg: dict, is_ddp: bool) -> None:
    assert check_is_config_for_ddp(parse_engine_params_from_config(cfg)) is is_ddp


def sgd() -> torch.optim.SGD:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)


@pytest.mark.parametrize("cfg", [{}, {"scheduling": None}, {"scheduling": {}}])
def test_no_scheduler_without_scheduling(cfg: dict) -> None:
    assert parse_scheduler_from_config(cfg, optimizer=sgd()) == {"scheduler": None}


def test_scheduler_of_scheduling_steps_the_given_optimizer() -> None:
    optimizer = sgd()
    cfg = OmegaConf.create(
        {
            "scheduling": {
                "scheduler": {"name": "step", "args": {"step_size": 2, "gamma": 0.5}},
                "scheduler_interval": "epoch",
                "scheduler_frequency": 3,
                "monitor_metric": "OVERALL/cmc/1",
            }
        }
    )
    kwargs = parse_scheduler_from_config(cfg, optimizer=optimizer)
    scheduler = kwargs.pop("scheduler")
    assert kwargs == {
        "scheduler_interval": "epoch",
        "scheduler_frequency": 3,
        "scheduler_monitor_metric": "OVERALL/cmc/1",
    }
    assert isinstance(scheduler, torch.optim.lr_scheduler.StepLR) and scheduler.optimizer is optimizer
    lrs = []
    for _ in range(4):
        optimizer.step()
        scheduler.step()
        lrs.append(optimizer.param_groups[0]["lr"])
    assert lrs == pytest.approx([0.1, 0.05, 0.05, 0.025])  # halved every 2 steps


def test_scheduler_defaults_of_omls_keys() -> None:
    kwargs = parse_scheduler_from_config(
        {"scheduling": {"scheduler": {"name": "step", "args": {"step_size": 1}}}}, sgd()
    )
    assert (
        kwargs["scheduler_interval"],
        kwargs["scheduler_frequency"],
        kwargs["scheduler_monitor_metric"],
    ) == (
        "step",
        1,
        None,
    )


def test_scheduler_with_a_misspelt_key_is_refused_naming_it() -> None:
    cfg = {"scheduling": {"scheduler": {"name": "step", "args": {"step_size": 1}}, "interval": "epoch"}}
    with pytest.raises(
        ConfigError, match="scheduling: unknown config key 'interval'; did you mean 'scheduler_int"
    ):
        parse_scheduler_from_config(cfg, sgd())


def embeddings_dataset(with_categories: bool) -> EmbeddingsQueryGalleryLabeledDataset:
    """8 items: labels 0, 0, 1, 1, 2, 2, 3, 3; categories a (labels 0 and 1) and b (labels 2 and 3)."""
    return EmbeddingsQueryGalleryLabeledDataset(
        torch.zeros(8, 2),
        labels=[0, 0, 1, 1, 2, 2, 3, 3],
        is_query=[True] * 8,
        is_gallery=[True] * 8,
        categories=list("aaaabbbb") if with_categories else None,
    )


def test_no_sampler_when_the_config_says_null() -> None:
    assert parse_sampler_from_config({"sampler": None}, embeddings_dataset(False)) is None


def test_a_config_without_the_key_sampler_is_refused() -> None:
    with pytest.raises(KeyError, match="sampler"):
        parse_sampler_from_config({}, embeddings_dataset(False))


def test_which_samplers_need_categories() -> None:
    registry = default_registry()
    assert {name: needs_categories(registry, name) for name in registry.names("sampler")} == {
        "balance": False,
        "category_balance": True,
        "distinct_category_balance": True,
    }
    with pytest.raises(UnknownNameError, match="Unknown sampler 'nope'"):
        needs_categories(registry, "nope")


def test_balance_sampler_gets_the_datasets_labels() -> None:
    cfg = {"sampler": {"name": "balance", "args": {"n_labels": 2, "n_instances": 2}}}
    sampler = parse_sampler_from_config(cfg, embeddings_dataset(with_categories=False))
    batches = list(sampler)  # type: ignore[arg-type]
    # 4 labels // 2 per batch = 2 batches of 2 labels x 2 items; every label has exactly 2 items, so each batch
    # holds both items of each of its labels, and the epoch covers every item once
    assert len(batches) == 2
    labels = [0, 0, 1, 1, 2, 2, 3, 3]
    for batch in batches:
        assert sorted(labels[i] for i in batch) in ([a, a, b, b] for a in range(4) for b in range(a + 1, 4))
    assert sorted(i for batch in batches for i in batch) == list(range(8))


def test_category_sampler_gets_the_datasets_categories() -> None:
    cfg = OmegaConf.create(
        {
            "sampler": {
                "name": "category_balance",
                "args": {"n_categories": 2, "n_labels": 2, "n_instances": 2},
            }
        }
    )
    sampler = parse_sampler_from_config(cfg, embeddings_dataset(with_categories=True))
    batches = list(sampler)  # type: ignore[arg-type]
    # ceil(4 labels / 2) = 2 batches; each takes both categories, both labels of each and both items of each
    # label: all 8 items, each category's block in a (random) category order
    assert len(batches) == 2
    for batch in batches:
        blocks = {frozenset(batch[:4]), frozenset(batch[4:])}
        assert blocks == {frozenset({0, 1, 2, 3}), frozenset({4, 5, 6, 7})}


@pytest.mark.parametrize("name", ["category_balance", "distinct_category_balance"])
def test_category_sampler_over_a_dataset_without_categories_is_refused(name: str) -> None:
    cfg = {"sampler": {"name": name, "args": {"n_categories": 2, "n_labels": 2, "n_instances": 2}}}
    with pytest.raises(ValueError, match=f"sampler '{name}' draws its batches by category, .* no 'category'"):
        parse_sampler_from_config(cfg, embeddings_dataset(with_categories=False))


class LabelsOnly(ILabeledDataset):
    """A dataset of oml's interface with no ``extra_data`` at all (OML's base class always has one)."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, item: int) -> dict[str, int]:
        return {self.index_key: item, self.labels_key: item // 2}

    def get_labels(self) -> np.ndarray:
        return np.array([0, 0, 1, 1])


def test_samplers_over_a_dataset_without_extra_data() -> None:
    cfg = {"sampler": {"name": "distinct_category_balance", "args": {"n_categories": 1, "n_labels": 2}}}
    with pytest.raises(ValueError, match="'distinct_category_balance' draws its batches by category"):
        parse_sampler_from_config(cfg, LabelsOnly())
    balance = {"sampler": {"name": "balance", "args": {"n_labels": 2, "n_instances": 2}}}
    assert [sorted(batch) for batch in parse_sampler_from_config(balance, LabelsOnly())] == [[0, 1, 2, 3]]


def test_default_logger_is_tensorboard_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oml_core.lightning.pipelines.logging import TensorBoardPipelineLogger

    monkeypatch.chdir(tmp_path)
    for cfg in ({}, {"logger": None}):
        logger = parse_logger_from_config(cfg)
        assert type(logger) is TensorBoardPipelineLogger
        assert Path(logger.save_dir) == tmp_path  # OML's TensorBoardPipelineLogger(".")


def test_logger_of_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    logger = parse_logger_from_config(
        {"logger": {"name": "tensorboard", "args": {"save_dir": "logs", "name": "x"}}}
    )
    assert (Path(logger.save_dir), logger.name) == (tmp_path / "logs", "x")
    with pytest.raises(ConfigError, match="logger.args.save_dir: '../out' goes up with '..'"):
        parse_logger_from_config({"logger": {"name": "tensorboard", "args": {"save_dir": "../out"}}})


def test_checkpoint_callback_keeps_best_ckpt_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    callback = parse_ckpt_callback_from_config(
        OmegaConf.create({"metric_for_checkpointing": "OVERALL/cmc/1"})
    )
    assert isinstance(callback, ModelCheckpoint)
    assert (callback.dirpath, callback.monitor, callback.mode) == (
        str(tmp_path / "checkpoints"),
        "OVERALL/cmc/1",
        "max",
    )
    assert (callback.save_top_k, callback.filename) == (1, "best")
    smaller = parse_ckpt_callback_from_config(
        {"metric_for_checkpointing": "loss", "mode_for_checkpointing": "min"}
    )
    assert (smaller.monitor, smaller.mode) == ("loss", "min")


@pytest.mark.slow
def test_checkpoint_callback_writes_the_best_validation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytorch_lightning as pl

    class Toy(pl.LightningModule):
        """Validation ``m`` of the epochs 1, 2, 3: 3.0, 1.0, 2.0 (the smallest: epoch 2)."""

        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(1))

        def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
            return (self.weight * batch).sum()

        def validation_step(self, batch: torch.Tensor, batch_idx: int) -> None:
            self.log("m", [3.0, 1.0, 2.0][self.current_epoch])

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    monkeypatch.chdir(tmp_path)
    callback = parse_ckpt_callback_from_config(
        {"metric_for_checkpointing": "m", "mode_for_checkpointing": "min"}
    )
    loader = torch.utils.data.DataLoader(torch.ones(2, 1), batch_size=2)
    trainer = pl.Trainer(
        max_epochs=3,
        callbacks=[callback],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        **parse_engine_params_from_config({"accelerator": "cpu", "devices": 1}),
    )
    trainer.fit(Toy(), loader, loader)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["best.ckpt"]
    assert callback.best_model_score == 1.0
    state = torch.load(tmp_path / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=True)
    assert state["epoch"] == 1  # Lightning counts epochs from 0: the second one
