"""Pieces shared by the training pipelines (extractor and post-processor): their options, Trainer arguments,
progress report, scheduler, training loader and checkpoints."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from oml_core.lightning.pipelines.shared.common import build_component, merge_trainer_args
from oml_core.lightning.progress import PROGRESS_BAR_ARG, progress_bar_enabled
from oml_core.lightning.quiet import quiet_lightning
from oml_core.registry import ConfigError, Registry

if TYPE_CHECKING:
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import ModelCheckpoint
    from torch import Generator
    from torch.utils.data import DataLoader

    from oml_core.lightning.callbacks.checkpoint import BestCheckpoint, LastCheckpoint
    from oml_core.lightning.interrupts import InterruptRequest
    from oml_core.lightning.pipelines.shared.schema import SchedulingConfig, TrainingConfig
    from oml_core.lightning.resumable import ResumableBatchSampler

#: Trainer arguments of the training pipelines set by config keys, so ``lightning_trainer_extra_args`` may not
#: set them.
TRAINING_TRAINER_ARGS_SET_BY_KEYS = {
    "max_epochs": "the config key 'max_epochs'",
    "check_val_every_n_epoch": "the config key 'valid_period'",
    "precision": "the config key 'precision'",
    "accelerator": "the config key 'accelerator'",
    "devices": "the config key 'devices'",
    "num_nodes": "the config key 'num_nodes'",
    "strategy": "the config keys 'devices', 'num_nodes' and 'find_unused_parameters'",
    "use_distributed_sampler": "the config key 'devices'",
    "logger": "the config key 'logger'",
    "callbacks": "its own callbacks (metrics, checkpoints, random state)",
    "default_root_dir": "the config keys 'logs_root' and 'logs_folder'",
    "enable_checkpointing": "its own checkpoints (best.ckpt, last.ckpt)",
}
#: The training pipelines' ``pl.Trainer`` arguments, which ``lightning_trainer_extra_args`` may change.
TRAINING_TRAINER_DEFAULTS = {
    "num_sanity_val_steps": 0,
    "deterministic": True,
    "log_every_n_steps": 1,
    "enable_model_summary": False,
}


def training_trainer_args(config: TrainingConfig, engine: Mapping[str, Any]) -> dict[str, Any]:
    """The ``pl.Trainer`` arguments of a training pipeline, but the logger, callbacks and root dir of the run:
    :data:`TRAINING_TRAINER_DEFAULTS`, the ``engine`` (:func:`parse_engine_params`), ``max_epochs``,
    ``valid_period`` (1), ``precision`` (32) and ``lightning_trainer_extra_args`` (see
    :func:`merge_trainer_args`); its ``plugins`` always include an
    :class:`~oml_core.lightning.callbacks.checkpoint.AtomicCheckpointIO` (every checkpoint is written atomically).
    Its ``enable_progress_bar`` is always set: true or false as ``lightning_trainer_extra_args`` says, else
    (absent or null) a bar only on a terminal (see :func:`progress_callbacks` for the runs without).

    Raises:
        ConfigError: ``lightning_trainer_extra_args.plugins`` has a checkpoint IO of its own.
    """
    from lightning_fabric.plugins import CheckpointIO

    from oml_core.lightning.callbacks.checkpoint import AtomicCheckpointIO

    args = merge_trainer_args(
        {
            **TRAINING_TRAINER_DEFAULTS,
            **engine,
            "max_epochs": config.max_epochs,
            "check_val_every_n_epoch": config.valid_period,
            "precision": config.precision,
        },
        config.lightning_trainer_extra_args,
        TRAINING_TRAINER_ARGS_SET_BY_KEYS,
    )
    plugins = args.get("plugins") or []
    plugins = list(plugins) if isinstance(plugins, list | tuple) else [plugins]
    if any(isinstance(plugin, CheckpointIO) for plugin in plugins):
        raise ConfigError(
            "lightning_trainer_extra_args.plugins: the pipeline writes its checkpoints with its own "
            "AtomicCheckpointIO; remove the checkpoint IO plugin"
        )
    args["plugins"] = [*plugins, AtomicCheckpointIO()]
    args[PROGRESS_BAR_ARG] = progress_bar_enabled(args)
    return args


def progress_callbacks(trainer_args: Mapping[str, Any], monitor: str | None = None) -> list[pl.Callback]:
    """The callbacks that report a training run's progress besides the Trainer's own: none when the Trainer
    draws a progress bar (``trainer_args["enable_progress_bar"]``, see :func:`training_trainer_args`), else an
    :class:`~oml_core.lightning.callbacks.epoch_summary.EpochSummary` (a line per epoch, with ``monitor``'s value
    after a validation: the config's ``metric_for_checkpointing``)."""
    from oml_core.lightning.callbacks.epoch_summary import EpochSummary

    return [] if trainer_args.get(PROGRESS_BAR_ARG, True) else [EpochSummary(monitor)]


def checkpoint_callbacks(
    config: TrainingConfig, dirpath: Path, interrupt: InterruptRequest | None = None
) -> tuple[BestCheckpoint, LastCheckpoint]:
    """``best.ckpt`` (the best ``metric_for_checkpointing``, by ``mode_for_checkpointing``, after validation)
    and ``last.ckpt`` (after every epoch, every ``checkpoint_every_n_steps`` steps when set, and when
    ``interrupt`` is set: see :class:`~oml_core.lightning.callbacks.checkpoint.LastCheckpoint`), in
    ``dirpath``. Both are written atomically by the Trainer's
    :class:`~oml_core.lightning.callbacks.checkpoint.AtomicCheckpointIO` (:func:`training_trainer_args`)."""
    from oml_core.lightning.callbacks.checkpoint import BestCheckpoint, LastCheckpoint

    best = BestCheckpoint(
        dirpath=dirpath,
        filename="best",
        monitor=config.metric_for_checkpointing,
        mode=config.mode_for_checkpointing,
        save_top_k=1,
        auto_insert_metric_name=False,
    )
    last = LastCheckpoint(dirpath, every_n_steps=config.checkpoint_every_n_steps, interrupt=interrupt)
    return best, last


def checkpoint_paths(best: ModelCheckpoint, last: LastCheckpoint) -> tuple[Path | None, Path | None]:
    """The files that the :func:`checkpoint_callbacks` ``best`` and ``last`` wrote (None for one that wrote
    nothing)."""
    return (Path(best.best_model_path) if best.best_model_path else None, last.last_saved)


def fit_keeping_checkpoints(
    trainer: Any, module: Any, last: LastCheckpoint, resumed_from: str | None, **fit_args: Any
) -> None:
    """``trainer.fit(module, **fit_args)``; a :class:`~oml_core.lightning.stops.NonFiniteLossError` on the way
    is raised again naming the last good checkpoint: the last one ``last`` wrote, else ``resumed_from``.

    Quiet (:func:`~oml_core.lightning.quiet.quiet_lightning`), and Lightning's warning that a loader is not
    resumable is silenced: the training loaders of the pipelines are (their position is in the checkpoint, see
    :class:`~oml_core.lightning.resumable.ResumableBatchSampler`). On a resume into a new directory ``best.ckpt``
    goes on from the resumed run's best (:class:`~oml_core.lightning.callbacks.checkpoint.BestCheckpoint`).
    """
    from oml_core.lightning.stops import NonFiniteLossError

    with quiet_lightning(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*your dataloader is not resumable.*")
        try:
            trainer.fit(module, **fit_args)
        except NonFiniteLossError as error:
            good = last.last_saved or (Path(resumed_from) if resumed_from else None)
            raise error.with_checkpoint(good) from None


def scheduler_args(
    scheduling: SchedulingConfig | None, registry: Registry, optimizer: Any, pipeline: str
) -> dict[str, Any]:
    """A training module's scheduler arguments (``scheduler``, ``scheduler_interval``,
    ``scheduler_frequency``, ``scheduler_monitor_metric``) from a config's ``scheduling`` block; only
    ``scheduler=None`` when it is null."""
    if scheduling is None:
        return {"scheduler": None}
    return {
        "scheduler": build_component(
            registry, "scheduler", scheduling.scheduler, "scheduling.scheduler", pipeline, optimizer=optimizer
        ),
        "scheduler_interval": scheduling.scheduler_interval,
        "scheduler_frequency": scheduling.scheduler_frequency,
        "scheduler_monitor_metric": scheduling.monitor_metric,
    }


def offered_args(
    registry: Registry, kind: str, spec: Mapping[str, Any], offers: Mapping[str, Callable[[], Any]]
) -> dict[str, Any]:
    """The runtime arguments of a component: ``offers[name]()`` for every ``name`` its factory accepts and its
    config's ``args`` do not set (a sampler's ``labels`` and ``generator``, a loss's ``label2category``)."""
    accepted = inspect.signature(registry.get(kind, spec["name"]).load()).parameters
    given = set(spec.get("args") or {})
    return {name: offer() for name, offer in offers.items() if name in accepted and name not in given}


def build_train_loader(
    config: TrainingConfig, registry: Registry, dataset: Any, pipeline: str
) -> tuple[DataLoader, dict[str, Generator], ResumableBatchSampler]:
    """The training loader of a training config, the generators its randomness comes from (by name, for
    the checkpoints), and its batch sampler, a
    :class:`~oml_core.lightning.resumable.ResumableBatchSampler` (so that a mid-epoch checkpoint resumes
    exactly).

    With ``sampler`` null: shuffled batches of ``bs_train`` (the last incomplete one dropped) by a generator
    seeded with ``seed``. Otherwise the sampler makes the batches (``bs_train`` is ignored, with a warning); it
    gets the dataset's ``labels`` and ``label2category`` and the seeded generator when its factory takes them
    and its ``args`` do not set them (a ``seed`` in its ``args`` replaces the generator).
    """
    import torch
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler

    from oml_core.lightning.resumable import ResumableBatchSampler

    generator = torch.Generator().manual_seed(config.seed)
    if config.sampler is None:
        assert config.bs_train is not None  # the config's check: with sampler null it needs bs_train
        batches = BatchSampler(RandomSampler(dataset, generator=generator), config.bs_train, drop_last=True)
        resumable = ResumableBatchSampler(batches, {"train_loader": generator})
        loader = DataLoader(
            dataset, batch_sampler=resumable, generator=generator, num_workers=config.num_workers
        )
        return loader, {"train_loader": generator}, resumable
    if config.bs_train is not None:
        warnings.warn(
            f"bs_train={config.bs_train} is ignored: the sampler {config.sampler.name!r} makes the batches",
            stacklevel=3,
        )
    offers = {
        "labels": dataset.get_labels,
        "generator": lambda: generator,
        "label2category": dataset.get_label2category,
    }
    if "seed" in config.sampler.args:  # the config's seed replaces the pipeline's generator
        offers.pop("generator")
    sampler = build_component(
        registry,
        "sampler",
        config.sampler,
        "sampler",
        pipeline,
        **offered_args(registry, "sampler", config.sampler, offers),
    )
    own = getattr(sampler, "generator", None)
    generators = {"sampler": own} if isinstance(own, torch.Generator) else {}
    resumable = ResumableBatchSampler(sampler, generators)
    return DataLoader(dataset, batch_sampler=resumable, num_workers=config.num_workers), generators, resumable


def check_criterion_fits(
    criterion: Any, feat_dim: int | None, labels: Sequence[int] | Any, pipeline: str
) -> None:
    """Fail before training, in one line naming the argument, when a classification loss does not fit the
    extractor or the training labels.

    A loss that exposes ``in_features`` (ArcFace and its kin) must get the extractor's ``feat_dim`` (the message
    names its argument ``in_features_argument``, ``in_features`` by default); one that exposes ``num_classes``
    needs the training labels in ``0 .. num_classes - 1``. Losses without these
    attributes (the triplet family) and extractors without ``feat_dim`` are not checked.

    Raises:
        ConfigError: ``in_features != feat_dim``, or a label outside ``0 .. num_classes - 1``.
    """
    in_features = getattr(criterion, "in_features", None)
    if isinstance(in_features, int) and isinstance(feat_dim, int) and in_features != feat_dim:
        argument = f"criterion.args.{getattr(criterion, 'in_features_argument', 'in_features')}"
        raise ConfigError(
            f"{pipeline}: {argument}={in_features}, but the extractor gives {feat_dim}-dimensional features: "
            f"set {argument}={feat_dim}"
        )
    num_classes = getattr(criterion, "num_classes", None)
    if isinstance(num_classes, int) and len(labels):
        labels = np.asarray(labels)
        low, high = int(labels.min()), int(labels.max())
        if low < 0 or high >= num_classes:
            raise ConfigError(
                f"{pipeline}: criterion.args.num_classes={num_classes}, but the training labels range over "
                f"[{low}, {high}] ({len(np.unique(labels))} distinct): the loss needs labels 0 .. num_classes - 1"
            )


__all__ = [
    "TRAINING_TRAINER_ARGS_SET_BY_KEYS",
    "TRAINING_TRAINER_DEFAULTS",
    "build_train_loader",
    "check_criterion_fits",
    "checkpoint_callbacks",
    "checkpoint_paths",
    "fit_keeping_checkpoints",
    "offered_args",
    "progress_callbacks",
    "scheduler_args",
    "training_trainer_args",
]
