"""Helpers of the pipelines: run directories, data checks, component checks, the metrics table."""

import pandas as pd
import pytest

from oml_core.lightning.pipelines.common import (
    check_components,
    format_metrics_table,
    make_run_dir,
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


def test_split_dataframe_rejects_unknown_split_values_naming_rows():
    df = pd.DataFrame({"split": ["train", "validation", "test", "train", "valid"]})
    with pytest.raises(
        ConfigError, match=r"data.csv: column 'split' has values \['test', 'valid'\] \(rows \[2, 4\]\)"
    ):
        split_dataframe(df, "data.csv")
    train, val = split_dataframe(df.iloc[:2], "data.csv")
    assert len(train) == 1 and len(val) == 1
    with pytest.raises(ConfigError, match="column 'split' is missing"):
        split_dataframe(pd.DataFrame({"label": [1]}), "data.csv")


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
