"""A short real ``oml train`` that tests share: :data:`TINY_TRAINING` and the run it leaves (:class:`TrainedRun`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tests.scripts.oml_forkserver import OmlForkServer

#: ``oml train`` with its default config for one epoch on 32 px images, validated after the epoch, no progress bar.
TINY_TRAINING = (
    "train",
    "max_epochs=1",
    "valid_period=1",
    "lightning_trainer_extra_args.enable_progress_bar=false",
    "transforms_train.args.im_size=32",
    "transforms_val.args.im_size=32",
)


@dataclass(frozen=True)
class TrainedRun:
    """A finished ``oml train``: what it printed and its run directory."""

    stdout: str
    run_dir: Path

    @property
    def best_checkpoint(self) -> Path:
        return self.run_dir / "checkpoints" / "best.ckpt"


def train_tiny(oml_fork_server: OmlForkServer, oml_cache_dir: Path, logs_root: Path) -> TrainedRun:
    """Run :data:`TINY_TRAINING` as a program of its own (forked by ``oml_fork_server``, as the ``run_oml`` fixture
    runs ``oml``), its run under ``logs_root``."""
    env = {**os.environ, "OML_CACHE_DIR": str(oml_cache_dir)}
    done = oml_fork_server.run([*TINY_TRAINING, f"logs_root={logs_root}"], env, None, 300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = logs_root.iterdir()
    return TrainedRun(done.stdout, run_dir)
