"""A loss that turns NaN or infinite: the run stops at that step with one line naming the step, the loss, the
learning rate and the last good checkpoint, which stays on disk intact and finite; ``nan_policy: skip_batch``
skips such batches instead."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import yaml
from torch import Tensor, nn

from oml_core import hookimpl
from oml_core.lightning.pipelines.train import extractor_training_pipeline
from oml_core.lightning.stops import NonFiniteLossError
from oml_core.registry import Registry

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from tiny_training import tiny_config  # noqa: E402

pytestmark = pytest.mark.slow
#: 2 steps an epoch (6 labels x 5 instances of 16 train labels); after epoch 0 the StepLR makes lr 2e+28.
BLOW_UP_AFTER_EPOCH_0 = {
    "scheduler": {"name": "step", "args": {"step_size": 1, "gamma": 1e30}},
    "scheduler_interval": "epoch",
}


class OnLabel(nn.Module):
    """A loss of ``mean(features ** 2)``, times ``factor`` (NaN, or 0) for a batch with the label ``label``."""

    def __init__(self, label: int, factor: float) -> None:
        super().__init__()
        self.label, self.factor = label, factor

    def forward(self, features: Tensor, labels: Tensor) -> Tensor:
        loss = (features**2).mean()
        return loss * self.factor if (labels == self.label).any() else loss


class NanLossPlugin:
    @hookimpl
    def oml_register_losses(self, register):
        register("on_label", OnLabel)


@pytest.fixture(autouse=True)
def _mock_dataset_cache(oml_cache_dir, monkeypatch):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))


def finite(checkpoint: Path) -> bool:
    state = torch.load(checkpoint, weights_only=True)["state_dict"]
    return all(torch.isfinite(value).all() for value in state.values() if value.is_floating_point())


def test_a_diverging_learning_rate_stops_at_the_step_keeping_the_good_checkpoints(tmp_path):
    cfg = tiny_config(
        tmp_path,
        max_epochs=3,
        logs_folder="run",
        scheduling=BLOW_UP_AFTER_EPOCH_0,
        checkpoint_every_seconds=0,  # last.ckpt after every epoch
    )
    with pytest.raises(NonFiniteLossError) as caught:
        extractor_training_pipeline(cfg)
    checkpoints = tmp_path / "run" / "checkpoints"
    assert str(caught.value) == (
        "at step 4 (epoch 1, batch 2) the loss is nan (learning rate 2e+28): training stopped "
        f"(nan_policy: skip_batch skips such batches); last good checkpoint: {checkpoints / 'last.ckpt'}"
    )
    assert caught.value.checkpoint == checkpoints / "last.ckpt"
    assert sorted(p.name for p in checkpoints.iterdir()) == ["best.ckpt", "last.ckpt"]
    for name in ("best.ckpt", "last.ckpt"):
        saved = torch.load(checkpoints / name, weights_only=True)
        assert (saved["epoch"], saved["global_step"]) == (0, 2) and finite(checkpoints / name)


def test_a_huge_learning_rate_stops_at_the_first_nan_naming_the_step_checkpoint_before_it(tmp_path):
    cfg = tiny_config(
        tmp_path,
        optimizer={"name": "sgd", "args": {"lr": 1e30}},
        checkpoint_every_n_steps=1,
        logs_folder="run",
    )
    with pytest.raises(NonFiniteLossError) as caught:
        extractor_training_pipeline(cfg)
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert str(caught.value) == (
        "at step 2 (epoch 0, batch 2) the loss is nan (learning rate 1e+30): training stopped "
        f"(nan_policy: skip_batch skips such batches); last good checkpoint: {last}"
    )
    assert torch.load(last, weights_only=True)["global_step"] == 1 and finite(last)


def test_weights_gone_infinite_are_never_saved(tmp_path):
    """A learning rate near float32's largest number (an infinite one is refused before any work) makes weights
    infinite at step 1: the step checkpoint is refused before anything is written."""
    cfg = tiny_config(tmp_path, optimizer={"name": "sgd", "args": {"lr": 3e38}}, checkpoint_every_n_steps=1)
    with pytest.raises(NonFiniteLossError) as caught:
        extractor_training_pipeline(cfg)
    assert str(caught.value).startswith("after step 1 (epoch 0) the weight 'extractor.")
    assert str(caught.value).endswith(
        "is not finite: the optimizer diverged (lower the learning rate); "
        "last good checkpoint: none written yet"
    )
    assert not list(tmp_path.rglob("*.ckpt"))


def test_skip_batch_skips_the_steps_of_a_nan_loss_and_goes_on(tmp_path):
    """With plain SGD a skipped batch changes no weight, as a batch whose loss is multiplied by 0 does: the two
    runs end with the same weights."""
    registry = Registry([NanLossPlugin()])

    def config(factor: float, folder: str, policy: str = "skip_batch") -> dict:
        criterion = {"name": "on_label", "args": {"label": 3, "factor": factor}}
        return tiny_config(tmp_path, max_epochs=2, criterion=criterion, nan_policy=policy, logs_folder=folder)

    with pytest.warns(UserWarning, match=r"the loss is nan \(learning rate 0.02\): the batch is skipped"):
        skipped = extractor_training_pipeline(config(float("nan"), "skipped"), registry=registry)
    zeroed = extractor_training_pipeline(config(0.0, "zeroed"), registry=registry)
    got = torch.load(skipped.last_checkpoint, weights_only=True)["state_dict"]
    expected = torch.load(zeroed.last_checkpoint, weights_only=True)["state_dict"]
    assert got.keys() == expected.keys()
    assert all(torch.equal(got[key], expected[key]) for key in expected)
    assert finite(skipped.last_checkpoint)

    with pytest.raises(NonFiniteLossError, match=r"^at step \d \(epoch \d, batch \d\) the loss is nan"):
        extractor_training_pipeline(config(float("nan"), "stopped", "stop"), registry=registry)


def test_the_command_line_says_it_in_one_line(run_oml, tmp_path):
    cfg = tiny_config(
        tmp_path / "logs",
        max_epochs=3,
        scheduling=BLOW_UP_AFTER_EPOCH_0,
        logs_folder="run",
        checkpoint_every_seconds=0,  # last.ckpt after every epoch
    )
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    done = run_oml("train", "--config-path", str(tmp_path), "--config-name", "tiny")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "oml train: at step 4 (epoch 1, batch 2) the loss is nan (learning rate 2e+28): training stopped "
        f"(nan_policy: skip_batch skips such batches); last good checkpoint: "
        f"{tmp_path / 'logs' / 'run' / 'checkpoints' / 'last.ckpt'}"
    )
