"""The end-of-training report: the metrics of the start, best and last epochs side by side, and a plain warning
when training made the monitored metric worse than the initial weights gave."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from oml_core.lightning.callbacks.validation import START_EPOCH


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


__all__ = ["format_run_paths", "format_training_table", "regression_note", "training_columns"]
