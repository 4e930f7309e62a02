"""``extractor_prediction_pipeline``: save the features an extractor gives to every image of a folder or a
dataframe, as OML does: ``<save_dir>/predictions.json``, ``{image path: [feature, ...]}``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytorch_lightning as pl
from torch.utils.data import DataLoader

from oml_core.config.components import build_component
from oml_core.config.data import build_dataset_component, check_datasets, dataset_of
from oml_core.config.schemas import ExtractorPredictionConfig
from oml_core.config.validate import check_component_arguments, validate_config
from oml_core.engine import (
    is_ddp_child_process,
    is_ddp_engine,
    make_run_dir,
    named_run_dir,
    run_dir_for_ddp_processes,
    shared_run_dir,
)
from oml_core.lightning.pipelines.shared.inference import extract_embeddings, inference_trainer_args
from oml_core.lightning.progress import PROGRESS_BAR_ARG, progress_bar_callbacks
from oml_core.lightning.quiet import quiet_lightning
from oml_core.registry import ConfigError, Registry, default_registry

PIPELINE = "extractor_prediction_pipeline"
#: The file the features are written to, in ``save_dir`` (OML's name).
PREDICTIONS_FILE = "predictions.json"


@dataclass
class PredictionResult:
    """What a prediction run produced.

    Attributes:
        predictions_path: The JSON file ``{image path: [feature, ...]}`` (``<save_dir>/predictions.json``).
        paths: The image paths (the JSON's keys), in the order they were predicted and written.
        feat_dim: The size of every feature vector.
        is_main_process: True in the process that started the run (global rank 0), which writes the file and
            reports; False in the other DDP processes.
    """

    predictions_path: Path
    paths: list[str]
    feat_dim: int
    is_main_process: bool = True


@quiet_lightning()
def extractor_prediction_pipeline(
    cfg: Mapping[str, Any] | ExtractorPredictionConfig | Any, registry: Registry | None = None
) -> PredictionResult:
    """Save the features extracted by a feature extractor from every image of a folder or of a dataframe.

    The config (a dict, a ``DictConfig`` or its schema's object) enters once, at the door: checked and converted
    into the pipeline's typed config (:func:`~oml_core.config.validate.validate_config`), which is all the pipeline
    reads after. Its keys are OML's; each is documented on its field of
    :class:`~oml_core.config.schemas.ExtractorPredictionConfig` (all of them: ``docs/config.md``, ``oml predict
    --help``). Components are ``{name, args}`` specs built by ``registry`` (the default registry when None).
    The images are those of ``data_dir``, or of ``dataframe_name``, or, with neither, of the built-in mock
    dataset; the features go to ``predictions.json`` in ``save_dir`` or in a new run folder under ``logs_root``.

    Every image is read once before the extractor runs, so that an unreadable file fails the run at once.

    More than one process (``devices`` > 1 or ``num_nodes`` > 1) runs DDP: every process embeds its share of
    every batch, the features are gathered by dataset index (see
    :func:`~oml_core.lightning.pipelines.shared.inference.extract_embeddings`), and the process that started the run
    writes the file, the single-process file. Every process returns the result.

    Prints nothing and logs no report: :func:`oml_core.reports.prediction_report` makes the line ``oml predict``
    prints of the result (``<n> predictions have been saved to <file>``), in the main process
    (``is_main_process``). Logged meanwhile: the check of the data (``Checked N images``).

    Returns:
        A :class:`PredictionResult`. The file holds one JSON object: its keys are the absolute paths of the
        images (as strings), its values the feature vectors (lists of ``feat_dim`` floats).

    Raises:
        ConfigError: an unknown or missing key, a value of the wrong type or range (see
            :mod:`~oml_core.config.schemas`), no or unreadable images, duplicate paths in the
            dataframe, bad extractor weights, an existing ``predictions.json`` (the message names the key or the
            file).
        RegistryError: an unknown component name.
    """
    config = cast(ExtractorPredictionConfig, validate_config(cfg, PIPELINE))
    trainer_args = inference_trainer_args(config, multi_device=True)
    registry = registry or default_registry()
    check_component_arguments(config, registry)
    launching = not is_ddp_child_process()  # the DDP processes skip what the launching process checked
    if config.save_dir is not None and launching:
        _check_not_written(Path(config.save_dir).expanduser().resolve() / PREDICTIONS_FILE)
    pl.seed_everything(config.seed, workers=True, verbose=False)

    data = build_dataset_component(registry, config.as_mapping(), PIPELINE)
    dataset = dataset_of(data, "prediction", PIPELINE)
    extractor = build_component(registry, "extractor", config.extractor, "extractor", PIPELINE)
    if launching:
        progress_bar = trainer_args[PROGRESS_BAR_ARG]  # always set by inference_trainer_args
        check_datasets(data, [dataset], config.num_workers, progress_bar)

    save_dir = shared_run_dir(lambda: _make_save_dir(config), *_named_save_dir(config))
    trainer = pl.Trainer(
        **trainer_args,
        logger=False,
        callbacks=progress_bar_callbacks(trainer_args),
        default_root_dir=str(save_dir),
    )
    loader = DataLoader(dataset, batch_size=config.bs, num_workers=config.num_workers, shuffle=False)
    with run_dir_for_ddp_processes(save_dir) if is_ddp_engine(trainer_args) else nullcontext():
        features = extract_embeddings(trainer, extractor, loader)

    paths = data.item_names(dataset)
    predictions_path = save_dir / PREDICTIONS_FILE
    if trainer.is_global_zero:
        with predictions_path.open(
            "x", encoding="utf-8"
        ) as f:  # "x": never overwrite, even a file made since
            json.dump(dict(zip(paths, features.tolist())), f)
    return PredictionResult(
        predictions_path=predictions_path,
        paths=paths,
        feat_dim=features.shape[1],
        is_main_process=trainer.is_global_zero,
    )


def _check_not_written(path: Path) -> None:
    if path.exists():
        raise ConfigError(
            f"{PIPELINE}: {str(path)!r} exists and is never overwritten; choose another save_dir (or null: a "
            f"new run directory under logs_root)"
        )


def _make_save_dir(config: ExtractorPredictionConfig) -> Path:
    """The folder of ``predictions.json``: ``save_dir`` (created if needed) or a new run directory."""
    if config.save_dir is None:
        return make_run_dir(config.logs_root, config.postfix, config.logs_folder)
    save_dir = Path(config.save_dir).expanduser().resolve()
    save_dir.mkdir(parents=True, exist_ok=True)
    return save_dir


def _named_save_dir(config: ExtractorPredictionConfig) -> tuple[Path | None, str]:
    """The folder of ``predictions.json`` that the config names (``save_dir``, else ``logs_root/logs_folder``,
    else None) and the key that names it, for the processes torchrun or SLURM start (see ``shared_run_dir``)."""
    if config.save_dir is not None:
        return Path(config.save_dir).expanduser().resolve(), "save_dir"
    named = named_run_dir(config.logs_root, config.logs_folder)
    return named, "logs_folder" if named else "save_dir"


__all__ = ["PREDICTIONS_FILE", "PredictionResult", "extractor_prediction_pipeline"]
