"""Run the validation or the prediction pipeline on DEVICES CPU processes (gloo) and write every process's result
as JSON.

Usage: python ddp_inference.py OUT_DIR NAME validate|validate_sharded|predict DEVICES [NUM_NODES]
(``validate_sharded``: ``metric_args.shard_gallery=true``, without ``fnmr@fmr`` and ``pcf``, which it refuses).
With DEVICES=2 Lightning re-runs this script as the second process. With NUM_NODES (validate only) the processes
are started by torchrun, one per "node", and the run writes into ``logs_folder=run``. The config is
``tiny_training.tiny_config``'s data and model (the example plugin's ``tiny_conv`` with random weights of seed 7,
32 px images) with batches of 7: the mock dataset's splits do not divide into batches of 7, nor the batches into
2 halves, so the padding of DDP's shares is exercised.
Every process writes ``OUT_DIR/<NAME>_rank<RANK>.json``: the metrics (validate) or the predictions file's path
(predict), and the run directory; validate: whether its result says it is the main process (the one that
reports).
"""

import json
import sys
from pathlib import Path

from tiny_training import IMAGE_ARGS, tiny_config

from oml_core.ddp import get_rank_safe
from oml_core.lightning.pipelines import extractor_prediction_pipeline, extractor_validation_pipeline

BATCH = 7


def validate(out: Path, name: str, devices: int, num_nodes: int | None = None, sharded: bool = False) -> dict:
    cfg = tiny_config(out / name, devices=devices, bs_val=BATCH, postfix="validation")
    cfg["metric_args"] = {**cfg["metric_args"], "fmr_vals": [0.1], "pcf_variance": [0.5]}
    if sharded:
        cfg["metric_args"] = {**cfg["metric_args"], "fmr_vals": [], "pcf_variance": [], "shard_gallery": True}
    keys = ("postfix", "seed", "accelerator", "devices", "dataframe_name", "logs_root", "transforms_val")
    keys += ("bs_val", "metric_args", "extractor", "lightning_trainer_extra_args")
    cfg = {key: cfg[key] for key in keys}
    if num_nodes is not None:
        cfg.update(num_nodes=num_nodes, logs_folder="run")
    result = extractor_validation_pipeline(cfg)
    return {
        "metrics": result.metrics,
        "run_dir": str(result.run_dir),
        "is_main_process": result.is_main_process,
    }


def predict(out: Path, name: str, devices: int) -> dict:
    cfg = {
        "seed": 7,
        "accelerator": "cpu",
        "devices": devices,
        "bs": BATCH,
        "transforms_predict": {"name": "norm_resize", "args": IMAGE_ARGS},
        "extractor": {"name": "tiny_conv", "args": {"feat_dim": 16}},
        "save_dir": str(out / name),
        "lightning_trainer_extra_args": {"enable_progress_bar": False},
    }
    result = extractor_prediction_pipeline(cfg)
    return {"predictions": str(result.predictions_path), "n": len(result.paths)}


if __name__ == "__main__":
    out_dir, run_name, pipeline, n_devices = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    if pipeline.startswith("validate"):
        nodes = int(sys.argv[5]) if len(sys.argv) > 5 else None
        record = validate(out_dir, run_name, n_devices, nodes, sharded=pipeline == "validate_sharded")
    else:
        record = predict(out_dir, run_name, n_devices)
    (out_dir / f"{run_name}_rank{get_rank_safe()}.json").write_text(json.dumps(record))
