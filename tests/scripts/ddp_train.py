"""Train a short run on DEVICES CPU processes (gloo) and write what every process saw as JSON.

Usage: python ddp_train.py OUT_DIR NAME DEVICES MAX_EPOCHS [RESUME]. With DEVICES=2 Lightning re-runs this
script as the second process. The run is ``tiny_training.tiny_config`` without random augmentation (so that
runs on 1 and 2 processes see the same pixels), going on from the checkpoint RESUME when given: ArcFace is a
mean of per-item losses, so the mean of the processes' gradients is the single-process gradient, and the
balance sampler's batches of 30 are split 15 + 15 among 2 processes.
Every process writes ``OUT_DIR/<NAME>_rank<RANK>.json``: its validation metrics, the dataset ids it trained
on at every step (also those of all the processes, gathered by ``sync_dicts_ddp``), the last checkpoint, and
whether its result says it is the main process (the one that reports).
"""

import atexit
import json
import sys
from pathlib import Path
from typing import Any

import torch.distributed as dist
from tiny_training import IMAGE_ARGS, tiny_config

from oml_core.ddp import sync_dicts_ddp
from oml_core.lightning.modules import ExtractorModule
from oml_core.lightning.pipelines.train import extractor_training_pipeline

STEPS: list[list[int]] = []
RANK = {"rank": 0}


def recording_training_step(self: ExtractorModule, batch: dict[str, Any], batch_idx: int) -> Any:
    STEPS.append(batch["idx"].tolist())
    RANK["rank"] = self.global_rank
    return ORIGINAL_TRAINING_STEP(self, batch, batch_idx)


ORIGINAL_TRAINING_STEP = ExtractorModule.training_step
ExtractorModule.training_step = recording_training_step  # ExtractorModuleDDP inherits it


def record_group_at_exit(out: Path, name: str) -> None:
    alive = dist.is_available() and dist.is_initialized()
    (out / f"{name}_rank{RANK['rank']}_exit.json").write_text(json.dumps({"group_alive": alive}))


if __name__ == "__main__":
    out, name, n_devices, max_epochs = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    atexit.register(record_group_at_exit, out, name)
    cfg = tiny_config(
        out / name,
        devices=n_devices,
        max_epochs=max_epochs,
        resume=sys.argv[5] if len(sys.argv) > 5 else None,
        transforms_train={"name": "norm_resize", "args": IMAGE_ARGS},
    )
    result = extractor_training_pipeline(cfg)
    record = {
        "metrics": result.metrics,
        "steps": STEPS,
        "last_checkpoint": str(result.last_checkpoint),
        "is_main_process": result.is_main_process,
        "steps_of_all_ranks": sync_dicts_ddp({"steps": STEPS}, n_devices)["steps"],
    }
    (out / f"{name}_rank{RANK['rank']}.json").write_text(json.dumps(record))
