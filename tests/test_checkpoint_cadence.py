"""When ``last.ckpt`` is written (``LastCheckpoint``): after every epoch with ``checkpoint_every_seconds=0``, on a
time cadence otherwise (within an epoch too), always at the end and on an interrupt. A toy model trains with a
clock that advances 10 s a step, and every checkpoint written is counted by the step it holds."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from oml_core.lightning.callbacks.checkpoint import LastCheckpoint
from oml_core.lightning.interrupts import InterruptRequest, graceful_interrupts
from oml_core.lightning.stops import TrainingInterrupted

STEPS_PER_EPOCH = 4
EPOCHS = 5
SECONDS_PER_STEP = 10.0


class Clock:
    """Seconds that the toy model advances by :data:`SECONDS_PER_STEP` at every training step."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Toy(pl.LightningModule):
    """A linear layer on 16 random points, 4 steps an epoch; at step ``signal_step`` it sends its own process
    SIGINT."""

    def __init__(self, clock: Clock, signal_step: int | None = None) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 1)
        self.clock, self.signal_step = clock, signal_step
        self.points = torch.randn(16, 2, generator=torch.Generator().manual_seed(0))

    def training_step(self, batch: Tensor, batch_idx: int) -> Tensor:
        self.clock.now += SECONDS_PER_STEP
        if self.global_step + 1 == self.signal_step:
            os.kill(os.getpid(), signal.SIGINT)
        return self.layer(batch).pow(2).mean()

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.points, batch_size=16 // STEPS_PER_EPOCH)


class SavedSteps(pl.Callback):
    """The ``global_step`` of every checkpoint written."""

    def __init__(self) -> None:
        self.steps: list[int] = []

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict
    ) -> None:
        self.steps.append(checkpoint["global_step"])


def train(tmp_path, every_seconds: float, signal_step: int | None = None) -> tuple[list[int], LastCheckpoint]:
    clock = Clock()
    interrupt = InterruptRequest()
    last = LastCheckpoint(tmp_path, every_seconds=every_seconds, interrupt=interrupt, clock=clock)
    saved = SavedSteps()
    trainer = pl.Trainer(
        max_epochs=EPOCHS,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[last, saved],
        default_root_dir=tmp_path,
    )
    with graceful_interrupts(interrupt):
        trainer.fit(Toy(clock, signal_step))
    return saved.steps, last


def test_zero_seconds_writes_after_every_epoch(tmp_path):
    steps, last = train(tmp_path, every_seconds=0)
    assert steps == [4, 8, 12, 16, 20] and last.saves == 5
    assert torch.load(tmp_path / "last.ckpt", weights_only=True)["global_step"] == 20


def test_a_long_cadence_writes_at_the_end_only(tmp_path):
    steps, last = train(tmp_path, every_seconds=1e9)
    assert steps == [20] and last.saves == 1


def test_the_cadence_writes_once_its_time_is_up_within_an_epoch_too(tmp_path):
    """Every 25 s of a clock of 10 s a step: after steps 3, 6, 9 (within epochs), 12 (an epoch's end: its
    last step is saved after the epoch's validation), 15, 18, and at the end (20)."""
    steps, _ = train(tmp_path, every_seconds=25)
    assert steps == [3, 6, 9, 12, 15, 18, 20]


def test_an_interrupt_writes_whatever_the_cadence(tmp_path):
    with pytest.raises(TrainingInterrupted) as caught:
        train(tmp_path, every_seconds=1e9, signal_step=6)
    assert str(caught.value) == "SIGINT received: stopped after step 6 (epoch 1)"
    assert torch.load(tmp_path / "last.ckpt", weights_only=True)["global_step"] == 6


def test_the_cadence_must_be_a_number_of_seconds(tmp_path):
    with pytest.raises(ValueError, match=r"^every_seconds must be a number >= 0, got -1$"):
        LastCheckpoint(tmp_path, every_seconds=-1)
