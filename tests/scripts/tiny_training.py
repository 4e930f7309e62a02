"""A tiny training config on the mock dataset, shared by the tests and the scripts they run: 32 px images, the
example plugin's ``tiny_conv``, ArcFace, SGD and a balance sampler of 6 labels x 5 instances (2 steps an
epoch on the 16 train labels), 2 epochs validated after each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
