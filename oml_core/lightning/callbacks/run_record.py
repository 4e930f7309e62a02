"""What a checkpoint says about the run that wrote it: its config, its data and how far it got.

Every checkpoint of a training pipeline carries a *run record* under :data:`RUN_RECORD_KEY` (added by
:class:`RunRecordCallback`), in plain types that ``torch.load(weights_only=True)`` reads::

    {"pipeline": "extractor_training_pipeline",
     "config": {...},                                  # the run's typed config, as plain values
     "dataframe": {"path": "/data/df.csv", "sha256": "..."},
     "epochs_done": 3,                                 # epochs trained and validated when it was written
     "logger_version": 0}                              # the logger's version (TensorBoard's version_<n>)

A resumed run compares it with its own config before it trains
(:mod:`oml_core.lightning.pipelines.shared.resume`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import pytorch_lightning as pl

from oml_core.caches.digests import file_sha256

#: The checkpoint entry of the run record.
RUN_RECORD_KEY = "oml_run"


def plain(value: Any) -> Any:
    """``value`` in the types a ``weights_only`` load reads: dataclasses (a typed config, its specs) and mappings
    as dicts with string keys, lists and tuples as lists, ``None``, bools, ints, floats and strings as they are,
    anything else (an object given to a config in code) as its ``repr``."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)


def make_run_record(pipeline: str, config: Any, dataframe: Path) -> dict[str, Any]:
    """The record of a run (see the module) before its first epoch: ``config`` (a typed config) as
    :func:`plain` values, the absolute path of its ``dataframe`` and the sha256 of its bytes."""
    dataframe = Path(dataframe).expanduser().resolve()
    return {
        "pipeline": pipeline,
        "config": plain(config),
        "dataframe": {"path": str(dataframe), "sha256": file_sha256(dataframe)},
        "epochs_done": 0,
        "logger_version": None,
    }


class RunRecordCallback(pl.Callback):
    """Adds the run record (see the module) to every checkpoint: ``record`` with ``epochs_done`` (the epochs
    trained, and validated when due, at the time of writing: the epoch in progress counts once its last batch
    ran) and ``logger_version`` (the ``version`` of the Trainer's logger when it is an int or a string: the
    folder ``version_<n>`` of TensorBoard, the run id of W&B).

    Args:
        record: The run's record (:func:`make_run_record`).
    """

    def __init__(self, record: Mapping[str, Any]) -> None:
        super().__init__()
        self.record = dict(record)

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        epoch_ended = trainer.fit_loop.epoch_loop.batch_progress.is_last_batch
        version = trainer.logger.version if trainer.logger is not None else None
        checkpoint[RUN_RECORD_KEY] = {
            **self.record,
            "epochs_done": trainer.current_epoch + int(epoch_ended),
            "logger_version": version if isinstance(version, int | str) else None,
        }


__all__ = ["RUN_RECORD_KEY", "RunRecordCallback", "make_run_record", "plain"]
