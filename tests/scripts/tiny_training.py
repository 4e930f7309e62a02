"""A tiny training config on the mock dataset, shared by the tests and the scripts they run: 32 px images, the
example plugin's ``tiny_conv``, ArcFace, SGD and a balance sampler of 6 labels x 5 instances (2 steps an
epoch on the 16 train labels), 2 epochs validated after each.

Run as a script (``python tiny_training.py CONFIG.yaml key=value ...``) it trains a config with a loss that can
send its own process a signal at a chosen step (:class:`SignallingArcFace`), for the tests of kills and
interrupts that must land at a precise moment.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import yaml
from oml_losses import ArcFaceLoss
from torch import Tensor

from oml_core import hookimpl

#: ``norm_resize`` args under which white (the background) becomes 0, so that the figures, not the background,
#: make the embeddings of the untrained ``tiny_conv`` differ.
IMAGE_ARGS = {"im_size": 32, "mean": [1.0] * 3, "std": [0.25] * 3}


def tiny_config(logs_root: Path, **overrides: Any) -> dict[str, Any]:
    """The config (a plain dict: no hydra), with ``overrides`` replacing top-level keys."""
    cfg = {
        "postfix": "tiny",
        "seed": 7,
        "accelerator": "cpu",
        "devices": 1,
        "dataframe_name": "df.csv",
        "logs_root": str(logs_root),
        "transforms_train": {"name": "augs_flip", "args": IMAGE_ARGS},
        "transforms_val": {"name": "norm_resize", "args": IMAGE_ARGS},
        "sampler": {"name": "balance", "args": {"n_labels": 6, "n_instances": 5}},
        "bs_val": 16,
        "max_epochs": 2,
        "valid_period": 1,
        "metric_args": {"cmc_top_k": [1, 5], "map_top_k": [5], "return_only_overall_category": True},
        "metric_for_checkpointing": "OVERALL/cmc/1",
        "extractor": {"name": "tiny_conv", "args": {"feat_dim": 16}},
        "criterion": {"name": "arcface", "args": {"in_features": 16, "num_classes": 16, "s": 8.0}},
        "optimizer": {"name": "sgd", "args": {"lr": 0.02}},
        "lightning_trainer_extra_args": {"enable_progress_bar": False},
    }
    return {**cfg, **overrides}


#: The loss of :class:`SignallingArcFace` (registered by :class:`SignallingPlugin`).
SIGNALLING_LOSS = "arcface_signalling"
#: ``<step>:<signal>`` (``9:SIGKILL``): :class:`SignallingArcFace` sends its own process ``signal`` in the forward
#: of its ``step``-th training step (counted from 1 in that process); unset: never.
SIGNAL_AT_ENV = "OML_TEST_SIGNAL_AT"


class SignallingArcFace(ArcFaceLoss):
    """ArcFace, exactly (the same weights and state dict), which sends its own process a real signal at a chosen
    training step (:data:`SIGNAL_AT_ENV`): a kill or an interrupt that lands at a precise moment of a run, e.g.
    in the last step of an epoch (an interrupt as the epoch ends) or at the first step of the next one (right
    after ``best.ckpt`` of the epoch was written)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        at = os.environ.get(SIGNAL_AT_ENV)
        step, _, name = at.partition(":") if at else ("0", "", "")
        self.signal_step, self.signal = int(step), getattr(signal, name, None)
        self.training_steps = 0

    def forward(self, features: Tensor, labels: Tensor) -> Tensor:
        if self.training:
            self.training_steps += 1
            if self.training_steps == self.signal_step:
                os.kill(os.getpid(), self.signal)
        return super().forward(features, labels)


class SignallingPlugin:
    """Registers :class:`SignallingArcFace` as the loss :data:`SIGNALLING_LOSS`."""

    @hookimpl
    def oml_register_losses(self, register: Any) -> None:
        register(SIGNALLING_LOSS, SignallingArcFace)


def run(config_path: Path, *overrides: str) -> int:
    """Run the extractor's training pipeline on the yaml config ``config_path`` with top-level ``key=value``
    ``overrides`` (values read as yaml) and :class:`SignallingPlugin`; an error is reported as ``oml train``
    reports it (one line on stderr, its exit status)."""
    from oml_core.cli.errors import error_report
    from oml_core.lightning.pipelines.train import extractor_training_pipeline
    from oml_core.registry import Registry

    cfg = yaml.safe_load(config_path.read_text())
    for override in overrides:
        key, _, value = override.partition("=")
        cfg[key] = yaml.safe_load(value)
    try:
        extractor_training_pipeline(cfg, registry=Registry([SignallingPlugin()]))
    except Exception as error:
        message, status = error_report(error, ["train", *overrides])
        print(f"oml train: {message}", file=sys.stderr)
        return status
    return 0


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1]), *sys.argv[2:]))
