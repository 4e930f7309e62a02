"""Tests of PipelineInfo: what log_pipeline_info gathers from a config and the folder layout it writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf
from oml_loggers import PipelineInfo
from oml_loggers.pipeline_info import config_tags, dataframe_paths, source_snapshot

import oml_core

PACKAGE = Path(oml_core.__file__).resolve().parent


def test_from_config_gathers_config_tags_dataframe_and_source(pipeline_cfg: dict, dataset_root: Path) -> None:
    info = PipelineInfo.from_config(OmegaConf.create(pipeline_cfg))
    assert info.config == pipeline_cfg
    assert OmegaConf.to_container(OmegaConf.create(info.config_yaml)) == pipeline_cfg
    assert info.tags == ["mock", "resnet", "metric_learning"]
    assert info.dataframes == [(dataset_root / "df.csv").resolve()]
    assert info.source_root == PACKAGE.parent
    assert info.source_paths[0].is_file() and info.source_paths[0].parent == PACKAGE


def test_source_snapshot_is_every_py_and_yaml_file_of_oml_core() -> None:
    root, files = source_snapshot()
    expected = {
        p.relative_to(PACKAGE.parent) for pattern in ("*.py", "*.yaml") for p in PACKAGE.rglob(pattern)
    }
    assert root == PACKAGE.parent and set(files) == expected and files == sorted(files)
    assert Path("oml_core/__init__.py") in files
    assert Path("oml_core/configs/extractor_training_pipeline.yaml") in files
    assert not any(f.suffix == ".pyc" for f in files)


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        ({"tags": ["a", "b"], "postfix": "run"}, ["a", "b", "run"]),
        ({"tags": "solo"}, ["solo"]),
        ({"tags": ["a", "", "a"], "postfix": "a"}, ["a"]),
        ({"postfix": ""}, []),
        ({}, []),
    ],
)
def test_config_tags(cfg: dict, expected: list[str]) -> None:
    assert config_tags(cfg) == expected


def test_dataframe_paths_keeps_existing_files_only(dataset_root: Path) -> None:
    (dataset_root / "other.csv").write_text("x\n")
    root = str(dataset_root)
    assert dataframe_paths({"dataset_root": root, "dataframe_name": "df.csv"}) == [dataset_root / "df.csv"]
    both = dataframe_paths({"dataset_root": root, "dataframe_name": ["df.csv", "missing.csv", "other.csv"]})
    assert both == [dataset_root / "df.csv", dataset_root / "other.csv"]
    assert dataframe_paths({"dataset_root": root, "dataframe_name": "missing.csv"}) == []
    assert dataframe_paths({"dataset_root": root}) == []


def test_null_dataset_root_is_the_mock_dataset(dataset_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from oml_core.datasets import mock

    monkeypatch.setattr(mock, "get_mock_dataset_root", lambda: dataset_root)
    assert dataframe_paths({"dataset_root": None, "dataframe_name": "df.csv"}) == [dataset_root / "df.csv"]


def test_write_lays_out_config_dataset_and_code(
    tmp_path: Path, pipeline_cfg: dict, dataset_root: Path
) -> None:
    info = PipelineInfo.from_config(pipeline_cfg)
    info.write(tmp_path / "out")
    assert OmegaConf.to_container(OmegaConf.load(tmp_path / "out" / "config.yaml")) == pipeline_cfg
    assert (tmp_path / "out" / "dataset" / "df.csv").read_bytes() == (dataset_root / "df.csv").read_bytes()
    written = {
        p.relative_to(tmp_path / "out" / "code")
        for p in (tmp_path / "out" / "code").rglob("*")
        if p.is_file()
    }
    assert written == set(info.source_files)

    with info.written_parts() as parts:
        assert [(name, path.name) for name, path in parts] == [
            ("config", "config.yaml"),
            ("dataset", "dataset"),
            ("code", "code"),
        ]
        folder = parts[0][1].parent
        assert folder.is_dir()
    assert not folder.exists()  # the temporary folder is gone

    without_dataframe = PipelineInfo.from_config({"seed": 1})
    with without_dataframe.written_parts() as parts:
        assert [name for name, _ in parts] == ["config", "code"]
