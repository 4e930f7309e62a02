"""``extractor_training_pipeline``: train and validate an extractor from an OML-style config."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytorch_lightning as pl
from pytorch_lightning.utilities import rank_zero_only

from oml_core.config.components import build_component
from oml_core.config.data import build_dataset_component, check_datasets, dataset_entry, dataset_of
from oml_core.config.schemas import ExtractorTrainingConfig
from oml_core.config.typed import check_component_arguments, validate_config
from oml_core.engine import (
    CHECKPOINTS_FOLDER,
    FIGURES_FOLDER,
    is_ddp_child_process,
    is_ddp_engine,
    make_run_dir,
    named_run_dir,
    parse_engine_params,
    run_dir_for_ddp_processes,
    shared_run_dir,
)
from oml_core.inference.batches import evaluation_loader
from oml_core.interfaces.datasets import IDatasetComponent
from oml_core.interfaces.models import IFreezable
from oml_core.lightning.callbacks.metric import MetricValCallback, MetricValCallbackDDP
from oml_core.lightning.callbacks.run_record import make_run_record, plain
from oml_core.lightning.callbacks.validation import START_EPOCH
from oml_core.lightning.interrupts import InterruptRequest, graceful_interrupts
from oml_core.lightning.modules.extractor import ExtractorModule, ExtractorModuleDDP
from oml_core.lightning.pipelines.shared.common import build_logger, embedding_metrics, log_dir_of
from oml_core.lightning.pipelines.shared.preflight import (
    check_engine,
    check_logs_root,
    check_metric_for_checkpointing,
    check_validation_ground_truth,
    checkpoint_size,
)
from oml_core.lightning.pipelines.shared.resume import plan_resume
from oml_core.lightning.pipelines.shared.training import (
    build_optimizer,
    build_train_loader,
    check_criterion_fits,
    fit_keeping_checkpoints,
    resumed_logger_spec,
    run_callbacks,
    scheduler_args,
    training_trainer_args,
)
from oml_core.lightning.progress import progress_bar_enabled
from oml_core.lightning.quiet import quiet_lightning
from oml_core.registry import ConfigError, Registry, default_registry
from oml_core.registry.entry import Entry

PIPELINE = "extractor_training_pipeline"


@dataclass
class TrainingResult:
    """What a training run produced.

    Attributes:
        metrics: The metrics of the last validation (after the last epoch), flat (``{"OVERALL/cmc/1": 0.75}``).
        run_dir: The run's own directory under ``logs_root``.
        log_dir: Where the logger wrote (the TensorBoard event files, or the local folder of another logger).
        best_checkpoint: The checkpoint with the best ``metric_for_checkpointing``.
        last_checkpoint: The checkpoint of the last epoch.
        epochs: The metrics of every validation by epoch: ``0`` before training (``validate_before_training``),
            ``n`` after the ``n``-th epoch (a resumed run has those of the run it resumed too).
        best_epoch: The epoch ``best_checkpoint`` holds (None when no epoch was validated).
        metric_for_checkpointing: The metric ``best_checkpoint`` is the best of (the config's key).
        mode_for_checkpointing: ``max`` (larger is better) or ``min`` (the config's key).
        resumed_from: The checkpoint the run went on from (the config's ``resume`` as given), or None.
        is_main_process: True in the process that started the run (global rank 0), which writes and reports; False
            in the other DDP processes, which return the same result and report nothing.
    """

    metrics: dict[str, float]
    run_dir: Path
    log_dir: Path | None
    best_checkpoint: Path | None
    last_checkpoint: Path | None
    epochs: dict[int, dict[str, float]] = field(default_factory=dict)
    best_epoch: int | None = None
    metric_for_checkpointing: str = field(kw_only=True)
    mode_for_checkpointing: str = field(kw_only=True)
    resumed_from: Path | None = None
    is_main_process: bool = True

    @property
    def start_metrics(self) -> dict[str, float] | None:
        """The metrics of the initial weights (validated before training), or None."""
        return self.epochs.get(0)

    @property
    def best_metrics(self) -> dict[str, float] | None:
        """The metrics of the epoch ``best_checkpoint`` holds, or None."""
        return None if self.best_epoch is None else self.epochs.get(self.best_epoch)

    @property
    def last_epoch(self) -> int | None:
        """The last epoch validated after training started (not the start, epoch 0); None when none."""
        return _last_trained_epoch(self.epochs)


def _last_trained_epoch(epochs: Mapping[int, Mapping[str, float]]) -> int | None:
    """The largest epoch of ``epochs`` after training started (not :data:`START_EPOCH`), None when none."""
    return max((epoch for epoch in epochs if epoch != START_EPOCH), default=None)


@quiet_lightning()
def extractor_training_pipeline(
    cfg: Mapping[str, Any] | ExtractorTrainingConfig | Any, registry: Registry | None = None
) -> TrainingResult:
    """Train and validate a feature extractor which represents images as feature vectors.

    The config (a dict, a ``DictConfig`` or its schema's object) enters once, at the door: checked and converted
    into the pipeline's typed config (:func:`~oml_core.config.typed.validate_config`), which is all the pipeline
    reads after. Its keys are OML's; each is documented on its field of
    :class:`~oml_core.config.schemas.ExtractorTrainingConfig` (all of them: ``docs/config.md``, ``oml train
    --help``). Components are ``{name, args}`` specs built by ``registry`` (the default registry when None). The
    logger gets the typed config: every key with its value (the defaults included), as every pipeline's logger.

    The run writes into a new folder (``logs_root``/``logs_folder``, or the folder of the run it resumes):
    ``checkpoints/best.ckpt`` (the best validation) and ``checkpoints/last.ckpt`` (written after it, on the cadence
    of ``checkpoint_every_seconds`` and ``checkpoint_every_n_steps``, at the end and on SIGINT/SIGTERM). More than
    one process runs DDP (``ExtractorModuleDDP``, ``MetricValCallbackDDP``): every batch is split among the
    processes, so that the batch of ``sampler``/``bs_train`` is the global batch; with ``gather_across_devices``
    the loss and its miner see the whole global batch too, else each process's share. A resume that differs from its
    run is refused before any work (:mod:`~oml_core.lightning.pipelines.shared.resume`).

    SIGINT (Ctrl-C) or SIGTERM during training: the run ends its current step, saves ``last.ckpt`` and raises
    :class:`~oml_core.lightning.stops.TrainingInterrupted` (a second signal exits at once), see
    :mod:`oml_core.lightning.interrupts`.

    Prints nothing and logs no report: the result carries the metrics of every validated epoch (start, best and
    last among them), the checkpointing metric and where the logs and checkpoints were written;
    :func:`oml_core.reports.pipelines.training_report` makes the report of it that ``oml train`` prints (in the main
    process, ``is_main_process``). Logged meanwhile: the check of the data (``Checked N images``) and a line per
    epoch when there is no progress bar.

    Returns:
        A :class:`TrainingResult`.

    Raises:
        ConfigError: an unknown, missing or malformed key (one line naming it); RegistryError: an unknown
            component name or argument.
        TrainingStopped: the run was interrupted (``TrainingInterrupted``) or its loss became NaN or infinite
            (``NonFiniteLossError``); both name the last good checkpoint.
    """
    config = cast(ExtractorTrainingConfig, validate_config(cfg, PIPELINE))
    registry = registry or default_registry()
    check_component_arguments(config, registry)
    engine = parse_engine_params(
        config.accelerator, config.devices, config.find_unused_parameters, config.num_nodes
    )
    is_ddp = is_ddp_engine(engine)
    trainer_args = training_trainer_args(config, engine)
    launching = not is_ddp_child_process()  # the DDP processes skip what the launching process checked
    if launching:
        check_engine(engine, config.precision, config.lightning_trainer_extra_args)
    pl.seed_everything(config.seed, workers=True, verbose=False)

    data = build_dataset_component(registry, config.as_mapping(), PIPELINE)
    train_dataset = dataset_of(data, "train", PIPELINE)
    val_dataset = dataset_of(data, "validation", PIPELINE)
    record = make_run_record(PIPELINE, config, data.source)
    resume = plan_resume(record, config) if config.resume else None  # refused before any work
    if launching:
        _check_data(config, data, train_dataset, val_dataset, dataset_entry(registry, config.dataset))
    train_loader, generators, resumable = build_train_loader(config, registry, train_dataset, PIPELINE)
    val_loader = evaluation_loader(val_dataset, config.bs_val, config.num_workers)
    module_args = _module_args(config, registry, train_dataset)
    metric = embedding_metrics(val_dataset, config.metric_args, registry, None, PIPELINE, ddp=is_ddp)
    if launching:
        data.check_extractor(module_args["extractor"])
        check_metric_for_checkpointing(config.metric_for_checkpointing, metric.metric_keys())
        check_logs_root(  # a resumed run writes into its own folder, wherever logs_root is
            resume.run_dir.parent if resume is not None else config.logs_root,
            checkpoint_size([module_args["extractor"], module_args["criterion"]]),
        )
    if is_ddp:
        module: ExtractorModule = ExtractorModuleDDP(
            loaders_train=train_loader, loaders_val=val_loader, **module_args
        )
    else:
        module = ExtractorModule(**module_args)
    if resume is not None:
        run_dir = resume.run_dir  # the run goes on in its own folder
    else:
        run_dir = shared_run_dir(
            lambda: make_run_dir(config.logs_root, config.postfix, config.logs_folder),
            named_run_dir(config.logs_root, config.logs_folder),
        )
    callback_class = MetricValCallbackDDP if is_ddp else MetricValCallback
    metric_callback = callback_class(
        metric=metric, log_images=config.log_images, figures_dir=run_dir / FIGURES_FOLDER
    )
    logger = build_logger(registry, resumed_logger_spec(registry, config.logger, resume), run_dir)
    rank_zero_only(logger.log_pipeline_info)(plain(config))
    interrupt = InterruptRequest()
    run = run_callbacks(
        config,
        run_dir / CHECKPOINTS_FOLDER,
        metric_callback,
        trainer_args,
        record,
        resume,
        interrupt,
        generators,
        resumable,
        registry=registry,
    )
    trainer = pl.Trainer(
        **trainer_args, logger=logger, callbacks=run.callbacks, default_root_dir=str(run_dir)
    )
    fit_args: dict[str, Any] = {
        "ckpt_path": str(resume.checkpoint) if resume is not None else None,
        "weights_only": True,
    }
    if not is_ddp:
        fit_args.update(train_dataloaders=train_loader, val_dataloaders=val_loader)
    with run_dir_for_ddp_processes(run_dir) if is_ddp else nullcontext(), graceful_interrupts(interrupt):
        if config.validate_before_training and resume is None:
            # the initial weights' metrics (epoch 0): a run that makes them worse says so in its report
            trainer.validate(module, dataloaders=None if is_ddp else val_loader, verbose=False)
        good = resume.checkpoint if resume is not None and resume.verified else None
        fit_keeping_checkpoints(trainer, module, run, good, **fit_args)

    epochs = run.epochs()
    last_epoch = _last_trained_epoch(epochs)
    return TrainingResult(
        metrics=dict(epochs[last_epoch]) if last_epoch is not None else {},
        run_dir=run_dir,
        log_dir=log_dir_of(logger),
        best_checkpoint=run.best_checkpoint(),
        last_checkpoint=run.last.last_saved,
        epochs=epochs,
        best_epoch=run.best.best_epoch,
        metric_for_checkpointing=config.metric_for_checkpointing,
        mode_for_checkpointing=config.mode_for_checkpointing,
        resumed_from=Path(config.resume) if config.resume else None,
        is_main_process=trainer.is_global_zero,
    )


def _module_args(config: ExtractorTrainingConfig, registry: Registry, train_dataset: Any) -> dict[str, Any]:
    """``ExtractorModule``'s arguments: the extractor, criterion, optimizer, scheduling, freezing,
    ``nan_policy`` and ``gather_across_devices``."""
    extractor = build_component(registry, "extractor", config.extractor, "extractor", PIPELINE)
    if config.freeze_n_epochs > 0 and not isinstance(extractor, IFreezable):
        raise ConfigError(
            f"freeze_n_epochs={config.freeze_n_epochs} needs an IFreezable extractor, but the extractor "
            f"{config.extractor.name!r} ({type(extractor).__name__}) cannot be frozen"
        )
    offers = {"label2category": train_dataset.get_label2category}
    criterion = build_component(registry, "loss", config.criterion, "criterion", PIPELINE, offers=offers)
    check_criterion_fits(
        criterion, getattr(extractor, "feat_dim", None), train_dataset.get_labels(), PIPELINE
    )
    params = list(extractor.parameters()) + list(criterion.parameters())
    optimizer = build_optimizer(registry, config.optimizer, params, PIPELINE)
    return {
        "extractor": extractor,
        "criterion": criterion,
        "optimizer": optimizer,
        "input_tensors_key": train_dataset.input_tensors_key,
        "labels_key": train_dataset.labels_key,
        "freeze_n_epochs": config.freeze_n_epochs,
        "nan_policy": config.nan_policy,
        "gather_across_devices": config.gather_across_devices,
        **scheduler_args(config.scheduling, registry, optimizer, PIPELINE),
    }


def _check_data(
    config: ExtractorTrainingConfig,
    data: IDatasetComponent,
    train_dataset: Any,
    val_dataset: Any,
    entry: Entry,
) -> None:
    """The checks of the data before training: the validation split's ground truth
    (:func:`~oml_core.lightning.pipelines.shared.preflight.check_validation_ground_truth`), then the dataset
    component's own (images: every image opens and its box lies in it, unless ``check_images`` is false; the
    dataframe's doubtful rows as warnings) and the first item of each dataset
    (:func:`~oml_core.config.data.check_datasets`; ``entry`` names the component)."""
    check_validation_ground_truth(
        val_dataset.get_labels(), val_dataset.get_query_ids(), val_dataset.get_gallery_ids(), str(data.source)
    )
    progress = progress_bar_enabled(config.lightning_trainer_extra_args)
    check_datasets(data, [train_dataset, val_dataset], config.num_workers, progress, entry)


__all__ = ["TrainingResult", "extractor_training_pipeline"]
