"""End to end: `oml train` on the mock dataset, and a config naming a third-party plugin's components."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from oml_core.cli import compose_config
from oml_core.lightning.pipelines import extractor_training_pipeline
from oml_core.registry import Registry

METRIC_ROW = re.compile(r"^(OVERALL/\S+)\s+(\d+\.\d{4})$", re.MULTILINE)


def _metrics_table(stdout: str) -> dict[str, str]:
    return dict(METRIC_ROW.findall(stdout))


@pytest.mark.slow
def test_oml_train_one_epoch_twice_gives_identical_metrics(run_oml, tmp_path):
    outputs = []
    for attempt in ("first", "second"):
        logs_root = tmp_path / attempt
        result = run_oml(
            "train", "max_epochs=1", "valid_period=1", f"logs_root={logs_root}", "progress_bar=false"
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        table = _metrics_table(result.stdout)
        assert set(table) == {
            "OVERALL/cmc/1",
            "OVERALL/cmc/5",
            "OVERALL/precision/5",
            "OVERALL/map/5",
            "OVERALL/pcf/0.5",
        }
        assert all(0.0 <= float(v) <= 1.0 for v in table.values())
        (run_dir,) = logs_root.iterdir()
        assert (run_dir / "checkpoints" / "best.ckpt").is_file()
        assert (run_dir / "checkpoints" / "last.ckpt").is_file()
        assert list(run_dir.rglob("events.out.tfevents.*")), "no TensorBoard event file"
        assert f"Best checkpoint:  {run_dir / 'checkpoints' / 'best.ckpt'}" in result.stdout
        outputs.append(table)
    assert outputs[0] == outputs[1]


def test_config_with_the_example_plugins_components_trains(tmp_path, oml_cache_dir, monkeypatch):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    registry = Registry()
    overrides = [
        "max_epochs=1",
        "valid_period=1",
        f"logs_root={tmp_path}",
        "progress_bar=false",
        "transforms_train.args.im_size=32",
        "transforms_val.args.im_size=32",
    ]
    cfg = OmegaConf.to_container(compose_config("extractor_training_pipeline", overrides, registry=registry))
    cfg["extractor"] = {"name": "tiny_conv", "args": {"feat_dim": 16}}
    cfg["criterion"] = {"name": "contrastive_example", "args": {"margin": 0.5}}
    result = extractor_training_pipeline(cfg, registry=registry)
    assert type(registry.build("extractor", cfg["extractor"])).__name__ == "TinyConvExtractor"
    assert set(result.metrics) >= {"OVERALL/cmc/1", "OVERALL/map/5"}
    assert result.best_checkpoint is not None and result.best_checkpoint.is_file()
    assert Path(result.log_dir).is_dir()


def test_category_sampler_and_arcface_get_the_datasets_categories(tmp_path, oml_cache_dir, monkeypatch):
    """The pipeline offers label2category to the components that take it (a category sampler, ArcFace with
    category-aware smoothing) and reports the metrics of every category."""
    import pandas as pd
    from oml_losses import ArcFaceLoss

    from oml_core import hookimpl
    from oml_core.datasets.mock import get_mock_dataset_root

    seen: list[object] = []

    class RecordingArcFace(ArcFaceLoss):
        def __init__(self, *args, label2category=None, **kwargs):
            seen.append(label2category)
            super().__init__(*args, label2category=label2category, **kwargs)

    class Recording:
        @hookimpl
        def oml_register_losses(self, register):
            register("recording_arcface", RecordingArcFace)

    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    registry = Registry([Recording()])
    overrides = [
        "max_epochs=1",
        "valid_period=1",
        f"logs_root={tmp_path}",
        "progress_bar=false",
        "dataframe_name=df_with_category.csv",
        "metric_args.return_only_overall_category=false",
        "transforms_train.args.im_size=32",
        "transforms_val.args.im_size=32",
    ]
    cfg = OmegaConf.to_container(compose_config("extractor_training_pipeline", overrides, registry=registry))
    cfg["extractor"] = {"name": "tiny_conv", "args": {"feat_dim": 16}}
    cfg["criterion"] = {
        "name": "recording_arcface",
        "args": {"in_features": 16, "num_classes": 16, "smoothing_epsilon": 0.1},
    }
    cfg["sampler"] = {
        "name": "category_balance",
        "args": {"n_categories": 2, "n_labels": 2, "n_instances": 2},
    }
    result = extractor_training_pipeline(cfg, registry=registry)

    df = pd.read_csv(get_mock_dataset_root(oml_cache_dir) / "df_with_category.csv")
    train = df[df["split"] == "train"]
    assert seen == [dict(zip(train["label"], train["category"]))]
    categories = set(df.loc[df["split"] == "validation", "category"])
    assert {f"{category}/cmc/1" for category in categories} <= set(result.metrics)
