"""The picture of a calibration: precision, recall and F1 against the threshold, and precision against recall,
with the chosen threshold marked; written as a PNG (matplotlib, imported only here)."""

from __future__ import annotations

import io
from pathlib import Path

from oml_core.index.calibration import Calibration
from oml_core.utils.atomic import atomic_write_bytes


def plot_calibration(calibration: Calibration, path: str | Path) -> Path:
    """Draw ``calibration`` and write it to ``path`` as a PNG, atomically; returns ``path``."""
    from matplotlib.figure import Figure

    curve = calibration.curve
    fig = Figure(figsize=(10, 4), dpi=100)
    by_threshold, pr = fig.subplots(1, 2)
    for values, label in ((curve.precision, "precision"), (curve.recall, "recall"), (curve.f1, "F1")):
        by_threshold.plot(curve.thresholds, values, drawstyle="steps-post", label=label)
    if curve.fmr is not None:
        by_threshold.plot(curve.thresholds, curve.fmr, drawstyle="steps-post", label="FMR", linestyle=":")
    by_threshold.axvline(calibration.threshold, color="black", linestyle="--", linewidth=1)
    by_threshold.set(xlabel="threshold (match iff distance < threshold)", ylim=(-0.02, 1.02))
    by_threshold.legend(loc="best")
    pr.plot(curve.recall, curve.precision, marker=".", linewidth=1)
    pr.plot([calibration.recall], [calibration.precision], marker="o", color="black")
    pr.set(xlabel="recall", ylabel="precision", xlim=(-0.02, 1.02), ylim=(-0.02, 1.02))
    fig.suptitle(calibration.summary(), fontsize=9)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    path = Path(path)
    atomic_write_bytes(path, buffer.getvalue())
    return path


__all__ = ["plot_calibration"]
