"""Helpers of the pipelines: run directories, data checks, component checks, the Trainer's engine and
arguments, the metrics table."""

import os
from pathlib import Path

import pandas as pd
import pytest

from oml_core.config.rules import check_keys
from oml_core.datasets.dataframe_format import read_dataframe
from oml_core.ddp.strategy import DDPStrategyClosedAtExit
from oml_core.engine import (
    RUN_DIR_ENV,
    check_one_device,
    external_launcher,
    is_ddp_child_process,
    is_ddp_devices,
    is_ddp_engine,
    make_run_dir,
    merge_trainer_args,
    parse_engine_params,
    run_dir_for_ddp_processes,
    shared_run_dir,
)
from oml_core.lightning.pipelines.shared.common import log_dir_of
from oml_core.registry import ConfigError, Registry, UnknownNameError
from oml_core.reports.pipelines import format_metrics_table


def test_run_dirs_are_never_reused(tmp_path):
    first = make_run_dir(tmp_path, "exp")
    (first / "keep.txt").write_text("written by the first run")
    second = make_run_dir(tmp_path, "exp")
    assert first != second and second.is_dir()
    assert (first / "keep.txt").read_text() == "written by the first run"
    assert first.name.endswith("_exp")


def test_read_dataframe_checks_the_format_and_names_the_file(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"")
    good = {
        "label": [0, 0],
        "path": ["a.jpg", "a.jpg"],
        "split": ["train", "train"],
        "is_query": [None, None],
        "is_gallery": [None, None],
    }
    pd.DataFrame(good).to_csv(tmp_path / "df.csv", index=False)
    splits = read_dataframe(tmp_path, "df.csv")["split"]
    assert (splits == "train").sum() == 2 and (splits == "validation").sum() == 0
    pd.DataFrame({**good, "split": ["train", "test"]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ConfigError, match=r"bad\.csv.*column 'split'.*row 1 \('test'\)"):
        read_dataframe(tmp_path, "bad.csv")
    with pytest.raises(ConfigError, match=r"missing\.csv.*does not exist"):
        read_dataframe(tmp_path, "missing.csv")


def test_read_dataframe_reads_parquet_a_file_or_a_folder_of_files_and_names_a_bad_one(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"")
    rows = {"label": [0, 1, 1], "path": ["a.jpg"] * 3, "split": ["train"] * 3, "is_query": [None] * 3}
    pd.DataFrame({**rows, "is_gallery": [None] * 3}).to_csv(tmp_path / "df.csv", index=False)
    df = read_dataframe(tmp_path, "df.csv")
    df.to_parquet(tmp_path / "df.parquet")
    (tmp_path / "parts").mkdir()
    df.iloc[2:].to_parquet(tmp_path / "parts" / "1.parquet")  # the rows in the order of the files' names
    df.iloc[:2].to_parquet(tmp_path / "parts" / "0.parquet")
    for name in ("df.parquet", "parts"):
        pd.testing.assert_frame_equal(read_dataframe(tmp_path, name), df)
    (tmp_path / "bad.parquet").write_text("label,path\n")
    with pytest.raises(ConfigError, match=rf"^'{tmp_path}/bad\.parquet': cannot be read as Parquet: "):
        read_dataframe(tmp_path, "bad.parquet")
    (tmp_path / "none").mkdir()
    with pytest.raises(
        ConfigError, match=rf"^the dataframe folder '{tmp_path}/none' holds no \.parquet files$"
    ):
        read_dataframe(tmp_path, "none")


def test_unknown_component_names_fail_before_anything_is_built():
    from omegaconf import OmegaConf

    from oml_core.config.compose import OML_CONFIGS_DIR
    from oml_core.config.typed import check_component_arguments, validate_config

    cfg = OmegaConf.to_container(OmegaConf.load(OML_CONFIGS_DIR / "extractor_training_pipeline.yaml"))
    registry = Registry()
    check_component_arguments(validate_config(cfg, "extractor_training_pipeline"), registry)
    cfg["optimizer"] = {"name": "adamm", "args": {}}
    with pytest.raises(UnknownNameError, match="Unknown optimizer 'adamm'"):
        check_component_arguments(validate_config(cfg, "extractor_training_pipeline"), registry)


def test_metrics_table_is_sorted_and_aligned():
    table = format_metrics_table({"OVERALL/map/5": 0.5, "OVERALL/cmc/1": 0.875})
    lines = table.splitlines()
    assert lines[0] == "Validation metrics"
    assert lines[4] == "OVERALL/cmc/1    0.8750"
    assert lines[5] == "OVERALL/map/5    0.5000"
    assert format_metrics_table({}) == "Validation metrics: (none computed)"


def test_check_keys_names_the_unknown_key_and_the_closest_known_one():
    known = {"max_epochs", "valid_period", "bs_val"}
    check_keys({"max_epochs": 1, "bs_val": 2}, known, "p")
    with pytest.raises(ConfigError, match=r"^p: unknown config key 'max_epoch'; did you mean 'max_epochs'\?"):
        check_keys({"max_epoch": 1}, known, "p")
    with pytest.raises(ConfigError, match=r"unknown config key 'zzz' \(known keys: bs_val, max_epochs"):
        check_keys({"bs_val": 1, "zzz": 2}, known, "p")


def test_a_run_dir_can_be_named_and_is_still_never_reused(tmp_path):
    first = make_run_dir(tmp_path, "exp", folder="my_run")
    second = make_run_dir(tmp_path, "exp", folder="my_run")
    assert (first.name, second.name) == ("my_run", "my_run_1")


def test_ddp_processes_share_the_run_dir_of_the_launching_process(tmp_path, monkeypatch):
    monkeypatch.delenv(RUN_DIR_ENV, raising=False)
    made: list[Path] = []

    def make() -> Path:
        made.append(tmp_path / f"made{len(made)}")
        return made[-1]

    with pytest.raises(KeyboardInterrupt), run_dir_for_ddp_processes(tmp_path / "shared"):
        assert shared_run_dir(make) == tmp_path / "shared"  # what a DDP process, started here, finds
        raise KeyboardInterrupt
    assert made == [] and RUN_DIR_ENV not in os.environ
    assert shared_run_dir(make) == tmp_path / "made0"


def torchrun_environment(monkeypatch, rank: int, world_size: int) -> None:
    """The variables torchrun gives each process it starts (``TORCHELASTIC_RUN_ID`` marks them as its own)."""
    monkeypatch.delenv(RUN_DIR_ENV, raising=False)
    for key, value in {
        "TORCHELASTIC_RUN_ID": "job",
        "RANK": rank,
        "WORLD_SIZE": world_size,
        "LOCAL_RANK": 0,
        "GROUP_RANK": rank,
        "LOCAL_WORLD_SIZE": 1,
    }.items():
        monkeypatch.setenv(key, str(value))


def test_processes_torchrun_starts_share_the_run_dir_the_config_names(tmp_path, monkeypatch):
    def make() -> Path:
        raise AssertionError("a process torchrun started makes no run directory of its own")

    named = tmp_path / "logs" / "run"
    torchrun_environment(monkeypatch, rank=1, world_size=2)
    assert external_launcher() == ("torchrun", 1, 2) and is_ddp_child_process()
    assert shared_run_dir(make, named) == named and not named.exists()  # rank 0 makes it
    with pytest.raises(ConfigError, match="^torchrun started 2 processes: set logs_folder so that they all"):
        shared_run_dir(make, None)

    torchrun_environment(monkeypatch, rank=0, world_size=2)
    assert not is_ddp_child_process()
    assert shared_run_dir(make, named) == named and named.is_dir()
    (named / "best.ckpt").write_text("an earlier run")
    with pytest.raises(ConfigError, match="holds an earlier run and is never written into"):
        shared_run_dir(make, named)
    assert shared_run_dir(make, named, key="save_dir") == named  # prediction checks its own file


def test_a_single_process_torchrun_is_no_ddp_launch(tmp_path, monkeypatch):
    torchrun_environment(monkeypatch, rank=0, world_size=1)
    assert external_launcher() is None
    assert shared_run_dir(lambda: tmp_path / "made", None) == tmp_path / "made"


@pytest.mark.parametrize(
    ("devices", "expected"), [(1, False), (2, True), ([0], False), ([0, 1], True), (True, False)]
)
def test_more_than_one_device_means_ddp(devices, expected):
    assert is_ddp_devices(devices) is expected


def test_engine_params_follow_oml():
    single = parse_engine_params("cpu", None)
    assert single == {
        "accelerator": "cpu",
        "devices": 1,
        "num_nodes": 1,
        "strategy": "auto",
        "use_distributed_sampler": False,
    }
    assert not is_ddp_engine(single)
    ddp = parse_engine_params("cpu", [0, 1, 2], find_unused_parameters=True)
    assert ddp["devices"] == 3 and isinstance(ddp["strategy"], DDPStrategyClosedAtExit) and is_ddp_engine(ddp)
    assert ddp["strategy"]._ddp_kwargs == {"find_unused_parameters": True}
    assert not parse_engine_params("cpu", 2)["strategy"]._ddp_kwargs["find_unused_parameters"]
    with pytest.raises(ConfigError, match="^devices must be null, a positive number .* got -1$"):
        parse_engine_params("cpu", -1)


def test_one_device_on_each_of_several_nodes_is_ddp():
    nodes = parse_engine_params("cpu", 1, num_nodes=2)
    assert nodes["num_nodes"] == 2 and nodes["devices"] == 1
    assert isinstance(nodes["strategy"], DDPStrategyClosedAtExit) and is_ddp_engine(nodes)
    with pytest.raises(ConfigError, match="^num_nodes must be a positive number of machines, got 0$"):
        parse_engine_params("cpu", 1, num_nodes=0)
    with pytest.raises(
        ConfigError, match="^p: num_nodes=2, but this pipeline runs on one device: set num_nodes"
    ):
        check_one_device(1, nodes, "p")
    with pytest.raises(
        ConfigError, match=r"^p: devices=\[0, 1\], but this pipeline runs on one device: set devices to 1 "
    ):
        check_one_device([0, 1], parse_engine_params("cpu", [0, 1]), "p")
    check_one_device([0], parse_engine_params("cpu", [0]), "p")  # one device: no error


def test_extra_trainer_args_win_over_the_defaults_but_not_over_config_keys():
    defaults = {"enable_model_summary": False, "max_epochs": 3}
    assert merge_trainer_args(defaults, None, {}) == defaults
    merged = merge_trainer_args(defaults, {"enable_model_summary": True, "gradient_clip_val": 1.0}, {})
    assert merged == {"enable_model_summary": True, "max_epochs": 3, "gradient_clip_val": 1.0}
    with pytest.raises(ConfigError, match="^lightning_trainer_extra_args.max_epochs: .* from the key$"):
        merge_trainer_args(defaults, {"max_epochs": 5}, {"max_epochs": "the key"})
    with pytest.raises(ConfigError, match="^lightning_trainer_extra_args must be a mapping, got list$"):
        merge_trainer_args(defaults, [1], {})


class _Folders:
    def __init__(self, log_dir=None, save_dir=None):
        self.log_dir, self.save_dir = log_dir, save_dir


@pytest.mark.parametrize(
    "logger, expected",
    [
        (_Folders(log_dir="/runs/a/version_0", save_dir="/runs/a"), Path("/runs/a/version_0")),  # TensorBoard
        (_Folders(save_dir="/runs/a/mlruns"), Path("/runs/a/mlruns")),  # MLflow, W&B, Neptune: their folder
        (_Folders(), None),  # a remote tracking server only
        (object(), None),
    ],
)
def test_the_logs_folder_of_a_logger(logger, expected):
    assert log_dir_of(logger) == expected
