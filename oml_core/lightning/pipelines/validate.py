"""``extractor_validation_pipeline``: the retrieval metrics of an extractor on a dataset's validation split."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytorch_lightning as pl
from pytorch_lightning.utilities import rank_zero_only

from oml_core.config.components import build_component
from oml_core.config.data import build_dataset_component, check_datasets, dataset_entry, dataset_of
from oml_core.config.schemas import ExtractorValidationConfig
from oml_core.config.typed import check_component_arguments, validate_config
from oml_core.engine import (
    FIGURES_FOLDER,
    is_ddp_child_process,
    is_ddp_engine,
    make_run_dir,
    named_run_dir,
    run_dir_for_ddp_processes,
    shared_run_dir,
)
from oml_core.inference.batches import evaluation_loader
from oml_core.lightning.callbacks.metric import MetricValCallback, MetricValCallbackDDP, save_figures
from oml_core.lightning.callbacks.run_record import plain
from oml_core.lightning.modules.extractor import ExtractorModule, ExtractorModuleDDP
from oml_core.lightning.pipelines.shared.common import build_logger, embedding_metrics, log_dir_of
from oml_core.lightning.pipelines.shared.inference import inference_trainer_args
from oml_core.lightning.progress import PROGRESS_BAR_ARG, progress_bar_callbacks
from oml_core.lightning.quiet import quiet_lightning
from oml_core.registry import Registry, default_registry

PIPELINE = "extractor_validation_pipeline"


@dataclass
class ValidationResult:
    """What a validation run produced.

    Attributes:
        metrics: The validation metrics, flat (``{"OVERALL/cmc/1": 0.75, ...}``).
        run_dir: The run's own directory under ``logs_root``.
        log_dir: Where the logger wrote (the TensorBoard event files and ``config.yaml``).
        figures: The PNG files of the worst queries, one per per-query metric (empty without ``log_images``).
        is_main_process: True in the process that started the run (global rank 0), which writes the figures and
            reports; False in the other DDP processes.
    """

    metrics: dict[str, float]
    run_dir: Path
    log_dir: Path | None
    figures: list[Path]
    is_main_process: bool = True


@quiet_lightning()
def extractor_validation_pipeline(
    cfg: Mapping[str, Any] | ExtractorValidationConfig | Any, registry: Registry | None = None
) -> ValidationResult:
    """Validate a feature extractor which represents images as feature vectors.

    The config (a dict, a ``DictConfig`` or its schema's object) enters once, at the door: checked and converted
    into the pipeline's typed config (:func:`~oml_core.config.typed.validate_config`), which is all the pipeline
    reads after. Its keys are OML's; each is documented on its field of
    :class:`~oml_core.config.schemas.ExtractorValidationConfig` (all of them: ``docs/config.md``, ``oml validate
    --help``). Components are ``{name, args}`` specs built by ``registry`` (the default registry when None).
    The logger is given every key of the typed config with its value (the defaults included).

    The rows with ``split == "validation"`` of ``dataset_root / dataframe_name`` are embedded, the metrics are
    computed and logged (to the pipeline logger). With ``log_images``, the worst queries of every per-query metric
    are drawn, written as PNG files to ``<run_dir>/figures/`` and logged.

    More than one process (``devices`` > 1 or ``num_nodes`` > 1) runs DDP: every process embeds its share of
    every batch (``ExtractorModuleDDP``), ``EmbeddingMetricsDDP`` gathers the embeddings by dataset index (an
    item repeated by the padding of the last batch counts once), and every process computes the metrics of the
    whole split, the single-process metrics. The process that started the run checks the images, makes the run
    directory and writes the figures; every process returns the result.

    Prints nothing and logs no report: :func:`oml_core.reports.pipelines.validation_report` makes the report of the
    result (the metrics table and the paths) that ``oml validate`` prints, in the main process (``is_main_process``).
    Logged meanwhile: the check of the data (``Checked N images``).

    Returns:
        A :class:`ValidationResult`.

    Raises:
        ConfigError: an unknown or missing key, a value of the wrong type or range (see
            :mod:`~oml_core.config.schemas`), a bad dataframe, unreadable images, bad extractor
            weights, bad ``metric_args`` (the message names the key, file or argument).
        RegistryError: an unknown component name.
    """
    config = cast(ExtractorValidationConfig, validate_config(cfg, PIPELINE))
    trainer_args = inference_trainer_args(config, multi_device=True)
    is_ddp = is_ddp_engine(trainer_args)
    registry = registry or default_registry()
    check_component_arguments(config, registry)
    pl.seed_everything(config.seed, workers=True, verbose=False)

    data = build_dataset_component(registry, config.as_mapping(), PIPELINE)
    dataset = dataset_of(data, "validation", PIPELINE)
    extractor = build_component(registry, "extractor", config.extractor, "extractor", PIPELINE)
    postprocessor = (
        build_component(registry, "postprocessor", config.postprocessor, "postprocessor", PIPELINE)
        if config.postprocessor is not None
        else None
    )
    metric = embedding_metrics(dataset, config.metric_args, registry, postprocessor, PIPELINE, ddp=is_ddp)
    if not is_ddp_child_process():  # the DDP processes skip what the launching process checked
        progress_bar = trainer_args[PROGRESS_BAR_ARG]  # always set by inference_trainer_args
        entry = dataset_entry(registry, config.dataset)
        check_datasets(data, [dataset], config.num_workers, progress_bar, entry)
        data.check_extractor(extractor)
    metric_callback = (MetricValCallbackDDP if is_ddp else MetricValCallback)(metric=metric)

    run_dir = shared_run_dir(
        lambda: make_run_dir(config.logs_root, config.postfix, config.logs_folder),
        named_run_dir(config.logs_root, config.logs_folder),
    )
    logger = build_logger(registry, config.logger, run_dir)
    rank_zero_only(logger.log_pipeline_info)(plain(config))
    trainer = pl.Trainer(
        **trainer_args,
        logger=logger,
        callbacks=[metric_callback, *progress_bar_callbacks(trainer_args)],
        default_root_dir=str(run_dir),
    )
    loader = evaluation_loader(dataset, config.bs_val, config.num_workers)
    if is_ddp:
        with run_dir_for_ddp_processes(run_dir):  # the module serves its loader, patched in every process
            trainer.validate(ExtractorModuleDDP(extractor=extractor, loaders_val=loader), verbose=False)
    else:
        trainer.validate(ExtractorModule(extractor=extractor), dataloaders=loader, verbose=False)

    figures = []
    if config.log_images and trainer.is_global_zero:
        figures = save_figures(metric, run_dir / FIGURES_FOLDER, [logger], 0)
    return ValidationResult(
        metrics=dict(metric_callback.last_metrics),
        run_dir=run_dir,
        log_dir=log_dir_of(logger),
        figures=figures,
        is_main_process=trainer.is_global_zero,
    )


__all__ = ["ValidationResult", "extractor_validation_pipeline"]
