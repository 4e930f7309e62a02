"""Checks made before any model runs, so that bad input fails in seconds with one line instead of after an
epoch: the validation split's ground truth, the checkpointing metric, the logs
folder and its free space, and the accelerator, devices and precision of the machine.

Every check raises ``ConfigError`` (one line naming the file, row, key or value at fault) or returns the
warnings it has (problems that are likely mistakes but allowed).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from oml_core.engine import CHECKPOINTS_FOLDER, check_cuda_devices
from oml_core.registry import ConfigError
from oml_core.registry.arg_types import check_argument_types
from oml_core.utils.checkpoints import torch_file_problem
from oml_core.utils.digest import CorruptCheckpointError, DigestStatus, verify_checkpoint
from oml_core.utils.files import not_a_file
from oml_core.utils.text import one_line

#: How many checkpoints of the trained model ``logs_root`` must have room for: ``best.ckpt``, ``last.ckpt`` and
#: the temporary copy that an atomic save writes beside them.
CHECKPOINTS_ROOM = 3


def check_validation_ground_truth(
    labels: Sequence[int] | np.ndarray, query_ids: Sequence[int], gallery_ids: Sequence[int], source: str
) -> None:
    """Fail unless the validation split has queries, gallery items, and at least one query with a gallery
    item of its label other than itself (else every retrieval metric is undefined).

    Args:
        labels: The labels of the validation items.
        query_ids, gallery_ids: The positions of its queries and of its gallery items.
        source: Names the data in the message (the csv).

    Raises:
        ConfigError: naming ``source`` and what is missing.
    """
    labels = np.asarray(labels)
    queries = np.zeros(len(labels), dtype=bool)
    gallery = np.zeros(len(labels), dtype=bool)
    queries[np.asarray(query_ids, dtype=np.int64)] = True
    gallery[np.asarray(gallery_ids, dtype=np.int64)] = True
    if not queries.any() or not gallery.any():
        raise ConfigError(
            f"{source}: the validation rows have {int(queries.sum())} queries and {int(gallery.sum())} gallery "
            f"items; both are needed (columns 'is_query' and 'is_gallery')"
        )
    gallery_counts = dict(zip(*np.unique(labels[gallery], return_counts=True)))
    matches = np.array([gallery_counts.get(label, 0) for label in labels[queries]]) - gallery[queries]
    if not (matches > 0).any():
        raise ConfigError(
            f"{source}: none of the {int(queries.sum())} validation queries has a gallery item with its label "
            f"(other than itself): every retrieval metric would be undefined"
        )


def check_resume_checkpoint(path: str | Path) -> DigestStatus:
    """Fail unless ``path`` (the config key ``resume``) is a training checkpoint that loads with
    ``torch.load(weights_only=True)``: it exists, has the bytes it was written with when oml wrote it (its
    digest, :func:`~oml_core.utils.digest.verify_checkpoint`), is whole, holds tensors and plain data only (a
    pickle that would run code is refused, never run) and has the training state (``state_dict``,
    ``optimizer_states``, ``loops``) that Lightning resumes from.

    Returns:
        ``VERIFIED`` for a checkpoint with oml's digest, ``UNVERIFIED`` for one without (written by another tool).

    Raises:
        ConfigError: naming ``resume``, the file and the cause ("resume: checkpoints/last.ckpt is corrupt: its
            sha256 ... differs from the one written with it; ...").
    """
    import pickle

    import torch

    path = Path(path)
    problem = not_a_file(path)
    if problem is not None:
        hint = f" (resume takes a run's {CHECKPOINTS_FOLDER}/last.ckpt)" if path.is_dir() else ""
        raise ConfigError(f"resume: the checkpoint {str(path)!r} {problem}{hint}")
    try:
        status = verify_checkpoint(path)
    except CorruptCheckpointError as e:
        raise ConfigError(f"resume: {e}") from None
    problem = torch_file_problem(path)
    if problem is not None:
        raise ConfigError(f"resume: {str(path)!r} {problem}")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise ConfigError(
            f"resume: {str(path)!r} holds objects other than tensors and plain data; it is refused "
            f"(checkpoints are loaded with torch.load(weights_only=True), which never runs their code)"
        ) from None
    except Exception as e:  # a truncated or foreign file: torch's zip reader says why
        reason = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ConfigError(
            f"resume: cannot read the checkpoint {str(path)!r}: {type(e).__name__}: {reason}"
        ) from None
    missing = [
        key
        for key in ("state_dict", "optimizer_states", "loops")
        if not isinstance(checkpoint, Mapping) or key not in checkpoint
    ]
    if missing:
        raise ConfigError(
            f"resume: {str(path)!r} is not a training checkpoint (it lacks {', '.join(missing)}); resume from "
            f"a run's checkpoints/last.ckpt, or give a model's weights as extractor.args.weights"
        )
    return status


def check_metric_for_checkpointing(name: str, metric_keys: Iterable[str]) -> None:
    """Fail unless ``name`` is among ``metric_keys`` (the validation metrics the run will log), with the
    closest keys. A name without ``/`` is taken for a training log (``loss_epoch``, a loss's own logs), whose
    names are only known once training runs, and is not checked.

    Raises:
        ConfigError: naming ``metric_for_checkpointing``, the value and the metrics that will be logged.
    """
    import difflib

    keys = sorted(metric_keys)
    if "/" not in name or name in keys:
        return
    close = difflib.get_close_matches(name, keys, n=3)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise ConfigError(
        f"metric_for_checkpointing: {name!r} is not among the validation metrics of this config{hint} "
        f"(they are: {', '.join(keys)})"
    )


def check_logs_root(logs_root: str | Path, checkpoint_bytes: int) -> Path:
    """Make ``logs_root`` (with its parents) and check that a file can be written there and that its
    filesystem has room for :data:`CHECKPOINTS_ROOM` checkpoints of ``checkpoint_bytes``.

    Returns:
        ``logs_root``, resolved.

    Raises:
        ConfigError: naming ``logs_root``, the path and the cause (not a directory, not writable, the free
            space and the space needed).
    """
    path = Path(logs_root).expanduser().resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except FileExistsError:
        raise ConfigError(f"logs_root: {str(path)!r} is a file, not a directory") from None
    except OSError as e:
        raise ConfigError(f"logs_root: cannot write into {str(path)!r}: {e.strerror or e}") from None
    free, needed = shutil.disk_usage(path).free, CHECKPOINTS_ROOM * checkpoint_bytes
    if free < needed:
        raise ConfigError(
            f"logs_root: {str(path)!r} has {_size(free)} free, but the checkpoints of this model need "
            f"{_size(needed)} ({CHECKPOINTS_ROOM} x {_size(checkpoint_bytes)}: best.ckpt, last.ckpt and the "
            f"temporary copy of a save)"
        )
    return path


def checkpoint_size(modules: Iterable[Any], optimizer_states: int = 2) -> int:
    """An upper estimate of a training checkpoint's bytes: the parameters and buffers of ``modules``, plus
    ``optimizer_states`` tensors per parameter (Adam keeps 2, SGD with momentum 1)."""
    total = 0
    for module in modules:
        params = sum(p.numel() * p.element_size() for p in module.parameters())
        buffers = sum(b.numel() * b.element_size() for b in module.buffers())
        total += params * (1 + optimizer_states) + buffers
    return total


#: Lightning's short spellings of precisions and what they mean (its ``16`` is ``16-mixed``, ...).
PRECISION_ALIASES = {"16": "16-mixed", "bf16": "bf16-mixed", "32": "32-true", "64": "64-true"}
#: ``pl.Trainer`` arguments that it takes at 0 but divides by in the first step of a fit.
TRAINER_POSITIVE_ARGS = ("accumulate_grad_batches", "check_val_every_n_epoch", "val_check_interval")


def check_engine(
    engine: Mapping[str, Any], precision: Any, extra_args: Mapping[str, Any] | None = None
) -> None:
    """Fail unless this machine has the ``accelerator`` and the number of ``devices`` of ``engine`` (see
    :func:`~oml_core.engine.parse_engine_params`; the GPUs: :func:`~oml_core.engine.check_cuda_devices`),
    Lightning accepts ``precision`` on it and runs it as asked, and ``pl.Trainer`` accepts every value of
    ``extra_args`` (the config's ``lightning_trainer_extra_args``: ``limit_train_batches=-1`` fails here, not
    after the data is read): each fits the annotation of its ``pl.Trainer`` parameter, those of
    :data:`TRAINER_POSITIVE_ARGS` are > 0.

    A throwaway ``pl.Trainer`` of these arguments tells (nothing runs). A precision that Lightning would silently
    replace by another is refused: on a CPU, ``16`` and ``16-mixed`` (float16 autocast, which the CPU lacks)
    would run as ``bf16-mixed``, bfloat16 autocast, which is many times slower there than ``32`` and computes
    other numbers; ``bf16``/``bf16-mixed``, ``16-true`` and ``bf16-true`` run as asked and are accepted.

    Raises:
        ConfigError: naming the key (``accelerator``, ``devices``, ``precision``,
            ``lightning_trainer_extra_args.<argument>``), its value and what this machine has or Lightning says.
    """
    import pytorch_lightning as pl

    accelerator, devices = engine["accelerator"], engine["devices"]
    check_cuda_devices(accelerator, devices)
    base = {"accelerator": accelerator, "devices": devices, "precision": precision}
    try:
        trainer = _throwaway_trainer(base)
    except Exception as e:  # Lightning's MisconfigurationException / ValueError name the problem
        raise ConfigError(
            f"accelerator={accelerator!r}, devices={devices!r}, precision={precision!r}: {one_line(e)}"
        ) from None
    asked = PRECISION_ALIASES.get(str(precision), str(precision))
    if trainer.precision != asked:
        meaning = f" ({asked})" if asked != str(precision) else ""
        device = trainer.strategy.root_device.type
        slow = device == "cpu" and trainer.precision == "bf16-mixed"
        why = " (bfloat16 autocast, many times slower than 32 on most CPUs)" if slow else ""
        raise ConfigError(
            f"precision: {precision!r}{meaning} is not available on the {device}: Lightning would silently run "
            f"{trainer.precision!r} instead{why}; set precision=32, or precision={trainer.precision} to run that "
            f"on purpose"
        )
    extra = dict(extra_args or {})
    if not extra:
        return
    check_argument_types(pl.Trainer, extra, "lightning_trainer_extra_args.")
    for key in TRAINER_POSITIVE_ARGS:
        value = extra.get(key)
        if isinstance(value, int | float) and not value > 0:  # val_check_interval may be a duration too
            raise ConfigError(f"lightning_trainer_extra_args.{key}: must be > 0, got {value!r}")
    try:
        _throwaway_trainer({**base, **extra})
    except Exception as e:
        for key, value in extra.items():  # the argument at fault: the first one refused on its own
            try:
                _throwaway_trainer({**base, key: value})
            except Exception as alone:
                raise ConfigError(
                    f"lightning_trainer_extra_args.{key}: pl.Trainer refuses {value!r}: {one_line(alone)}"
                ) from None
        raise ConfigError(
            f"lightning_trainer_extra_args: pl.Trainer refuses {extra!r} together: {one_line(e)}"
        ) from None


def _throwaway_trainer(args: Mapping[str, Any]) -> Any:
    """A ``pl.Trainer`` of ``args`` that logs, checkpoints and shows nothing, built quietly (its "GPU available"
    lines and its warnings about the arguments aside): only to see whether Lightning takes ``args``."""
    import pytorch_lightning as pl

    quiet = {
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
    }
    rank_zero_logger = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    level = rank_zero_logger.level
    rank_zero_logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pl.Trainer(**{**quiet, **args})
    finally:
        rank_zero_logger.setLevel(level)


def _size(n_bytes: float) -> str:
    """``"1.5 MB"``."""
    unit = "B"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n_bytes < 1024 or unit == "TB":
            break
        n_bytes /= 1024
    return f"{n_bytes:.1f} {unit}"


__all__ = [
    "CHECKPOINTS_ROOM",
    "PRECISION_ALIASES",
    "TRAINER_POSITIVE_ARGS",
    "check_engine",
    "check_logs_root",
    "check_metric_for_checkpointing",
    "check_resume_checkpoint",
    "check_validation_ground_truth",
    "checkpoint_size",
]
