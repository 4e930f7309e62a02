"""``extractor_prediction_pipeline``: save the features an extractor gives to every image of a folder or a
dataframe, as OML does: ``<save_dir>/predictions.json``, ``{image path: [feature, ...]}``; or, by the key
``predictions_format``, as ``predictions.parquet`` or ``predictions.npy`` (:mod:`oml_core.io.embeddings_files`),
written batch by batch."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytorch_lightning as pl
from torch import Tensor

from oml_core.config.components import build_component, spec_of
from oml_core.config.data import build_dataset_component, check_datasets, dataset_entry, dataset_of
from oml_core.config.schemas import ExtractorPredictionConfig
from oml_core.config.typed import check_component_arguments, validate_config
from oml_core.engine import (
    is_ddp_child_process,
    is_ddp_engine,
    make_run_dir,
    named_run_dir,
    run_dir_for_ddp_processes,
    shared_run_dir,
)
from oml_core.inference.batches import evaluation_loader
from oml_core.interfaces.datasets import IBaseDataset, IDatasetComponent, ILabeledDataset
from oml_core.io import (
    EmbeddingsFileError,
    EmbeddingsProvenance,
    EmbeddingsWriter,
    check_format_available,
    written_files,
)
from oml_core.lightning.pipelines.shared.inference import (
    EmbeddingsStream,
    inference_trainer_args,
    stream_embeddings,
)
from oml_core.lightning.progress import PROGRESS_BAR_ARG, progress_bar_callbacks
from oml_core.lightning.quiet import quiet_lightning
from oml_core.registry import ConfigError, Registry, default_registry

PIPELINE = "extractor_prediction_pipeline"
#: The file the features are written to, in ``save_dir`` (OML's name), by ``predictions_format``.
PREDICTIONS_FILES = {"json": "predictions.json", "parquet": "predictions.parquet", "npy": "predictions.npy"}
PREDICTIONS_FILE = PREDICTIONS_FILES["json"]


@dataclass
class PredictionResult:
    """What a prediction run produced.

    Attributes:
        predictions_path: The file of the features: the JSON ``{image path: [feature, ...]}``
            (``<save_dir>/predictions.json``), or ``predictions.parquet`` / ``predictions.npy``.
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
    into the pipeline's typed config (:func:`~oml_core.config.typed.validate_config`), which is all the pipeline
    reads after. Its keys are OML's; each is documented on its field of
    :class:`~oml_core.config.schemas.ExtractorPredictionConfig` (all of them: ``docs/config.md``, ``oml predict
    --help``). Components are ``{name, args}`` specs built by ``registry`` (the default registry when None).
    The images are those of ``data_dir``, or of ``dataframe_name``, or, with neither, of the built-in mock
    dataset; the features go to ``predictions.json`` in ``save_dir`` or in a new run folder under ``logs_root``
    (``predictions_format`` json, OML's; with parquet or npy: ``predictions.parquet``, or ``predictions.npy``
    and its sidecar ``predictions.npy.meta.json``, see :mod:`oml_core.io.embeddings_files`). Every format carries
    the items' ids and labels (JSON in its sidecar ``predictions.json.meta.json``) and the provenance of the
    features: the extractor spec, the sha256 of its weights and the transforms, which ``oml index build
    embeddings=...`` checks. The features are written batch by batch as they are made (never all held), into
    temporary files published whole at the end; no existing file is overwritten.

    Every image is read once before the extractor runs, so that an unreadable file fails the run at once.

    More than one process (``devices`` > 1 or ``num_nodes`` > 1) runs DDP: every process embeds its share of
    every batch, each batch's features are gathered in dataset order (see
    :class:`~oml_core.lightning.pipelines.shared.inference.EmbeddingsStream`), and the process that started the
    run writes the file, the single-process file. Every process returns the result.

    Prints nothing and logs no report: :func:`oml_core.reports.pipelines.prediction_report` makes the line ``oml
    predict`` prints of the result (``<n> predictions have been saved to <file>``), in the main process
    (``is_main_process``). Logged meanwhile: the check of the data (``Checked N images``).

    Returns:
        A :class:`PredictionResult`. The file holds one JSON object: its keys are the absolute paths of the
        images (as strings), its values the feature vectors (lists of ``feat_dim`` floats).

    Raises:
        ConfigError: an unknown or missing key, a value of the wrong type or range (see
            :mod:`~oml_core.config.schemas`), no or unreadable images, duplicate paths in the
            dataframe, bad extractor weights, an existing predictions file or sidecar, Parquet without pyarrow (the
            message names the key or the file).
        RegistryError: an unknown component name.
    """
    config = cast(ExtractorPredictionConfig, validate_config(cfg, PIPELINE))
    trainer_args = inference_trainer_args(config, multi_device=True)
    registry = registry or default_registry()
    check_component_arguments(config, registry)
    launching = not is_ddp_child_process()  # the DDP processes skip what the launching process checked
    file_name = PREDICTIONS_FILES[config.predictions_format]
    if launching:
        _check_writable(config, file_name)
    pl.seed_everything(config.seed, workers=True, verbose=False)

    data = build_dataset_component(registry, config.as_mapping(), PIPELINE)
    dataset = dataset_of(data, "prediction", PIPELINE)
    extractor = build_component(registry, "extractor", config.extractor, "extractor", PIPELINE)
    if launching:
        progress_bar = trainer_args[PROGRESS_BAR_ARG]  # always set by inference_trainer_args
        entry = dataset_entry(registry, config.dataset)
        check_datasets(data, [dataset], config.num_workers, progress_bar, entry)
        data.check_extractor(extractor)
    provenance = EmbeddingsProvenance.of_model(
        spec_of(config.extractor), extractor.state_dict(), _plain_spec(config.transforms_predict)
    )

    save_dir = shared_run_dir(lambda: _make_save_dir(config), *_named_save_dir(config))
    predictions = _PredictionsFile(save_dir / file_name, provenance, data, dataset)
    stream = EmbeddingsStream(predictions.write)
    trainer = pl.Trainer(
        **trainer_args,
        logger=False,
        callbacks=[*progress_bar_callbacks(trainer_args), stream],
        default_root_dir=str(save_dir),
    )
    loader = evaluation_loader(dataset, config.bs, config.num_workers)
    try:
        with run_dir_for_ddp_processes(save_dir) if is_ddp_engine(trainer_args) else nullcontext():
            stream_embeddings(trainer, extractor, loader, stream)
        if trainer.is_global_zero:
            predictions.close()
    except BaseException:
        predictions.abort()
        raise
    return PredictionResult(
        predictions_path=predictions.path,
        paths=predictions.paths,
        feat_dim=predictions.feat_dim if predictions.feat_dim is not None else extractor.feat_dim,
        is_main_process=trainer.is_global_zero,
    )


class _PredictionsFile:
    """The predictions file of a run, written batch by batch by the process that consumes the stream (global
    rank 0), which opens it at its first batch: the items' ids (the dataset component's, else positions), names
    and labels (a labelled dataset's), the features and their provenance."""

    def __init__(
        self, path: Path, provenance: EmbeddingsProvenance, data: IDatasetComponent, dataset: IBaseDataset
    ) -> None:
        self.path, self.provenance = path, provenance
        self.paths = data.item_names(dataset)
        try:
            self.ids = [int(i) for i in data.item_ids(dataset)]
        except NotImplementedError:
            self.ids = list(range(len(self.paths)))
        labels = dataset.get_labels().tolist() if isinstance(dataset, ILabeledDataset) else None
        self.labels: list[int | None] = [None] * len(self.paths) if labels is None else labels
        self.feat_dim: int | None = None
        self._writer: EmbeddingsWriter | None = None
        self._written = 0

    def write(self, features: Tensor) -> None:
        """Write the features of the next items."""
        if self._writer is None:
            self._writer = _writer(self.path, self.provenance)
        start, end = self._written, self._written + len(features)
        self._writer.write(features, self.ids[start:end], self.paths[start:end], self.labels[start:end])
        self.feat_dim, self._written = int(features.shape[1]), end

    def close(self) -> None:
        """Publish the file (an empty one when no item was written)."""
        if self._writer is None:
            self._writer = _writer(self.path, self.provenance)
        self._writer.close()

    def abort(self) -> None:
        """Remove what was written; nothing is published."""
        if self._writer is not None:
            self._writer.abort()


def _writer(path: Path, provenance: EmbeddingsProvenance) -> EmbeddingsWriter:
    try:
        return EmbeddingsWriter(path, provenance)
    except EmbeddingsFileError as e:  # a file that appeared since the check
        raise ConfigError(f"{PIPELINE}: {e}") from e


def _plain_spec(spec: Any) -> dict[str, Any] | None:
    return None if spec is None else spec_of(spec)


def _check_writable(config: ExtractorPredictionConfig, file_name: str) -> None:
    """Check that the predictions file (and its sidecar) of ``save_dir`` can be written: the format's library is
    installed (pyarrow for Parquet) and no such file exists (a new run folder holds none yet)."""
    try:
        check_format_available(config.predictions_format)
    except EmbeddingsFileError as e:
        raise ConfigError(f"predictions_format: {e}") from e
    if config.save_dir is not None:
        for file in written_files(Path(config.save_dir).expanduser().resolve() / file_name):
            _check_not_written(file)


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


__all__ = ["PREDICTIONS_FILE", "PREDICTIONS_FILES", "PredictionResult", "extractor_prediction_pipeline"]
