"""Pieces shared by the training pipelines (extractor and post-processor): their options, Trainer arguments,
progress report, scheduler, training loader, checkpoints and the callbacks of a run."""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from oml_core.config.callbacks import callback_in_messages, plugin_callback_specs
from oml_core.config.components import build_component, spec_of
from oml_core.engine import merge_trainer_args
from oml_core.lightning.pipelines.shared.common import DEFAULT_LOGGER
from oml_core.lightning.progress import PROGRESS_BAR_ARG, progress_bar_callbacks, progress_bar_enabled
from oml_core.lightning.quiet import quiet_lightning
from oml_core.registry import ConfigError, Registry

if TYPE_CHECKING:
    import pytorch_lightning as pl
    from torch import Generator
    from torch.utils.data import DataLoader

    from oml_core.config.schemas import SchedulingConfig, TrainingConfig
    from oml_core.lightning.callbacks.checkpoint import BestCheckpoint, LastCheckpoint
    from oml_core.lightning.callbacks.metric import MetricValCallback
    from oml_core.lightning.callbacks.validation import ValidationHistory
    from oml_core.lightning.interrupts import InterruptRequest
    from oml_core.lightning.pipelines.shared.resume import Resume
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
    """The callbacks that report a training run's progress: Lightning's ``TQDMProgressBar`` when the Trainer
    draws a progress bar (``trainer_args["enable_progress_bar"]``, see :func:`training_trainer_args` and
    :func:`~oml_core.lightning.progress.progress_bar_callbacks`), else an
    :class:`~oml_core.lightning.callbacks.epoch_summary.EpochSummary` (a line per epoch, with ``monitor``'s value
    after a validation: the config's ``metric_for_checkpointing``)."""
    from oml_core.lightning.callbacks.epoch_summary import EpochSummary

    if trainer_args.get(PROGRESS_BAR_ARG, True):
        return progress_bar_callbacks(trainer_args)
    return [EpochSummary(monitor)]


@dataclass
class RunCallbacks:
    """The callbacks of a training run (:func:`run_callbacks`), and those whose results the pipeline reads.

    Attributes:
        best: Writes ``best.ckpt``; knows its path, epoch and metrics.
        last: Writes ``last.ckpt``; knows the file it wrote last.
        history: The metrics of every validation, by epoch.
        callbacks: All of them, for ``pl.Trainer(callbacks=...)``.
    """

    best: BestCheckpoint
    last: LastCheckpoint
    history: ValidationHistory
    callbacks: list[pl.Callback]

    def last_written(self) -> Path | None:
        """The checkpoint this run wrote last, ``best.ckpt`` or ``last.ckpt`` (``last.ckpt`` of the same step
        is the later: it follows the epoch's ``best.ckpt``), or None before the first."""
        written = [
            (step, order, path)
            for order, (step, path) in enumerate(
                ((self.best.saved_step, self.best.last_saved), (self.last.saved_step, self.last.last_saved))
            )
            if step is not None and path is not None
        ]
        return max(written)[2] if written else None

    def best_checkpoint(self) -> Path | None:
        """The file ``best`` wrote (or the resumed run's, which it goes on from), or None."""
        return Path(self.best.best_model_path) if self.best.best_model_path else None

    def epochs(self) -> dict[int, dict[str, float]]:
        """The metrics of every validation by epoch (:class:`ValidationHistory`), the best epoch's being those of
        the validation that ``best.ckpt`` holds (the same, unless a resumed run replayed that epoch
        differently)."""
        epochs = {epoch: dict(metrics) for epoch, metrics in self.history.epochs.items()}
        if self.best.best_epoch is not None and self.best.best_metrics:
            epochs[self.best.best_epoch] = dict(self.best.best_metrics)
        return epochs


def run_callbacks(
    config: TrainingConfig,
    dirpath: Path,
    metric_callback: MetricValCallback,
    trainer_args: Mapping[str, Any],
    record: Mapping[str, Any],
    resume: Resume | None = None,
    interrupt: InterruptRequest | None = None,
    generators: Mapping[str, Generator] | None = None,
    resumable: ResumableBatchSampler | None = None,
    *,
    registry: Registry,
) -> RunCallbacks:
    """The callbacks of a training run, in ``dirpath`` (the run's ``checkpoints`` folder):

    - ``metric_callback``, then :class:`ValidationHistory` and :class:`ValidateAfterLastEpoch` (the last epoch
      always validates), then the progress report (:func:`progress_callbacks`);
    - the plugins' callbacks of the config key ``callbacks``, built by ``registry`` in the list's order, then
      the plugins' every-run callbacks that the config neither names nor switches off (``callbacks_disabled``),
      with their default arguments (:func:`~oml_core.config.callbacks.plugin_callback_specs`;
      see ``oml_register_callbacks``), each guarded (:func:`~oml_core.lightning.callbacks.guard.guard_callback`):
      one that fails or hangs in a hook stops the run through ``interrupt``, naming it;
    - ``best.ckpt`` (the best ``metric_for_checkpointing`` by ``mode_for_checkpointing``, written at the end of
      a validation that improves it: :class:`~oml_core.lightning.callbacks.checkpoint.BestCheckpoint`), then
      ``last.ckpt`` (every ``checkpoint_every_seconds``, every ``checkpoint_every_n_steps`` steps when set, at the
      end and when ``interrupt`` is set: :class:`~oml_core.lightning.callbacks.checkpoint.LastCheckpoint`), so
      that ``last.ckpt`` always records the ``best.ckpt`` of its epoch; both are written atomically by the
      Trainer's :class:`~oml_core.lightning.callbacks.checkpoint.AtomicCheckpointIO`
      (:func:`training_trainer_args`);
    - the random state of the run and its loader's position (:class:`RNGStateCallback` of ``generators`` and
      ``resumable``) and the run record ``record`` (:class:`RunRecordCallback`) in every checkpoint.

    With a ``resume`` on other data (``new_dataset``) the earlier validations and best are not carried over;
    with a new seed (``new_seed``) the random state is not restored.
    """
    from oml_core.lightning.callbacks.checkpoint import BestCheckpoint, LastCheckpoint
    from oml_core.lightning.callbacks.guard import guard_callback
    from oml_core.lightning.callbacks.rng import RNGStateCallback
    from oml_core.lightning.callbacks.run_record import RunRecordCallback
    from oml_core.lightning.callbacks.validation import ValidateAfterLastEpoch, ValidationHistory
    from oml_core.lightning.interrupts import InterruptRequest

    interrupt = interrupt or InterruptRequest()
    carry_over = resume is None or not resume.new_dataset
    history = ValidationHistory(metric_callback, carry_over=carry_over)
    best = BestCheckpoint(
        dirpath,
        monitor=config.metric_for_checkpointing,
        mode=config.mode_for_checkpointing,
        metrics=lambda: metric_callback.last_metrics,
        carry_over=carry_over,
    )
    last = LastCheckpoint(
        dirpath,
        every_n_steps=config.checkpoint_every_n_steps,
        every_seconds=config.checkpoint_every_seconds,
        interrupt=interrupt,
    )
    callbacks = [
        metric_callback,
        history,
        ValidateAfterLastEpoch(),
        *progress_callbacks(trainer_args, config.metric_for_checkpointing),
        *(
            guard_callback(
                build_component(registry, "callback", spec, key, config.pipeline),
                *callback_in_messages(registry, key, spec, config.callbacks_disabled),
                request=interrupt,
            )
            for key, spec in plugin_callback_specs(registry, config.callbacks, config.callbacks_disabled)
        ),
        best,
        last,
        RNGStateCallback(generators, resumable, restore=resume is None or not resume.new_seed),
        RunRecordCallback(record),
    ]
    return RunCallbacks(best=best, last=last, history=history, callbacks=callbacks)


def fit_keeping_checkpoints(
    trainer: Any, module: Any, run: RunCallbacks, resumed_from: Path | None, **fit_args: Any
) -> None:
    """``trainer.fit(module, **fit_args)``; a :class:`~oml_core.lightning.stops.NonFiniteLossError` on the way,
    or a :class:`~oml_core.lightning.stops.CallbackFailed` raised at once (where no step was trained since the
    last checkpoint), is raised again naming the last good checkpoint: the last one the ``run`` wrote
    (:meth:`RunCallbacks.last_written`), else ``resumed_from`` (give it only when its digest was verified: an
    unverified file is never called good). A plugin's callback that failed where the run went on (see
    :mod:`~oml_core.lightning.callbacks.guard`) but that no save point came after (a callback that runs after
    ``last.ckpt`` at the end of the last epoch) is raised once the fit ends.

    Quiet (:func:`~oml_core.lightning.quiet.quiet_lightning`), and Lightning's warning that a loader is not
    resumable is silenced: the training loaders of the pipelines are (their position is in the checkpoint, see
    :class:`~oml_core.lightning.resumable.ResumableBatchSampler`); so is its warning that the checkpoints folder
    is not empty: a resumed run goes on in its own.
    """
    from oml_core.lightning.stops import CallbackFailed, NonFiniteLossError

    with quiet_lightning(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*your dataloader is not resumable.*")
        # a resumed run goes on writing into its own checkpoints folder
        warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
        try:
            trainer.fit(module, **fit_args)
        except NonFiniteLossError as error:
            raise error.with_checkpoint(run.last_written() or resumed_from) from None
        except CallbackFailed as error:
            if error.checkpoint is not None:
                raise
            raise error.with_checkpoint(run.last_written() or resumed_from) from error.__cause__
    if run.last.interrupt.failure is not None:  # the fit ended: after its last epoch was saved
        raise CallbackFailed(run.last.interrupt.failure, run.last_written(), finished=True)


def resumed_logger_spec(registry: Registry, spec: Any, resume: Resume | None) -> Any:
    """The ``logger`` spec of a run: as given, but for a resumed run whose logger takes a ``version`` (TensorBoard's
    ``version_<n>`` folder, W&B's run id) and whose spec sets none, the version of the run it resumes, so that
    the logs go on where they were."""
    if resume is None or resume.logger_version is None:
        return spec
    given: dict[str, Any] = spec_of(spec) if spec is not None else {"name": DEFAULT_LOGGER, "args": {}}
    args = dict(given.get("args") or {})
    factory = registry.get("logger", given["name"]).load()
    if "version" in args or "version" not in inspect.signature(factory).parameters:
        return spec
    return {"name": given["name"], "args": {**args, "version": resume.logger_version}}


def build_optimizer(registry: Registry, spec: Any, params: Any, pipeline: str, key: str = "optimizer") -> Any:
    """The optimizer of the config key ``key`` over ``params``
    (:func:`~oml_core.config.components.build_component`), refused when the learning rate of one of
    its parameter groups is not a finite number > 0, whatever optimizer it is (a plugin's too, and whatever its
    argument is called). Checked before a scheduler is built on it, which may start it at 0 (a warm-up).

    A learning rate of 0 trains nothing: the way to keep a model frozen is ``freeze_n_epochs``.

    Raises:
        ConfigError: one line naming ``key`` (``optimizer.args.lr`` when the spec sets ``lr``), the value and the
            parameter group, and what to set instead.
    """
    optimizer = build_component(registry, "optimizer", spec, key, pipeline, params=params)
    args = spec_of(spec).get("args") or {}
    named = f"{key}.args.lr" if "lr" in args else f"{key} ({spec_of(spec)['name']!r})"
    groups = [group for group in getattr(optimizer, "param_groups", []) if "lr" in group]
    for index, group in enumerate(groups):
        lr = float(group["lr"])
        if math.isfinite(lr) and lr > 0:
            continue
        group_text = f" (parameter group {index})" if len(groups) > 1 else ""
        fix = "; to keep the model as it is for the first epochs, set freeze_n_epochs" if lr == 0 else ""
        raise ConfigError(
            f"{pipeline}: {named}: the learning rate {lr:g}{group_text} must be a finite number > 0{fix}"
        )
    return optimizer


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
        offers=offers,
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
    "build_optimizer",
    "build_train_loader",
    "check_criterion_fits",
    "RunCallbacks",
    "fit_keeping_checkpoints",
    "progress_callbacks",
    "resumed_logger_spec",
    "run_callbacks",
    "scheduler_args",
    "training_trainer_args",
]
