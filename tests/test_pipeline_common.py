"""Helpers of the pipelines: run directories, data checks, component checks, the metrics table."""

import pandas as pd
import pytest

from oml_core.lightning.pipelines.common import (
    check_components,
    check_keys,
    format_metrics_table,
    make_run_dir,
    read_dataframe,
    split_dataframe,
)
from oml_core.registry import ConfigError, Registry, UnknownNameError


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
    train, val = split_dataframe(read_dataframe(tmp_path, "df.csv"))
    assert len(train) == 2 and len(val) == 0
    pd.DataFrame({**good, "split": ["train", "test"]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ConfigError, match=r"bad\.csv.*column 'split'.*row 1 \('test'\)"):
        read_dataframe(tmp_path, "bad.csv")
    with pytest.raises(ConfigError, match=r"missing\.csv.*does not exist"):
        read_dataframe(tmp_path, "missing.csv")


def test_check_components_fails_fast_on_unknown_names():
    registry = Registry(load_entrypoints=False)
    check_components(
        {"optimizer": {"name": "adam"}, "scheduler": None},
        registry,
        {"optimizer": "optimizer", "scheduler": "scheduler"},
    )
    with pytest.raises(UnknownNameError, match="Unknown optimizer 'adamm'"):
        check_components({"optimizer": {"name": "adamm", "args": {}}}, registry, {"optimizer": "optimizer"})
    with pytest.raises(ConfigError, match="config key 'optimizer' must be a \\{name, args\\} spec"):
        check_components({"optimizer": {"args": {}}}, registry, {"optimizer": "optimizer"})


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
