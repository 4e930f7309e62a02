"""The end-of-training report (start, best and last epochs side by side; the warning when training made the
monitored metric worse), the validation history kept in checkpoints, and the validation after the last epoch
whatever ``valid_period``: unit tests on hand-made histories, then real runs through ``oml train``."""

from __future__ import annotations

import re

import pytest
import torch

from oml_core.cli import main
from oml_core.lightning.callbacks.validation import ValidationHistory
from oml_core.reports.pipelines import format_training_table, regression_note, training_columns

EPOCHS = {
    0: {"OVERALL/cmc/1": 0.5, "OVERALL/map/5": 0.25},
    4: {"OVERALL/cmc/1": 0.75, "OVERALL/map/5": 0.5},
    8: {"OVERALL/cmc/1": 0.625, "OVERALL/map/5": 0.625},
}


def test_the_table_shows_start_best_and_last_epochs_side_by_side():
    assert training_columns(EPOCHS, 4, 8) == [("start", 0), ("best", 4), ("last", 8)]
    assert format_training_table(EPOCHS, 4, 8).splitlines() == [
        "Validation metrics",
        "-" * 62,
        "metric         start (epoch 0)  best (epoch 4)  last (epoch 8)",
        "-" * 62,
        "OVERALL/cmc/1           0.5000          0.7500          0.6250",
        "OVERALL/map/5           0.2500          0.5000          0.6250",
        "-" * 62,
    ]


def test_one_column_when_best_is_last_and_none_without_a_start():
    epochs = {1: {"m": 0.125}}
    assert training_columns(epochs, 1, 1) == [("best = last", 1)]
    assert format_training_table(epochs, 1, 1).splitlines()[2] == "metric  best = last (epoch 1)"
    assert format_training_table({}, None, None) == "Validation metrics: (none computed)"


def test_a_metric_an_epoch_lacks_shows_a_dash():
    epochs = {0: {"a": 1.0}, 2: {"a": 0.5, "b": 0.25}}
    rows = format_training_table(epochs, 2, 2).splitlines()
    assert rows[4].split() == ["a", "1.0000", "0.5000"]
    assert rows[5].split() == ["b", "-", "0.2500"]


def test_the_note_says_when_training_made_the_metric_worse():
    worse = {0: {"OVERALL/cmc/1": 0.971}, 3: {"OVERALL/cmc/1": 0.76}, 6: {"OVERALL/cmc/1": 0.7}}
    assert regression_note(worse, 3, "OVERALL/cmc/1", "max") == (
        "Training made OVERALL/cmc/1 worse than the initial weights: 0.9710 before training, 0.7600 at best "
        "(epoch 3); best.ckpt holds epoch 3, the initial weights are what the extractor's config loads."
    )
    assert regression_note(EPOCHS, 4, "OVERALL/cmc/1", "max") is None  # better
    assert regression_note({1: {"m": 0.1}}, 1, "m", "max") is None  # no start
    # lower is better: a larger value is worse
    assert regression_note({0: {"loss": 0.2}, 1: {"loss": 0.3}}, 1, "loss", "min") is not None
    assert regression_note({0: {"loss": 0.2}, 1: {"loss": 0.1}}, 1, "loss", "min") is None


def test_the_best_epoch_is_the_first_of_equal_values_and_never_the_start():
    history = ValidationHistory(metric_callback=None)  # type: ignore[arg-type]
    history.epochs = {
        0: {"m": 0.9},
        1: {"m": 0.5},
        2: {"m": 0.7},
        3: {"m": 0.7},
        4: {"m": float("nan")},
    }
    assert history.best_epoch("m", "max") == 2
    assert history.best_epoch("m", "min") == 1
    assert history.last_epoch == 4 and history.start == {"m": 0.9}
    assert history.best_epoch("other", "max") is None
    with pytest.raises(ValueError, match="mode must be 'max' or 'min'"):
        history.best_epoch("m", "up")
    restored = ValidationHistory(metric_callback=None)  # type: ignore[arg-type]
    restored.load_state_dict(history.state_dict())
    assert restored.epochs.keys() == history.epochs.keys() and restored.epochs[2] == {"m": 0.7}


ROW = re.compile(r"^(OVERALL/\S+)((?:\s+\d+\.\d{4})+)$", re.MULTILINE)
QUICK = [
    "check_images=false",
    "lightning_trainer_extra_args.enable_progress_bar=false",
    "transforms_train.args.im_size=32",
    "transforms_val.args.im_size=32",
]


def _table(stdout: str) -> dict[str, list[float]]:
    return {key: [float(v) for v in values.split()] for key, values in ROW.findall(stdout)}


@pytest.mark.slow
def test_one_epoch_with_a_longer_valid_period_validates_and_writes_best_ckpt(
    tmp_path, oml_cache_dir, monkeypatch, capsys
):
    """``oml train max_epochs=1 valid_period=4``: a period longer than the run still validates its last epoch."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    assert main(["train", "max_epochs=1", "valid_period=4", f"logs_root={tmp_path}", *QUICK]) == 0
    out = capsys.readouterr().out
    (run_dir,) = tmp_path.iterdir()
    best = run_dir / "checkpoints" / "best.ckpt"
    assert best.is_file()
    assert f"Best checkpoint:  {best} (epoch 1)" in out
    assert "metric               start (epoch 0)  best = last (epoch 1)" in out
    table = _table(out)
    assert set(table) == {
        "OVERALL/cmc/1",
        "OVERALL/cmc/5",
        "OVERALL/precision/5",
        "OVERALL/map/5",
        "OVERALL/pcf/0.5",
    }
    assert all(len(values) == 2 for values in table.values())
    # best.ckpt holds the epoch the table calls best: its ModelCheckpoint score is that column's cmc@1
    state = torch.load(best, map_location="cpu", weights_only=True)
    (score,) = [
        v["best_model_score"] for k, v in state["callbacks"].items() if k.startswith("BestCheckpoint")
    ]
    assert float(score) == pytest.approx(table["OVERALL/cmc/1"][1], abs=5e-5)


@pytest.mark.slow
def test_a_run_that_makes_the_embedding_worse_says_so(tmp_path, oml_cache_dir, monkeypatch, capsys):
    """A learning rate far too large collapses the embedding: the report names the metric, the value before
    training and the best epoch's."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    overrides = [
        "max_epochs=2",
        "valid_period=1",
        f"logs_root={tmp_path}",
        "extractor.name=tiny_conv",
        "optimizer@optimizer=sgd",
        "optimizer.args.lr=1000",
        "nan_policy=skip_batch",
        *QUICK,
    ]
    assert main(["train", *overrides]) == 0
    out = capsys.readouterr().out
    table = _table(out)
    start, best = table["OVERALL/cmc/1"][0], table["OVERALL/cmc/1"][1]
    assert best < start
    assert f"Training made OVERALL/cmc/1 worse than the initial weights: {start:.4f} before training" in out


def test_best_checkpoint_takes_the_resumed_runs_best_unless_on_other_data(tmp_path):
    """BestCheckpoint goes on from the best state of the checkpoint it resumes (score, file, epoch and that
    validation's metrics); on other data (``carry_over=False``) from none. A value is better only when strictly
    better and finite."""
    from oml_core.lightning.callbacks.checkpoint import BestCheckpoint

    folder = tmp_path / "run" / "checkpoints"
    state = {
        "dirpath": str(folder),
        "best_model_score": torch.tensor(0.75),
        "best_model_path": str(folder / "best.ckpt"),
        "kth_best_model_path": str(folder / "best.ckpt"),
        "kth_value": torch.tensor(0.75),
        "best_k_models": {str(folder / "best.ckpt"): torch.tensor(0.75)},
        "best_epoch": 3,
        "best_metrics": {"m": 0.75, "other": 0.5},
    }
    best = BestCheckpoint(folder, monitor="m", mode="max")
    best.load_state_dict(state)
    assert float(best.best_model_score) == 0.75 and best.best_model_path == str(folder / "best.ckpt")
    assert (best.best_epoch, best.best_metrics) == (3, {"m": 0.75, "other": 0.5})
    assert best.best_k_models == {str(folder / "best.ckpt"): torch.tensor(0.75)}
    assert [best.is_better(v) for v in (0.75, 0.76, float("nan"), float("inf"))] == [
        False,
        True,
        False,
        False,
    ]
    assert best.state_dict()["best_epoch"] == 3 and best.state_dict()["best_metrics"] == state["best_metrics"]

    fresh = BestCheckpoint(folder, monitor="m", mode="min", carry_over=False)
    fresh.load_state_dict(state)
    assert (fresh.best_model_score, fresh.best_model_path, fresh.best_epoch) == (None, "", None)
    assert fresh.is_better(1e9) and not fresh.is_better(float("nan"))
