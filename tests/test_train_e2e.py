"""End to end: `oml train` on the mock dataset, a config naming a third-party plugin's components, OML's
config keys (scheduling, plain batches, extra Trainer arguments) and the one-line errors of a bad config."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from oml_core.config.compose import compose_config
from oml_core.config.schemas import ExtractorTrainingConfig
from oml_core.config.typed import validate_config
from oml_core.lightning.callbacks.run_record import plain
from oml_core.lightning.pipelines.train import PIPELINE, extractor_training_pipeline
from oml_core.registry import ConfigError, Registry

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from tiny_training import tiny_config  # noqa: E402

from tests.scripts.trained_run import train_tiny  # noqa: E402

#: A row of the end-of-training table (start, best, last columns) or of validation's: the metric, last value.
METRIC_ROW = re.compile(r"^(OVERALL/\S+)\s+(?:\d+\.\d{4}\s+)*(\d+\.\d{4})$", re.MULTILINE)


def _metrics_table(stdout: str) -> dict[str, str]:
    return dict(METRIC_ROW.findall(stdout))


@pytest.mark.slow
def test_oml_train_one_epoch_twice_gives_identical_metrics(
    tiny_trained_run, oml_fork_server, oml_cache_dir, tmp_path
):
    """The shared run of the test process and a second one, the same ``oml train`` (its default config, 32 px)."""
    outputs = []
    for result in (tiny_trained_run, train_tiny(oml_fork_server, oml_cache_dir, tmp_path / "second")):
        table = _metrics_table(result.stdout)
        assert set(table) == {
            "OVERALL/cmc/1",
            "OVERALL/cmc/5",
            "OVERALL/precision/5",
            "OVERALL/map/5",
            "OVERALL/pcf/0.5",
        }
        assert all(0.0 <= float(v) <= 1.0 for v in table.values())
        assert result.best_checkpoint.is_file()
        assert (result.run_dir / "checkpoints" / "last.ckpt").is_file()
        assert list(result.run_dir.rglob("events.out.tfevents.*")), "no TensorBoard event file"
        assert f"Best checkpoint:  {result.best_checkpoint}" in result.stdout
        outputs.append(table)
    assert outputs[0] == outputs[1]


@pytest.mark.slow
def test_the_typed_config_trains_as_the_dict_does(tmp_path, oml_cache_dir, monkeypatch):
    """The config enters once: the object ``validate_config`` makes of the dict trains to the same weights and
    metrics and records the same run config in its checkpoints; the logger gets the typed config, every key (the
    defaults of the keys the dict leaves out too)."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    cfg = tiny_config(tmp_path, max_epochs=1)
    config = validate_config({**cfg, "logs_folder": "typed"}, PIPELINE)
    assert isinstance(config, ExtractorTrainingConfig)
    from_dict = extractor_training_pipeline({**cfg, "logs_folder": "dict"})
    from_object = extractor_training_pipeline(config)
    assert from_object.run_dir == tmp_path / "typed"
    assert from_object.epochs == from_dict.epochs and set(from_object.epochs) == {0, 1}
    assert from_object.metrics == from_dict.metrics and "OVERALL/cmc/1" in from_object.metrics
    expected = torch.load(from_dict.best_checkpoint, weights_only=True)
    got = torch.load(from_object.best_checkpoint, weights_only=True)
    assert expected["state_dict"].keys() == got["state_dict"].keys()
    assert all(torch.equal(got["state_dict"][k], v) for k, v in expected["state_dict"].items())
    assert got["oml_run"]["config"] == {**expected["oml_run"]["config"], "logs_folder": "typed"}
    assert got["oml_run"]["config"] == plain(config)

    def logged(result) -> dict:
        return OmegaConf.to_container(OmegaConf.load(result.log_dir / "config.yaml"))

    assert logged(from_dict) == plain(validate_config({**cfg, "logs_folder": "dict"}, PIPELINE))
    assert logged(from_object) == plain(config) and logged(from_dict)["callbacks_disabled"] == []


@pytest.mark.slow
def test_validating_changes_nothing_of_training(tmp_path, oml_cache_dir, monkeypatch):
    """Validation iterates its loaders on a generator of their own: a run that validates every epoch trains to
    the same weights as one that validates only at its last, although the training augmentations (random
    flips) draw from the global RNG."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    weights = []
    for period in (1, 2):
        result = extractor_training_pipeline(
            tiny_config(tmp_path, logs_folder=f"every_{period}", valid_period=period)
        )
        assert sorted(result.epochs) == ([0, 1, 2] if period == 1 else [0, 2])
        last = torch.load(result.run_dir / "checkpoints" / "last.ckpt", weights_only=True)
        weights.append(last["state_dict"])
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_config_with_the_example_plugins_components_trains(tmp_path, oml_cache_dir, monkeypatch):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    registry = Registry()
    overrides = [
        "max_epochs=1",
        "valid_period=1",
        f"logs_root={tmp_path}",
        "lightning_trainer_extra_args.enable_progress_bar=false",
        "transforms_train.args.im_size=32",
        "transforms_val.args.im_size=32",
        "log_images=true",
    ]
    cfg = OmegaConf.to_container(compose_config("extractor_training_pipeline", overrides, registry=registry))
    cfg["extractor"] = {"name": "tiny_conv", "args": {"feat_dim": 16}}
    cfg["criterion"] = {"name": "contrastive_example", "args": {"margin": 0.5}}
    result = extractor_training_pipeline(cfg, registry=registry)
    assert type(registry.build("extractor", cfg["extractor"])).__name__ == "TinyConvExtractor"
    assert set(result.metrics) >= {"OVERALL/cmc/1", "OVERALL/map/5"}
    assert result.best_checkpoint is not None and result.best_checkpoint.is_file()
    assert Path(result.log_dir).is_dir()
    # log_images: the worst queries of every per-query metric, as PNG files and in the TensorBoard events
    pngs = sorted(p.name for p in (result.run_dir / "figures" / "epoch_0").iterdir())
    assert pngs == [f"top_5_worst_by_OVERALL_{m}.png" for m in ("cmc_1", "cmc_5", "map_5", "precision_5")]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(result.log_dir), size_guidance={"images": 0})
    events.Reload()
    titles = [f"top 5 worst by OVERALL_{m}" for m in ("cmc_1", "cmc_5", "map_5", "precision_5")]
    assert sorted(events.Tags()["images"]) == titles


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
        "lightning_trainer_extra_args.enable_progress_bar=false",
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


@pytest.mark.parametrize(
    ("override", "error"),
    [
        (
            "+max_epoch=1",
            r"extractor_training_pipeline: unknown config key 'max_epoch'; did you mean 'max_epochs'\?",
        ),
        ("extractor.name=resnett", r"Unknown extractor 'resnett'"),
        (
            "+optimizer.args.lrr=0.1",
            r"optimizer 'adam' \(torch.optim:Adam, .*\) got unexpected argument\(s\) \['lrr'\]",
        ),
    ],
    ids=["unknown key", "unknown name", "wrong argument"],
)
def test_oml_train_names_what_is_wrong_in_one_line_and_writes_nothing(run_oml, tmp_path, override, error):
    result = run_oml("train", override, f"logs_root={tmp_path}")
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("oml train: error:")]
    assert re.match(f"oml train: error: {error}", line), line
    assert list(tmp_path.iterdir()) == []


STEP = {"name": "step", "args": {"step_size": 1, "gamma": 0.5}}


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        (
            {"scheduling": {"scheduler": STEP, "interval": "epoch"}},
            r"scheduling: unknown config key 'interval'",
        ),
        (
            {"scheduling": {"scheduler_interval": "epoch"}},
            r"scheduling: the config lacks the key\(s\) \['scheduler'\]",
        ),
        (
            {"scheduling": {"scheduler": STEP, "scheduler_interval": "batch"}},
            r"^scheduling.scheduler_interval: expected 'step' or 'epoch', got 'batch'$",
        ),
        ({"scheduler": STEP}, r"unknown config key 'scheduler'; did you mean 'scheduling'\?"),
        (
            {"mode_for_checkpointing": "maximum"},
            r"^mode_for_checkpointing: expected 'min' or 'max', got 'maximum'$",
        ),
        ({"freeze_n_epochs": -1}, r"^freeze_n_epochs: expected a non-negative int, got -1$"),
        (
            {"freeze_n_epochs": 1},
            r"freeze_n_epochs=1 needs an IFreezable extractor, but the extractor 'tiny_conv' \(TinyConvExtractor\)",
        ),
        ({"sampler": None}, r"with sampler null the config needs bs_train"),
        (
            {"devices": 0},
            r"^devices: expected a positive int, a non-empty list of non-negative ints or null, got 0$",
        ),
        (
            {"lightning_trainer_extra_args": {"max_epochs": 3}},
            r"lightning_trainer_extra_args.max_epochs: the pipeline sets this Trainer argument from the config "
            r"key 'max_epochs'",
        ),
        (
            {"lightning_trainer_extra_args": {"limit_train_batch": 1}},
            r"lightning_trainer_extra_args: pl.Trainer has no argument 'limit_train_batch'; did you mean "
            r"'limit_train_batches'\?",
        ),
    ],
)
def test_a_bad_key_fails_before_training_in_one_line(tmp_path, oml_cache_dir, monkeypatch, overrides, error):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    with pytest.raises(ConfigError, match=error) as info:
        extractor_training_pipeline(tiny_config(tmp_path / "logs", **overrides))
    assert "\n" not in str(info.value)
    assert not (tmp_path / "logs").exists()


def test_bs_train_is_ignored_when_a_sampler_makes_the_batches(tmp_path, oml_cache_dir, monkeypatch):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    with (
        pytest.warns(UserWarning, match="bs_train=8 is ignored: the sampler 'balance' makes the batches"),
        pytest.raises(ConfigError, match="freeze_n_epochs=1"),  # stops the run once the loader is built
    ):
        extractor_training_pipeline(tiny_config(tmp_path, bs_train=8, freeze_n_epochs=1))


def test_oml_keys_plain_batches_scheduling_and_extra_trainer_args(tmp_path, oml_cache_dir, monkeypatch):
    """sampler null: shuffled batches of bs_train (128 // 32 = 4 a epoch), cut to 3 by the extra Trainer
    argument limit_train_batches; the step scheduler halves the lr every epoch; best.ckpt keeps the epoch with
    the lowest metric (mode min); the run writes into logs_root/logs_folder."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    cfg = tiny_config(
        tmp_path,
        sampler=None,
        bs_train=32,
        scheduling={"scheduler": STEP, "scheduler_interval": "epoch", "scheduler_frequency": 1},
        mode_for_checkpointing="min",
        logs_folder="plain",
        tags=["plain"],
        lightning_trainer_extra_args={"enable_progress_bar": False, "limit_train_batches": 3},
    )
    result = extractor_training_pipeline(cfg)
    assert result.run_dir == tmp_path / "plain"
    last = torch.load(result.last_checkpoint, weights_only=True)
    assert last["global_step"] == 6
    assert last["optimizer_states"][0]["param_groups"][0]["lr"] == pytest.approx(0.02 * 0.5**2)
    best = torch.load(result.best_checkpoint, weights_only=True)
    (key,) = [key for key in best["callbacks"] if "'monitor': 'OVERALL/cmc/1'" in key]
    assert "'mode': 'min'" in key
    assert float(best["callbacks"][key]["best_model_score"]) <= result.metrics["OVERALL/cmc/1"]
