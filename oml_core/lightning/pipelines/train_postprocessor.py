"""``postprocessor_training_pipeline``: train a pairwise post-processor (STIR-style re-ranker) on top of a
trained extractor, from an OML-style config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytorch_lightning as pl
import torch

from oml_core.config.components import build_component
from oml_core.config.data import build_dataset_component, dataset_of
from oml_core.config.rules import ComponentSpec, component
from oml_core.config.schemas import PostprocessorTrainingConfig
from oml_core.config.typed import check_component_arguments, validate_config
from oml_core.datasets.extended import ExtendedLabeledDataset
from oml_core.engine import (
    CHECKPOINTS_FOLDER,
    FIGURES_FOLDER,
    check_one_device,
    make_run_dir,
    parse_engine_params,
)
from oml_core.inference.batches import evaluation_loader
from oml_core.interfaces.datasets import ILabeledDataset
from oml_core.interfaces.models import IFreezable
from oml_core.lightning.callbacks.metric import MetricValCallback
from oml_core.lightning.callbacks.run_record import make_run_record, plain
from oml_core.lightning.interrupts import InterruptRequest, graceful_interrupts
from oml_core.lightning.modules.pairwise_postprocessing import PairwiseModule
from oml_core.lightning.pipelines.shared.common import build_logger, embedding_metrics, log_dir_of
from oml_core.lightning.pipelines.shared.embeddings_cache import (
    EMBEDDINGS_KEY,
    CachedEmbeddings,
    EmbeddingsDataset,
    EmbeddingsSource,
)
from oml_core.lightning.pipelines.shared.inference import TRAINER_DEFAULTS as INFERENCE_TRAINER_DEFAULTS
from oml_core.lightning.pipelines.shared.postprocessing import (
    BEFORE_PREFIX,
    build_pairwise_postprocessor,
    metrics_of_embeddings,
)
from oml_core.lightning.pipelines.shared.preflight import check_engine
from oml_core.lightning.pipelines.shared.resume import plan_resume
from oml_core.lightning.pipelines.shared.training import (
    build_optimizer,
    build_train_loader,
    fit_keeping_checkpoints,
    resumed_logger_spec,
    run_callbacks,
    scheduler_args,
    training_trainer_args,
)
from oml_core.lightning.progress import PROGRESS_BAR_ARG, progress_bar_enabled
from oml_core.lightning.quiet import quiet_lightning
from oml_core.registry import ConfigError, Registry, default_registry

PIPELINE = "postprocessor_training_pipeline"
#: The pair miner of a config whose ``pairs_miner`` is null (its ``hard_mining`` is ``hard_pairs_mining``).
DEFAULT_PAIRS_MINER = "pairs"


@dataclass
class PostprocessorTrainingResult:
    """What a post-processor training run produced.

    Attributes:
        metrics: The last validation metrics after post-processing, flat (``{"OVERALL/cmc/1": 0.75, ...}``).
        metrics_before: The validation metrics of the extractor's embeddings alone.
        run_dir: The run's own directory under ``logs_root``.
        log_dir: Where the logger wrote.
        best_checkpoint: The checkpoint of the pairwise model with the best ``metric_for_checkpointing``.
        last_checkpoint: The checkpoint of the last epoch.
        embeddings: Where the embeddings of every split came from.
        best_epoch: The epoch ``best_checkpoint`` holds (None when no epoch was validated).
        postprocessor: The name of the post-processor that validated the model (the config's ``postprocessor``).
        resumed_from: The checkpoint the run went on from (``resume``), or None.
        is_main_process: True in the process of global rank 0, which reports (this pipeline runs on one device).
    """

    metrics: dict[str, float]
    metrics_before: dict[str, float]
    run_dir: Path
    log_dir: Path | None
    best_checkpoint: Path | None
    last_checkpoint: Path | None
    embeddings: list[EmbeddingsSource]
    best_epoch: int | None = None
    postprocessor: str = field(kw_only=True)
    resumed_from: Path | None = None
    is_main_process: bool = True


@quiet_lightning()
def postprocessor_training_pipeline(
    cfg: Mapping[str, Any] | PostprocessorTrainingConfig | Any, registry: Registry | None = None
) -> PostprocessorTrainingResult:
    """Train and validate a pairwise postprocessor which fixes mistakes of a feature extractor in retrieval
    setup (OML's STIR recipe).

    The config (a dict, a ``DictConfig`` or its schema's object) enters once, at the door: checked and converted
    into the pipeline's typed config (:func:`~oml_core.config.typed.validate_config`), which is all the pipeline
    reads after. Its keys are OML's; each is documented on its field of
    :class:`~oml_core.config.schemas.PostprocessorTrainingConfig` (all of them: ``docs/config.md``, ``oml
    train-postprocessor --help``). Components are ``{name, args}`` specs built by ``registry`` (the default registry
    when None). The logger is given every key of the typed config with its value (the defaults included). The
    pipeline runs on one device; its checkpoint and resume keys mean what they mean in the extractor's training
    pipeline.

    Steps: (a) the embeddings of the train and validation splits by the extractor (``transforms_extraction``),
    read from ``embeddings_cache_dir`` when cached there; (b) training of :class:`PairwiseModule`: in every
    batch (images with ``transforms_train`` and their cached embeddings) the pair miner mines pairs on the
    embeddings, the pairwise model gets their images and learns
    ``is_negative`` with ``BCEWithLogitsLoss``; (c) validation every ``valid_period`` epochs: the retrieval
    results of the validation embeddings re-ranked by the post-processor, which holds the model as trained so
    far, its images read with ``transforms_extraction``. The metrics of the embeddings alone (before) are
    computed once. ``checkpoints/best.ckpt`` (the best validation, written when it improves) and
    ``checkpoints/last.ckpt`` (after ``best.ckpt``, on a time cadence, at the end and on SIGINT/SIGTERM) hold the
    pairwise model (its ``weights`` argument loads them) and the training state; ``resume`` goes on from
    ``last.ckpt`` in the run's own folder, checked as the extractor's training pipeline checks it (see
    :mod:`~oml_core.lightning.pipelines.shared.resume`). The run is quiet (see
    :func:`~oml_core.lightning.quiet.quiet_lightning`).

    Prints nothing and logs no report: :func:`oml_core.reports.pipelines.postprocessor_training_report` makes the report
    of the result (both metric tables and the paths) that ``oml train-postprocessor`` prints. Logged meanwhile:
    where the embeddings came from (computed, cached, loaded) and a line per epoch when there is no progress bar.

    Returns:
        A :class:`PostprocessorTrainingResult`.

    Raises:
        ConfigError: an unknown, missing or malformed key, bad weights, more than one device, a resume that
            differs from its run (one line naming the key); RegistryError: an unknown component name or argument.
        TrainingStopped: the run was interrupted (``TrainingInterrupted``) or its loss became NaN or infinite
            (``NonFiniteLossError``); both name the last good checkpoint.
    """
    config = cast(PostprocessorTrainingConfig, validate_config(cfg, PIPELINE))
    registry = registry or default_registry()
    check_component_arguments(config, registry)
    if config.pairs_miner is None:
        registry.get("pairs_miner", DEFAULT_PAIRS_MINER)
    engine = parse_engine_params(config.accelerator, config.devices, num_nodes=config.num_nodes)
    check_one_device(config.devices, engine, PIPELINE)
    trainer_args = training_trainer_args(config, engine)
    check_engine(engine, config.precision, config.lightning_trainer_extra_args)
    pl.seed_everything(config.seed, workers=True, verbose=False)

    keys = config.as_mapping()
    data = build_dataset_component(registry, keys, PIPELINE)
    # the same data with the extractor's transforms, for the embeddings
    extraction_transforms = {
        key: config.transforms_extraction for key in ("transforms_train", "transforms_val")
    }
    data_to_embed = build_dataset_component(registry, {**keys, **extraction_transforms}, PIPELINE)
    train_to_embed = dataset_of(data_to_embed, "train", PIPELINE)
    val_dataset = dataset_of(data_to_embed, "validation", PIPELINE)
    train_items = cast(ILabeledDataset, dataset_of(data, "train", PIPELINE))
    record = make_run_record(PIPELINE, config, data.source)
    resume = plan_resume(record, config) if config.resume else None  # refused before any work

    module = _pairwise_module(config, registry)
    postprocessor = _postprocessor(config, registry, module.model)
    extraction = CachedEmbeddings(
        registry,
        config,
        transforms_spec=config.transforms_extraction,
        dataframe_path=data.source,
        trainer_args=_extraction_trainer_args(engine, config),
        batch_size=config.batch_size_inference,
        pipeline=PIPELINE,
    )
    # the training items carry their embeddings, from which the pairs are mined
    train_dataset = ExtendedLabeledDataset(train_items, {EMBEDDINGS_KEY: extraction(train_to_embed, "train")})
    emb_val = extraction(val_dataset, "validation")
    train_loader, generators, resumable = build_train_loader(config, registry, train_dataset, PIPELINE)
    val_loader = evaluation_loader(EmbeddingsDataset(emb_val), config.batch_size_inference)
    metrics_before = metrics_of_embeddings(
        embedding_metrics(val_dataset, config.metric_args, registry, None, PIPELINE), emb_val
    )
    metric = embedding_metrics(val_dataset, config.metric_args, registry, postprocessor, PIPELINE)

    if resume is not None:
        run_dir = resume.run_dir  # the run goes on in its own folder
    else:
        run_dir = make_run_dir(config.logs_root, config.postfix, config.logs_folder)
    logger = build_logger(registry, resumed_logger_spec(registry, config.logger, resume), run_dir)
    logger.log_pipeline_info(plain(config))
    logger.log_metrics({f"{BEFORE_PREFIX}{k}": v for k, v in metrics_before.items()}, step=0)
    metric_callback = MetricValCallback(
        metric=metric, log_images=config.log_images, figures_dir=run_dir / FIGURES_FOLDER
    )
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
    # the training's randomness (dropout, augmentations) must not depend on whether the extractor ran
    pl.seed_everything(config.seed, workers=True, verbose=False)
    with graceful_interrupts(interrupt):
        fit_keeping_checkpoints(
            trainer,
            module,
            run,
            resume.checkpoint if resume is not None and resume.verified else None,
            ckpt_path=str(resume.checkpoint) if resume is not None else None,
            weights_only=True,
            train_dataloaders=train_loader,
            val_dataloaders=val_loader,
        )

    epochs = run.epochs()
    return PostprocessorTrainingResult(
        metrics=dict(epochs[max(epochs)]) if epochs else {},
        metrics_before=metrics_before,
        run_dir=run_dir,
        log_dir=log_dir_of(logger),
        best_checkpoint=run.best_checkpoint(),
        last_checkpoint=run.last.last_saved,
        embeddings=extraction.sources,
        best_epoch=run.best.best_epoch,
        postprocessor=config.postprocessor.name,
        resumed_from=resume.checkpoint if resume is not None else None,
        is_main_process=trainer.is_global_zero,
    )


def _pairwise_module(config: PostprocessorTrainingConfig, registry: Registry) -> PairwiseModule:
    """The pairwise model of ``pairwise_model`` in a :class:`PairwiseModule` with ``PairsMiner``, BCE, the
    optimizer, scheduling, freezing and ``nan_policy`` of the config."""
    pairwise_model = build_component(
        registry, "pairwise_model", config.pairwise_model, "pairwise_model", PIPELINE
    )
    if config.freeze_n_epochs > 0 and not isinstance(pairwise_model, IFreezable):
        raise ConfigError(
            f"freeze_n_epochs={config.freeze_n_epochs} needs an IFreezable pairwise model, but "
            f"{config.pairwise_model.name!r} ({type(pairwise_model).__name__}) cannot be frozen"
        )
    optimizer = build_optimizer(registry, config.optimizer, pairwise_model.parameters(), PIPELINE)
    return PairwiseModule(
        pairwise_model=pairwise_model,
        pairs_miner=build_pairs_miner(config.pairs_miner, config.hard_pairs_mining, registry),
        criterion=torch.nn.BCEWithLogitsLoss(),
        optimizer=optimizer,
        embeddings_key=EMBEDDINGS_KEY,
        freeze_n_epochs=config.freeze_n_epochs,
        nan_policy=config.nan_policy,
        **scheduler_args(config.scheduling, registry, optimizer, PIPELINE),
    )


def build_pairs_miner(
    pairs_miner: Mapping[str, Any] | None, hard_pairs_mining: bool, registry: Registry
) -> Any:
    """The pair miner of the config key ``pairs_miner`` (a ``{name, args}`` spec), or when it is None OML's
    ``pairs`` (``PairsMiner`` of the ``oml_losses`` plugin) with ``hard_mining=hard_pairs_mining``."""
    if pairs_miner is not None:
        return build_component(registry, "pairs_miner", pairs_miner, "pairs_miner", PIPELINE)
    spec = {"name": DEFAULT_PAIRS_MINER, "args": {"hard_mining": hard_pairs_mining}}
    return build_component(registry, "pairs_miner", spec, "hard_pairs_mining", PIPELINE)


def _postprocessor(config: PostprocessorTrainingConfig, registry: Registry, pairwise_model: Any) -> Any:
    """The post-processor of ``postprocessor`` around the model being trained.

    Raises:
        ConfigError: the post-processor's ``args.pairwise_model`` is given and is not the spec of
            ``pairwise_model`` (as specs: ``{name: m}`` is ``{name: m, args: {}}``).
    """
    key = "postprocessor.args.pairwise_model"
    given = config.postprocessor.args.get("pairwise_model")
    if given is not None and _as_spec(given, key) != config.pairwise_model:
        raise ConfigError(
            f"{PIPELINE}: {key} differs from pairwise_model, but the post-processor re-ranks with the model "
            f"being trained: leave it out or set it to ${{pairwise_model}}"
        )
    return build_pairwise_postprocessor(registry, config.postprocessor, pairwise_model, PIPELINE)


def _as_spec(value: Any, key: str) -> ComponentSpec:
    """``value`` (of the config key ``key``) as the schema holds a spec of a pairwise model."""
    return cast(ComponentSpec, component("pairwise_model").check(value, key))


def _extraction_trainer_args(
    engine: Mapping[str, Any], config: PostprocessorTrainingConfig
) -> dict[str, Any]:
    """The ``pl.Trainer`` arguments of the extraction: the engine, ``precision`` and the progress bar of
    ``lightning_trainer_extra_args`` (see :func:`~oml_core.lightning.progress.progress_bar_enabled`; its other
    arguments are the training's)."""
    return {
        **INFERENCE_TRAINER_DEFAULTS,
        **engine,
        "precision": config.precision,
        PROGRESS_BAR_ARG: progress_bar_enabled(config.lightning_trainer_extra_args),
    }


__all__ = ["PostprocessorTrainingResult", "build_pairs_miner", "postprocessor_training_pipeline"]
