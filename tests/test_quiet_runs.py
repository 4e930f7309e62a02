"""Quiet by default: a run's output holds what it did, not Lightning's tips and banners, torch's deprecations
or progress bars redrawn into a log file; a run written to a file gets a line per epoch instead of a bar."""

from __future__ import annotations

import io
import logging
import os
import re
import sys
import warnings
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from omegaconf import OmegaConf
from torch.utils.data import DataLoader

from oml_core.config.compose import compose_config
from oml_core.datasets.image_checks import check_images
from oml_core.lightning.callbacks.epoch_summary import EpochSummary, format_epoch_summary
from oml_core.lightning.pipelines import (
    extractor_prediction_pipeline,
    extractor_training_pipeline,
    postprocessor_training_pipeline,
)
from oml_core.lightning.progress import progress_bar_enabled
from oml_core.lightning.quiet import quiet_lightning
from oml_core.registry import Registry

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from tiny_training import tiny_config  # noqa: E402

#: What Lightning says in every run that a quiet run does not show.
NOISE = ("Tip:", "litlogger", "GPU available", "TPU available", "`Trainer.fit` stopped")
LEAFSPEC = "isinstance(treespec, LeafSpec)"
TINY_EXTRACTOR = {"name": "tiny_conv", "args": {"feat_dim": 16}}
#: ``epoch 1/1: loss 0.6931, OVERALL/cmc/1 0.6562, 1.0 s``
EPOCH_LINE = re.compile(r"^epoch (\d+)/(\d+): loss \d+\.\d{4}, OVERALL/cmc/1 [01]\.\d{4}, \d+\.\d s$", re.M)


class FakeTerminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _mock_dataset_cache(oml_cache_dir, monkeypatch):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))


def _config(pipeline: str, registry: Registry, *overrides: str) -> dict:
    return OmegaConf.to_container(compose_config(pipeline, list(overrides), registry=registry), resolve=True)


def _postprocessor_config(tmp_path: Path, registry: Registry) -> dict:
    """The default config of ``oml train-postprocessor`` for one epoch, with tiny models and images."""
    cfg = _config(
        "postprocessor_training_pipeline",
        registry,
        "max_epochs=1",
        f"logs_root={tmp_path}",
        "embeddings_cache_dir=null",
        "transforms_train.args.im_size=32",
        "transforms_extraction.args.im_size=32",
    )
    cfg["extractor"] = TINY_EXTRACTOR
    cfg["pairwise_model"]["args"].update(extractor=TINY_EXTRACTOR)
    cfg["postprocessor"]["args"]["pairwise_model"] = cfg["pairwise_model"]
    return cfg


def _prediction_config(tmp_path: Path, registry: Registry, *overrides: str) -> dict:
    cfg = _config(
        "extractor_prediction_pipeline",
        registry,
        f"save_dir={tmp_path}",
        "transforms_predict.args.im_size=32",
        *overrides,
    )
    cfg["extractor"] = TINY_EXTRACTOR
    return cfg


@pytest.fixture()
def lightning_lines():
    """The messages Lightning logs meanwhile (its own handler writes to the stderr of the time it was imported,
    out of capfd's reach)."""
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    loggers = [logging.getLogger(name) for name in ("pytorch_lightning", "lightning_fabric")]
    for logger in loggers:
        logger.addHandler(handler)
    yield seen
    for logger in loggers:
        logger.removeHandler(handler)


# ------------------------------------------------------------------------------------------- whole runs
@pytest.mark.slow
def test_oml_train_written_to_a_file_has_a_line_per_epoch_and_no_noise(
    tmp_path, oml_cache_dir, oml_fork_server
):
    # stdout and stderr to one file, as `oml train > out.txt 2>&1`: no terminal
    result = oml_fork_server.run(
        [
            "train",
            "max_epochs=1",
            "valid_period=1",
            f"logs_root={tmp_path / 'logs'}",
            "transforms_train.args.im_size=32",
            "transforms_val.args.im_size=32",
        ],
        {**os.environ, "OML_CACHE_DIR": str(oml_cache_dir)},
        timeout=300,
        merge_stderr=True,
    )
    text = result.stdout
    assert result.returncode == 0, text[-3000:]
    assert "\r" not in text  # neither Lightning's bar nor the image check's
    for noise in (*NOISE, "LeafSpec"):
        assert noise not in text
    assert "Checked 192 images" in text
    assert [m.groups() for m in EPOCH_LINE.finditer(text)] == [("1", "1")]


def test_the_postprocessor_training_in_process_shows_no_tips_or_banners(tmp_path, capfd, lightning_lines):
    registry = Registry()
    result = postprocessor_training_pipeline(_postprocessor_config(tmp_path, registry), registry=registry)
    out, err = capfd.readouterr()
    for noise in NOISE:
        assert noise not in out + err
        assert not [line for line in lightning_lines if noise in line]
    assert "\r" not in out + err  # capfd's streams are no terminal: no bar
    (line,) = EPOCH_LINE.findall(out)
    assert line == ("1", "1")
    assert f"OVERALL/cmc/1 {result.metrics['OVERALL/cmc/1']:.4f}," in out
    # the pipeline reports nothing: `oml train-postprocessor` prints the report
    assert "Run directory:" not in out

    # the same run outside quiet_lightning: three Trainers (two extractions and the training) say them
    postprocessor_training_pipeline.__wrapped__(_postprocessor_config(tmp_path, registry), registry=registry)
    assert len([line for line in lightning_lines if "Tip:" in line and "litlogger" in line]) == 3
    assert len([line for line in lightning_lines if line.startswith("GPU available: ")]) == 3


def test_a_python_user_calling_a_pipeline_sees_no_leafspec_warning(tmp_path):
    registry = Registry()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # over pytest's own filter of the LeafSpec warning
        extractor_prediction_pipeline(_prediction_config(tmp_path / "quiet", registry), registry=registry)
        assert not [w for w in caught if LEAFSPEC in str(w.message)]
        # the same run outside quiet_lightning: Lightning does warn (so the check above can fail)
        extractor_prediction_pipeline.__wrapped__(
            _prediction_config(tmp_path / "loud", registry), registry=registry
        )
    assert [w.category for w in caught if LEAFSPEC in str(w.message)] == [FutureWarning]


def test_a_resumed_run_does_not_warn_about_its_checkpoints_folder(tmp_path):
    """The resumed run goes on in its own checkpoints folder, which holds the run's files: Lightning would warn
    that the folder "exists and is not empty" (and, for a checkpoint of another folder, that its "dirpath has
    changed")."""
    first = extractor_training_pipeline(tiny_config(tmp_path, max_epochs=1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = extractor_training_pipeline(
            tiny_config(tmp_path, max_epochs=2, resume=str(first.last_checkpoint))
        )
    assert resumed.run_dir == first.run_dir
    assert not [
        w
        for w in caught
        if "dirpath has changed" in str(w.message) or "exists and is not empty" in str(w.message)
    ]


# ---------------------------------------------------------------------------------------- progress bars
def test_explicit_enable_progress_bar_true_still_gives_a_bar(tmp_path, capfd):
    registry = Registry()
    extractor_prediction_pipeline(
        _prediction_config(
            tmp_path / "bar", registry, "lightning_trainer_extra_args.enable_progress_bar=true"
        ),
        registry=registry,
    )
    out, err = capfd.readouterr()  # Lightning draws on stdout, the image check (tqdm) on stderr
    assert "\rPredicting DataLoader 0: 100%" in out and "\rChecking images: 100%" in err
    extractor_prediction_pipeline(_prediction_config(tmp_path / "auto", registry), registry=registry)
    out, err = capfd.readouterr()  # the default config's null: no terminal, no bar
    assert "\r" not in out + err and "Predicting" not in out and "Checking images" not in err


def test_a_progress_bar_by_default_only_on_a_terminal(monkeypatch):
    # a bar only when both stdout (Lightning's bar) and stderr (the image check's) are terminals
    for stdout, stderr, terminal in (
        (FakeTerminal(), FakeTerminal(), True),
        (io.StringIO(), FakeTerminal(), False),  # oml train > log.txt
        (FakeTerminal(), io.StringIO(), False),  # oml train 2> log.txt
        (io.StringIO(), io.StringIO(), False),
    ):
        monkeypatch.setattr(sys, "stdout", stdout)
        monkeypatch.setattr(sys, "stderr", stderr)
        assert progress_bar_enabled(None) is terminal
        assert progress_bar_enabled({"enable_progress_bar": None, "max_epochs": 3}) is terminal
        assert progress_bar_enabled({"enable_progress_bar": True}) is True
        assert progress_bar_enabled({"enable_progress_bar": False}) is False


def test_the_image_check_draws_its_bar_only_on_a_terminal(tmp_path, monkeypatch):
    image = tmp_path / "a.png"
    from PIL import Image

    Image.new("RGB", (4, 4)).save(image)
    for stderr, drawn in ((FakeTerminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stdout", FakeTerminal())
        monkeypatch.setattr(sys, "stderr", stderr)
        assert check_images([image] * 3, Image.open, 1, "test") == []
        assert ("Checking images: 100%|" in stderr.getvalue()) is drawn


# ------------------------------------------------------------------------------------- the epoch summary
class _LoggingModule(pl.LightningModule):
    """Logs the loss ``0.1 + epoch`` and ``0.3 + epoch`` for its two batches (epoch mean ``0.2 + epoch``) and
    ``val/score`` ``0.75`` in validation."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))

    def training_step(self, batch, batch_idx):
        logged = torch.tensor(0.1 + 0.2 * batch_idx + self.current_epoch)
        self.log("loss", logged, on_step=True, on_epoch=True, batch_size=1)
        return (self.w * batch).sum()

    def validation_step(self, batch, batch_idx):
        self.log("val/score", 0.75, batch_size=1)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_the_epoch_summary_has_the_epoch_the_logged_loss_and_the_validated_metric(capsys):
    loader = DataLoader(torch.ones(2, 1), batch_size=1)
    trainer = pl.Trainer(
        max_epochs=2,
        check_val_every_n_epoch=2,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[EpochSummary(monitor="val/score")],
    )
    trainer.fit(_LoggingModule(), train_dataloaders=loader, val_dataloaders=loader)
    lines = capsys.readouterr().out.splitlines()
    assert [re.sub(r"\d+\.\d s$", "T s", line) for line in lines] == [
        "epoch 1/2: loss 0.2000, T s",  # not validated: no metric
        "epoch 2/2: loss 1.2000, val/score 0.7500, T s",
    ]


def test_format_epoch_summary():
    assert format_epoch_summary(3, 24, 0.123456, 2.06) == "epoch 3/24: loss 0.1235, 2.1 s"
    assert format_epoch_summary(3, 24, 0.5, 2.0, ("OVERALL/cmc/1", 0.875)) == (
        "epoch 3/24: loss 0.5000, OVERALL/cmc/1 0.8750, 2.0 s"
    )
    assert format_epoch_summary(7, -1, None, 0.04) == "epoch 7: 0.0 s"  # no limit, no loss logged


# ------------------------------------------------------------------------------------------ quiet blocks
def test_quiet_lightning_drops_only_the_chatter_and_only_within_the_block():
    from pytorch_lightning.utilities.rank_zero import rank_zero_info

    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    logger.addHandler(handler)
    try:
        with quiet_lightning():
            rank_zero_info("GPU available: False, used: False")
            rank_zero_info("💡 Tip: For seamless cloud logging and experiment tracking, try litlogger")
            rank_zero_info("`Trainer.fit` stopped: `max_epochs=3` reached.")
            rank_zero_info("Restoring states from the checkpoint path at last.ckpt")
        rank_zero_info("TPU available: False, using: 0 TPU cores")
    finally:
        logger.removeHandler(handler)
    assert seen == [
        "Restoring states from the checkpoint path at last.ckpt",
        "TPU available: False, using: 0 TPU cores",
    ]


def test_quiet_lightning_ignores_only_the_upstream_warnings_and_only_within_the_block():
    leafspec = "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec)` instead."
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with quiet_lightning():
            warnings.warn(leafspec, FutureWarning, stacklevel=1)
            warnings.warn("something else is deprecated", FutureWarning, stacklevel=1)
        warnings.warn(leafspec, FutureWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["something else is deprecated", leafspec]
