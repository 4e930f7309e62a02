"""``extractor_training_pipeline``: train and validate an extractor from an OML-style config."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from oml_core.lightning.callbacks.metric import MetricValCallback
from oml_core.lightning.modules.extractor import ExtractorModule
from oml_core.lightning.pipelines.common import (
    as_config,
    build_logger,
    check_components,
    format_metrics_table,
    make_run_dir,
    read_dataframe,
    require,
    resolve_dataset_root,
    split_dataframe,
)
from oml_core.registry import ConfigError, Registry, default_registry

COMPONENT_KINDS = {
    "extractor": "extractor",
    "criterion": "loss",
    "optimizer": "optimizer",
    "scheduler": "scheduler",
    "sampler": "sampler",
    "transforms_train": "transforms",
    "transforms_val": "transforms",
    "logger": "logger",
}
REQUIRED_KEYS = (
    "postfix",
    "seed",
    "dataframe_name",
    "logs_root",
    "transforms_train",
    "transforms_val",
    "extractor",
    "criterion",
    "optimizer",
    "max_epochs",
    "bs_val",
    "metric_args",
    "metric_for_checkpointing",
)


@dataclass
class TrainingResult:
    """What a training run produced.

    Attributes:
        metrics: The last validation metrics, flat (``{"OVERALL/cmc/1": 0.75, ...}``).
        run_dir: The run's own directory under ``logs_root``.
        log_dir: Where the logger wrote (the TensorBoard event files).
        best_checkpoint: The checkpoint with the best ``metric_for_checkpointing``.
        last_checkpoint: The checkpoint of the last epoch.
    """

    metrics: dict[str, float]
    run_dir: Path
    log_dir: Path | None
    best_checkpoint: Path | None
    last_checkpoint: Path | None


def extractor_training_pipeline(
    cfg: Mapping[str, Any] | Any, registry: Registry | None = None
) -> TrainingResult:
    """Train and validate a feature extractor which represents images as feature vectors.

    The config has OML's keys: ``postfix, seed, precision, accelerator, devices, dataset_root`` (null: the
    built-in mock dataset), ``dataframe_name, logs_root, num_workers, cache_size, transforms_train,
    transforms_val, sampler`` (null: shuffled batches of ``bs_train``), ``bs_val, max_epochs, valid_period,
    metric_args, log_images, metric_for_checkpointing, extractor, criterion, optimizer, scheduler, logger``.
    Components are ``{name, args}`` specs built by ``registry`` (the default registry when None).

    Prints the validation metrics table and where the logs and checkpoints were written.

    Returns:
        A :class:`TrainingResult`.
    """
    cfg = as_config(cfg)
    require(cfg, *REQUIRED_KEYS, pipeline="extractor_training_pipeline")
    registry = registry or default_registry()
    check_components(cfg, registry, COMPONENT_KINDS)
    pl.seed_everything(cfg["seed"], workers=True, verbose=False)

    dataset_root = resolve_dataset_root(cfg)
    df = read_dataframe(dataset_root, cfg["dataframe_name"])
    df_train, df_val = split_dataframe(df)
    train_dataset, val_dataset = _build_datasets(cfg, registry, dataset_root, df_train, df_val)

    extractor = registry.build("extractor", cfg["extractor"])
    criterion = registry.build(
        "loss",
        cfg["criterion"],
        **_offered(registry, "loss", cfg["criterion"], {"label2category": train_dataset.get_label2category}),
    )
    params = list(extractor.parameters()) + list(criterion.parameters())
    optimizer = registry.build("optimizer", cfg["optimizer"], params=params)
    scheduler = (
        registry.build("scheduler", cfg["scheduler"], optimizer=optimizer) if cfg.get("scheduler") else None
    )

    train_loader = _train_loader(cfg, registry, train_dataset)
    val_loader = DataLoader(val_dataset, batch_size=cfg["bs_val"], num_workers=cfg.get("num_workers", 0))

    from oml_core.metrics import EmbeddingMetrics

    metric_args = {"verbose": False, **(cfg.get("metric_args") or {})}  # the pipeline prints its own table
    metric = EmbeddingMetrics(dataset=val_dataset, registry=registry, **metric_args)
    metric_callback = MetricValCallback(metric=metric, log_images=bool(cfg.get("log_images", False)))

    run_dir = make_run_dir(cfg["logs_root"], cfg["postfix"])
    logger = build_logger(registry, cfg.get("logger"), run_dir)
    logger.log_pipeline_info(cfg)
    checkpoint = pl.callbacks.ModelCheckpoint(
        dirpath=run_dir / "checkpoints",
        filename="best",
        monitor=cfg["metric_for_checkpointing"],
        mode="max",
        save_last=True,
        save_top_k=1,
        auto_insert_metric_name=False,
    )
    module = ExtractorModule(
        extractor=extractor,
        criterion=criterion,
        optimizer=optimizer,
        scheduler=scheduler,
        scheduler_interval=cfg.get("scheduler_interval", "step"),
        scheduler_frequency=cfg.get("scheduler_frequency", 1),
        scheduler_monitor_metric=cfg.get("scheduler_monitor_metric"),
        freeze_n_epochs=cfg.get("freeze_n_epochs", 0),
    )
    trainer = pl.Trainer(
        max_epochs=cfg["max_epochs"],
        accelerator=cfg.get("accelerator", "auto"),
        devices=cfg.get("devices", 1),
        precision=cfg.get("precision", 32),
        check_val_every_n_epoch=cfg.get("valid_period", 1),
        num_sanity_val_steps=0,
        logger=logger,
        callbacks=[metric_callback, checkpoint],
        default_root_dir=str(run_dir),
        deterministic=cfg.get("deterministic", True),
        log_every_n_steps=1,
        enable_model_summary=False,
        enable_progress_bar=cfg.get("progress_bar", True),
    )
    trainer.fit(module, train_dataloaders=train_loader, val_dataloaders=val_loader)

    result = TrainingResult(
        metrics=dict(metric_callback.last_metrics),
        run_dir=run_dir,
        log_dir=Path(logger.log_dir) if getattr(logger, "log_dir", None) else None,
        best_checkpoint=Path(checkpoint.best_model_path) if checkpoint.best_model_path else None,
        last_checkpoint=Path(checkpoint.last_model_path) if checkpoint.last_model_path else None,
    )
    _report(result)
    return result


def _build_datasets(
    cfg: Mapping[str, Any], registry: Registry, dataset_root: Path, df_train: Any, df_val: Any
):
    from oml_core.datasets import ImageLabeledDataset, ImageQueryGalleryLabeledDataset

    common = {"dataset_root": dataset_root, "cache_size": cfg.get("cache_size", 0)}
    train = ImageLabeledDataset(
        df_train, transform=registry.build("transforms", cfg["transforms_train"]), **common
    )
    val = ImageQueryGalleryLabeledDataset(
        df_val, transform=registry.build("transforms", cfg["transforms_val"]), **common
    )
    if len(train) == 0 or len(val) == 0:
        raise ConfigError(
            f"{dataset_root / cfg['dataframe_name']}: needs rows with split=train and split=validation "
            f"(found {len(train)} and {len(val)})"
        )
    return train, val


def _offered(
    registry: Registry, kind: str, spec: Mapping[str, Any], offers: Mapping[str, Any]
) -> dict[str, Any]:
    """The runtime arguments of a component: ``offers[name]()`` for every ``name`` its factory accepts and its
    config's ``args`` do not set (a sampler's ``labels`` and ``generator``, a loss's ``label2category``)."""
    accepted = inspect.signature(registry.get(kind, spec["name"]).load()).parameters
    given = set(spec.get("args") or {})
    return {name: offer() for name, offer in offers.items() if name in accepted and name not in given}


def _train_loader(cfg: Mapping[str, Any], registry: Registry, dataset: Any) -> DataLoader:
    num_workers = cfg.get("num_workers", 0)
    if cfg.get("sampler") is None:
        if "bs_train" not in cfg:
            raise ConfigError("extractor_training_pipeline: with sampler null the config needs bs_train")
        generator = torch.Generator().manual_seed(cfg["seed"])
        return DataLoader(
            dataset,
            batch_size=cfg["bs_train"],
            shuffle=True,
            drop_last=True,
            generator=generator,
            num_workers=num_workers,
        )
    offers = {
        "labels": dataset.get_labels,
        "generator": lambda: torch.Generator().manual_seed(cfg["seed"]),
        "label2category": dataset.get_label2category,
    }
    if "seed" in (cfg["sampler"].get("args") or {}):  # the config's seed replaces the pipeline's generator
        offers.pop("generator")
    runtime = _offered(registry, "sampler", cfg["sampler"], offers)
    sampler = registry.build("sampler", cfg["sampler"], **runtime)
    return DataLoader(dataset, batch_sampler=sampler, num_workers=num_workers)


def _report(result: TrainingResult) -> None:
    print()
    print(format_metrics_table(result.metrics))
    print(f"Run directory:    {result.run_dir}")
    print(f"TensorBoard logs: {result.log_dir}")
    print(f"Best checkpoint:  {result.best_checkpoint}")
    print(f"Last checkpoint:  {result.last_checkpoint}")
