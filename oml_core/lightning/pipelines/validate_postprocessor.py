"""``postprocessor_validation_pipeline``: the retrieval metrics of an extractor before and after a pairwise
post-processor (a re-ranker such as the one ``postprocessor_training_pipeline`` trains) re-ranks them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytorch_lightning as pl

from oml_core.config.components import build_component
from oml_core.config.data import build_dataset_component, check_datasets, dataset_entry, dataset_of
from oml_core.config.rules import ComponentSpec
from oml_core.config.schemas import PostprocessorValidationConfig
from oml_core.config.typed import check_component_arguments, validate_config
from oml_core.engine import FIGURES_FOLDER, make_run_dir
from oml_core.inference.batches import evaluation_loader
from oml_core.lightning.callbacks.metric import MetricValCallback, save_figures
from oml_core.lightning.callbacks.run_record import plain
from oml_core.lightning.modules.pairwise_postprocessing import PairwiseModule
from oml_core.lightning.pipelines.shared.common import build_logger, embedding_metrics, log_dir_of
from oml_core.lightning.pipelines.shared.embeddings_cache import (
    CachedEmbeddings,
    EmbeddingsDataset,
    EmbeddingsSource,
)
from oml_core.lightning.pipelines.shared.inference import inference_trainer_args
from oml_core.lightning.pipelines.shared.postprocessing import (
    BEFORE_PREFIX,
    build_pairwise_postprocessor,
    metrics_of_embeddings,
)
from oml_core.lightning.progress import PROGRESS_BAR_ARG, progress_bar_callbacks
from oml_core.lightning.quiet import quiet_lightning
from oml_core.registry import ConfigError, Registry, default_registry

PIPELINE = "postprocessor_validation_pipeline"


@dataclass
class PostprocessorValidationResult:
    """What a post-processor validation run produced.

    Attributes:
        metrics: The metrics after post-processing, flat (``{"OVERALL/cmc/1": 0.75, ...}``).
        metrics_before: The metrics of the extractor's embeddings alone.
        run_dir: The run's own directory under ``logs_root``.
        log_dir: Where the logger wrote.
        figures: The PNG files of the worst queries after post-processing (empty without ``log_images``).
        embeddings: Where the validation embeddings came from (computed, or read from the cache).
        postprocessor: The name of the post-processor (the config's ``postprocessor``).
        is_main_process: True in the process of global rank 0, which reports (this pipeline runs on one device).
    """

    metrics: dict[str, float]
    metrics_before: dict[str, float]
    run_dir: Path
    log_dir: Path | None
    figures: list[Path]
    embeddings: EmbeddingsSource
    postprocessor: str
    is_main_process: bool = True


@quiet_lightning()
def postprocessor_validation_pipeline(
    cfg: Mapping[str, Any] | PostprocessorValidationConfig | Any, registry: Registry | None = None
) -> PostprocessorValidationResult:
    """Validate a pairwise post-processor on top of a feature extractor: the retrieval metrics of the
    extractor's embeddings, then those of the results re-ranked by the post-processor.

    The config (a dict, a ``DictConfig`` or its schema's object) enters once, at the door: checked and converted
    into the pipeline's typed config (:func:`~oml_core.config.typed.validate_config`), which is all the pipeline
    reads after. Its keys are OML's; each is documented on its field of
    :class:`~oml_core.config.schemas.PostprocessorValidationConfig` (all of them: ``docs/config.md``, ``oml
    validate-postprocessor --help``). Components are ``{name, args}`` specs built by ``registry`` (the default
    registry when None). They are those of ``extractor_validation_pipeline`` (OML validates a post-processor with
    that pipeline), ``postprocessor`` (pairwise) required, plus ``embeddings_cache_dir``; the logger is given every
    key of the typed config with its value (the defaults included).

    ``transforms_val`` are the transforms of the extraction and of the images the post-processor re-ranks. The
    pairwise model runs on the configured device. The metrics before are logged (to the pipeline logger) under
    ``before_postprocessing/``. With ``log_images``, the worst queries after post-processing are
    drawn to ``<run_dir>/figures/`` as PNG files and logged.

    Prints nothing and logs no report: :func:`oml_core.reports.pipelines.postprocessor_validation_report` makes the
    report of the result (both metric tables and the paths) that ``oml validate-postprocessor`` prints. Logged
    meanwhile: the check of the data (``Checked N images``) and where the embeddings came from.

    Returns:
        A :class:`PostprocessorValidationResult`.

    Raises:
        ConfigError: an unknown or missing key, a value of the wrong type or range (see
            :mod:`~oml_core.config.schemas`), a post-processor without a ``pairwise_model``, a bad
            dataframe, unreadable images, bad weights, bad ``metric_args``, ``devices`` other than one device (one
            line naming the key, file or argument).
        RegistryError: an unknown component name.
    """
    config = cast(PostprocessorValidationConfig, validate_config(cfg, PIPELINE))
    trainer_args = inference_trainer_args(config)
    registry = registry or default_registry()
    check_component_arguments(config, registry)
    pl.seed_everything(config.seed, workers=True, verbose=False)

    data = build_dataset_component(registry, config.as_mapping(), PIPELINE)
    dataset = dataset_of(data, "validation", PIPELINE)
    pairwise_model = build_component(
        registry,
        "pairwise_model",
        _pairwise_model_spec(config.postprocessor),
        "postprocessor.args.pairwise_model",
        PIPELINE,
    )
    postprocessor = build_pairwise_postprocessor(registry, config.postprocessor, pairwise_model, PIPELINE)
    metric_before = embedding_metrics(dataset, config.metric_args, registry, None, PIPELINE)
    metric = embedding_metrics(dataset, config.metric_args, registry, postprocessor, PIPELINE)
    progress_bar = trainer_args[PROGRESS_BAR_ARG]  # always set by inference_trainer_args
    check_datasets(data, [dataset], config.num_workers, progress_bar, dataset_entry(registry, config.dataset))
    extraction = CachedEmbeddings(
        registry,
        config,
        transforms_spec=config.transforms_val,
        dataframe_path=data.source,
        trainer_args=trainer_args,
        batch_size=config.bs_val,
        pipeline=PIPELINE,
    )
    embeddings = extraction(dataset, "validation")
    metrics_before = metrics_of_embeddings(metric_before, embeddings)

    run_dir = make_run_dir(config.logs_root, config.postfix, config.logs_folder)
    logger = build_logger(registry, config.logger, run_dir)
    logger.log_pipeline_info(plain(config))
    logger.log_metrics({f"{BEFORE_PREFIX}{k}": v for k, v in metrics_before.items()}, step=0)
    metric_callback = MetricValCallback(metric=metric)
    trainer = pl.Trainer(
        **trainer_args,
        logger=logger,
        callbacks=[metric_callback, *progress_bar_callbacks(trainer_args)],
        default_root_dir=str(run_dir),
    )
    loader = evaluation_loader(EmbeddingsDataset(embeddings), config.bs_val)
    # the module holds the pairwise model, so that Lightning moves it to the device the re-ranking runs on
    trainer.validate(PairwiseModule(pairwise_model=pairwise_model), dataloaders=loader, verbose=False)

    figures = save_figures(metric, run_dir / FIGURES_FOLDER, [logger], 0) if config.log_images else []
    return PostprocessorValidationResult(
        metrics=dict(metric_callback.last_metrics),
        metrics_before=metrics_before,
        run_dir=run_dir,
        log_dir=log_dir_of(logger),
        figures=figures,
        embeddings=extraction.sources[0],
        postprocessor=config.postprocessor.name,
        is_main_process=trainer.is_global_zero,
    )


def _pairwise_model_spec(postprocessor: ComponentSpec) -> Any:
    """The spec of the post-processor's ``args.pairwise_model``.

    Raises:
        ConfigError: the post-processor has none.
    """
    spec = postprocessor.args.get("pairwise_model")
    if spec is None:
        raise ConfigError(
            f"{PIPELINE}: postprocessor.args.pairwise_model is missing: the pairwise model that re-ranks, e.g. "
            f"{{name: concat_siamese, args: {{weights: <checkpoints/best.ckpt of oml train-postprocessor>, ...}}}}"
        )
    return spec


__all__ = ["PostprocessorValidationResult", "postprocessor_validation_pipeline"]
