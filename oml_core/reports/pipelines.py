"""What ``oml train|validate|predict|train-postprocessor|validate-postprocessor`` print at the end of a run: one
function per pipeline, from the result the pipeline returned to the text of its report, pure (nothing is printed,
logged or read here). The result is the answer's data (a dataclass of the pipeline's module); this is its text.
The pipelines return their results and report nothing; :mod:`oml_core.cli.pipelines` prints these reports, in the
main process of a run only (``result.is_main_process``). A Python user prints them the same way::

    result = extractor_training_pipeline(cfg)
    if result.is_main_process:
        print(training_report(result))

The one module of :mod:`oml_core.reports` that imports the pipelines (and Lightning with them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from oml_core.engine import FIGURES_FOLDER
from oml_core.lightning.callbacks.validation import START_EPOCH
from oml_core.lightning.pipelines.predict import PredictionResult
from oml_core.lightning.pipelines.train import TrainingResult
from oml_core.lightning.pipelines.train_postprocessor import PostprocessorTrainingResult
from oml_core.lightning.pipelines.validate import ValidationResult
from oml_core.lightning.pipelines.validate_postprocessor import PostprocessorValidationResult

#: Titles of the two metric tables of the post-processing pipelines' reports.
BEFORE_TITLE = "Metrics before post-processing (the extractor's embeddings only)"
AFTER_TITLE = "Metrics after post-processing"


# ------------------------------------------------------------------------------------------------ the reports
def training_report(result: TrainingResult) -> str:
    """The report of ``extractor_training_pipeline``: an empty line, the metrics of the start (epoch 0), best and
    last epochs side by side (:func:`format_training_table`), a warning line when training made
    ``metric_for_checkpointing`` worse than the initial weights (:func:`regression_note`), and where the run wrote
    (:func:`format_run_paths`)."""
    lines = ["", format_training_table(result.epochs, result.best_epoch, result.last_epoch)]
    note = regression_note(
        result.epochs, result.best_epoch, result.metric_for_checkpointing, result.mode_for_checkpointing
    )
    if note:
        lines.append(note)
    lines.append(
        format_run_paths(
            result.run_dir,
            result.log_dir,
            result.best_checkpoint,
            result.best_epoch,
            result.last_checkpoint,
            result.resumed_from,
        )
    )
    return "\n".join(lines)


def validation_report(result: ValidationResult) -> str:
    """The report of ``extractor_validation_pipeline``: an empty line, the metrics table
    (:func:`format_metrics_table`), the run directory, the logs and, when drawn, the figures
    (:func:`format_validation_paths`)."""
    return "\n".join(
        [
            "",
            format_metrics_table(result.metrics),
            format_validation_paths(result.run_dir, result.log_dir, result.figures),
        ]
    )


def prediction_report(result: PredictionResult) -> str:
    """The report of ``extractor_prediction_pipeline``: ``<n> predictions have been saved to <file>`` (OML's
    line)."""
    return f"{len(result.paths)} predictions have been saved to {result.predictions_path}"


def postprocessor_training_report(result: PostprocessorTrainingResult) -> str:
    """The report of ``postprocessor_training_pipeline``: the metrics before and after post-processing as two
    tables (:func:`format_postprocessing_tables`), then where the run wrote (:func:`format_run_paths`)."""
    paths = format_run_paths(
        result.run_dir,
        result.log_dir,
        result.best_checkpoint,
        result.best_epoch,
        result.last_checkpoint,
        result.resumed_from,
    )
    return "\n".join(
        [format_postprocessing_tables(result.metrics_before, result.metrics, result.postprocessor), paths]
    )


def postprocessor_validation_report(result: PostprocessorValidationResult) -> str:
    """The report of ``postprocessor_validation_pipeline``: the metrics before and after post-processing as two
    tables (:func:`format_postprocessing_tables`), then the run directory, the logs and, when drawn, the figures
    (:func:`format_validation_paths`)."""
    tables = format_postprocessing_tables(result.metrics_before, result.metrics, result.postprocessor)
    return "\n".join([tables, format_validation_paths(result.run_dir, result.log_dir, result.figures)])


#: The report of each pipeline's result, by the pipeline's name.
REPORTS: dict[str, Callable[[Any], str]] = {
    "extractor_training_pipeline": training_report,
    "extractor_validation_pipeline": validation_report,
    "extractor_prediction_pipeline": prediction_report,
    "postprocessor_training_pipeline": postprocessor_training_report,
    "postprocessor_validation_pipeline": postprocessor_validation_report,
}


# ------------------------------------------------------------------------------------------------- the parts
def format_metrics_table(metrics: Mapping[str, float], title: str = "Validation metrics") -> str:
    """A readable two-column table of flat metrics (``OVERALL/cmc/1  0.8750``), sorted by key."""
    if not metrics:
        return f"{title}: (none computed)"
    width = max(len(k) for k in metrics)
    rule = "-" * (width + 12)
    lines = [title, rule, f"{'metric'.ljust(width)}  {'value':>8}", rule]
    lines += [f"{key.ljust(width)}  {value:>8.4f}" for key, value in sorted(metrics.items())]
    lines.append(rule)
    return "\n".join(lines)


def format_postprocessing_tables(
    before: Mapping[str, float], after: Mapping[str, float], postprocessor: str
) -> str:
    """The metrics before and after the post-processor named ``postprocessor`` as two tables, each after an empty
    line: :data:`BEFORE_TITLE`, then :data:`AFTER_TITLE` with the post-processor's name."""
    return "\n".join(
        [
            "",
            format_metrics_table(before, BEFORE_TITLE),
            "",
            format_metrics_table(after, f"{AFTER_TITLE} ({postprocessor})"),
        ]
    )


def training_columns(
    epochs: Mapping[int, Mapping[str, float]], best_epoch: int | None, last_epoch: int | None
) -> list[tuple[str, int]]:
    """The columns of the table: ``(title, epoch)`` for the start (epoch 0, when validated before training), the
    best and the last epoch; one column ``best = last`` when they are the same epoch."""
    columns = []
    if START_EPOCH in epochs:
        columns.append(("start", START_EPOCH))
    if best_epoch is not None and best_epoch == last_epoch:
        columns.append(("best = last", best_epoch))
        return columns
    if best_epoch is not None:
        columns.append(("best", best_epoch))
    if last_epoch is not None:
        columns.append(("last", last_epoch))
    return columns


def format_training_table(
    epochs: Mapping[int, Mapping[str, float]],
    best_epoch: int | None,
    last_epoch: int | None,
    title: str = "Validation metrics",
) -> str:
    """A table of the metrics of the start, best and last epochs (see :func:`training_columns`), one row per
    metric, sorted by key; the header names each column's epoch (``start (epoch 0)``, ``best (epoch 8)``). A
    metric that an epoch lacks shows ``-``. ``<title>: (none computed)`` when no epoch was validated."""
    columns = training_columns(epochs, best_epoch, last_epoch)
    if not columns:
        return f"{title}: (none computed)"
    keys = sorted({key for _, epoch in columns for key in epochs[epoch]})
    headers = [f"{name} (epoch {epoch})" for name, epoch in columns]
    key_width = max(len("metric"), *(len(key) for key in keys))
    widths = [max(len(header), 8) for header in headers]
    rule = "-" * (key_width + sum(width + 2 for width in widths))
    lines = [
        title,
        rule,
        "  ".join(["metric".ljust(key_width), *(h.rjust(w) for h, w in zip(headers, widths))]),
    ]
    lines.append(rule)
    for key in keys:
        cells = []
        for (_, epoch), width in zip(columns, widths):
            value = epochs[epoch].get(key)
            cells.append(("-" if value is None else f"{value:.4f}").rjust(width))
        lines.append("  ".join([key.ljust(key_width), *cells]))
    lines.append(rule)
    return "\n".join(lines)


def regression_note(
    epochs: Mapping[int, Mapping[str, float]], best_epoch: int | None, metric: str, mode: str
) -> str | None:
    """A one-line warning when the best training epoch is worse than the start on ``metric`` (larger is better
    for ``mode="max"``), e.g. on classes unseen in training::

        Training made OVERALL/cmc/1 worse than the initial weights: 0.9710 before training, 0.7600 at best
        (epoch 3); best.ckpt holds epoch 3, the initial weights are what the extractor's config loads.

    None when the run did not validate before training, has no best epoch, or did not get worse.
    """
    start = epochs.get(START_EPOCH, {}).get(metric)
    if start is None or best_epoch is None or metric not in epochs.get(best_epoch, {}):
        return None
    best = epochs[best_epoch][metric]
    worse = best < start if mode == "max" else best > start
    if not worse:
        return None
    return (
        f"Training made {metric} worse than the initial weights: {start:.4f} before training, {best:.4f} at best "
        f"(epoch {best_epoch}); best.ckpt holds epoch {best_epoch}, the initial weights are what the "
        "extractor's config loads."
    )


def format_run_paths(
    run_dir: Path,
    log_dir: Path | None,
    best_checkpoint: Path | None,
    best_epoch: int | None,
    last_checkpoint: Path | None,
    resumed_from: Path | None = None,
) -> str:
    """Where a training run wrote, one line each: ``Resumed from:`` (a resumed run), ``Run directory:``,
    ``Logs:``, ``Best checkpoint:`` with the epoch it holds (``.../best.ckpt (epoch 3)``) and ``Last
    checkpoint:``."""
    lines = [f"Resumed from:     {resumed_from}"] if resumed_from is not None else []
    epoch = f" (epoch {best_epoch})" if best_checkpoint is not None and best_epoch is not None else ""
    lines += [
        f"Run directory:    {run_dir}",
        f"Logs:             {log_dir}",
        f"Best checkpoint:  {best_checkpoint}{epoch}",
        f"Last checkpoint:  {last_checkpoint}",
    ]
    return "\n".join(lines)


def format_validation_paths(run_dir: Path, log_dir: Path | None, figures: list[Path]) -> str:
    """Where a validation run wrote, one line each: ``Run directory:``, ``Logs:`` and, when figures were drawn,
    ``Figures:`` with their folder and number (``<run_dir>/figures (3 PNG files)``)."""
    lines = [f"Run directory:    {run_dir}", f"Logs:             {log_dir}"]
    if figures:
        lines.append(f"Figures:          {run_dir / FIGURES_FOLDER} ({len(figures)} PNG files)")
    return "\n".join(lines)


__all__ = [
    "AFTER_TITLE",
    "BEFORE_TITLE",
    "REPORTS",
    "format_metrics_table",
    "format_postprocessing_tables",
    "format_run_paths",
    "format_training_table",
    "format_validation_paths",
    "postprocessor_training_report",
    "postprocessor_validation_report",
    "prediction_report",
    "regression_note",
    "training_columns",
    "training_report",
    "validation_report",
]
