"""Pieces shared by the inference pipelines (validation, post-processor validation and prediction): their
config checks and Trainer arguments on one device, the config and dataset of the validation pipelines, the
check that every image can be read, and the extraction of embeddings in dataset order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from oml_core.lightning.pipelines.common import (
    as_config,
    build_component,
    check_one_device,
    merge_trainer_args,
    parse_engine_params,
    read_dataframe,
    require,
    resolve_dataset_root,
    split_dataframe,
)
from oml_core.lightning.progress import PROGRESS_BAR_ARG, progress_bar_enabled
from oml_core.registry import ConfigError, Registry

if TYPE_CHECKING:
    import pytorch_lightning as pl
    from torch import Tensor
    from torch.utils.data import DataLoader

#: Trainer arguments set by other config keys, so ``lightning_trainer_extra_args`` may not set them.
TRAINER_ARGS_SET_BY_KEYS = {
    "accelerator": "the config key 'accelerator'",
    "devices": "the config key 'devices'",
    "strategy": "the config key 'devices' (one device)",
    "use_distributed_sampler": "the config key 'devices' (one device)",
    "precision": "the config key 'precision'",
    "logger": "the config key 'logger' (prediction logs nothing)",
    "callbacks": "its own callbacks",
    "default_root_dir": "the config keys 'logs_root' and 'logs_folder' (or 'save_dir')",
}
TRAINER_DEFAULTS = {"deterministic": True, "enable_model_summary": False, "enable_checkpointing": False}


def inference_config(
    cfg: Mapping[str, Any] | Any, required: Sequence[str], defaults: Mapping[str, Any], pipeline: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config of an inference pipeline, checked, and the ``pl.Trainer`` arguments it gives.

    The known keys of ``pipeline`` are ``required`` and those of ``defaults``; ``defaults`` fill the optional
    keys the config leaves out. The Trainer arguments are those of the engine keys ``accelerator`` (null: gpu
    when CUDA is available, else cpu), ``devices`` and ``precision``
    (:func:`~oml_core.lightning.pipelines.common.parse_engine_params`), :data:`TRAINER_DEFAULTS`, and
    ``lightning_trainer_extra_args`` (any other ``pl.Trainer`` arguments). Their ``enable_progress_bar`` is
    always set: true or false as ``lightning_trainer_extra_args`` says, else (absent or null) a bar only on a
    terminal (:func:`~oml_core.lightning.progress.progress_bar_enabled`).

    The inference pipelines run on one device: their metrics and predictions are gathered in one process
    (several devices are the training pipeline's business).

    Returns:
        ``(config as a plain dict with the defaults, Trainer arguments without logger, callbacks and root dir)``.

    Raises:
        ConfigError: a missing required key, devices
            other than one device, or ``lightning_trainer_extra_args`` that ``pl.Trainer`` does not take or
            that a config key sets.
    """
    known = {*required, *defaults}
    cfg = {
        key: value for key, value in as_config(cfg).items() if key in known
    }  # the rest: the user's variables
    require(cfg, *required, pipeline=pipeline)
    cfg = {**defaults, **cfg}
    engine = parse_engine_params(cfg["accelerator"], cfg["devices"])
    check_one_device(cfg, engine, pipeline)
    trainer_args = merge_trainer_args(
        {**TRAINER_DEFAULTS, **engine, "precision": cfg["precision"]},
        cfg["lightning_trainer_extra_args"],
        TRAINER_ARGS_SET_BY_KEYS,
    )
    trainer_args[PROGRESS_BAR_ARG] = progress_bar_enabled(trainer_args)
    return cfg, trainer_args


def validation_dataset(cfg: Mapping[str, Any], registry: Registry, pipeline: str) -> Any:
    """The ``ImageQueryGalleryLabeledDataset`` of the ``split == "validation"`` rows of ``dataset_root /
    dataframe_name``, with the transforms ``transforms_val`` and ``cache_size``.

    Raises:
        ConfigError: a bad dataframe, or one without validation rows (naming the file).
    """
    from oml_core.datasets import ImageQueryGalleryLabeledDataset

    dataset_root = resolve_dataset_root(cfg["dataset_root"])
    _, df_val = split_dataframe(read_dataframe(dataset_root, cfg["dataframe_name"]))
    if len(df_val) == 0:
        raise ConfigError(f"{dataset_root / cfg['dataframe_name']}: has no rows with split=validation")
    return ImageQueryGalleryLabeledDataset(
        df_val,
        dataset_root=dataset_root,
        transform=build_component(registry, "transforms", cfg["transforms_val"], "transforms_val", pipeline),
        cache_size=cfg["cache_size"],
    )


def extract_embeddings(trainer: pl.Trainer, extractor: Any, loader: DataLoader) -> Tensor:
    """The float embeddings that ``extractor`` gives to the items of ``loader`` (``trainer.predict`` of an
    ``ExtractorModule``), on the CPU, in dataset order (row ``i``: item ``i``) whatever the batches' order."""
    from oml_core.lightning.modules.extractor import ExtractorModule

    outputs = trainer.predict(
        ExtractorModule(extractor=extractor), dataloaders=loader, return_predictions=True
    )
    return _in_dataset_order(outputs)


def _in_dataset_order(outputs: Sequence[Mapping[str, Any]]) -> Tensor:
    """The float features of the predicted batches, sorted by their dataset index (row ``i``: item ``i``)."""
    import torch

    indices = torch.cat([torch.as_tensor(batch["idx"]).reshape(-1).cpu() for batch in outputs])
    features = torch.cat([batch["embeddings"].detach().float().cpu() for batch in outputs])
    return features[torch.argsort(indices)]


__all__ = [
    "TRAINER_ARGS_SET_BY_KEYS",
    "TRAINER_DEFAULTS",
    "extract_embeddings",
    "inference_config",
    "validation_dataset",
]
