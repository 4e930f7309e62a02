"""Resuming a training run (the config key ``resume``): what is checked before any work, and where it goes on.

A resumed run continues *its* run: in the run's own folder (``<run>/checkpoints/last.ckpt`` -> ``<run>``), with
the model, loss, optimizer, schedule, sampler, transforms, seed and data it was trained with. The checkpoint's
run record (:mod:`oml_core.lightning.callbacks.run_record`) is compared with the config before anything is
built, and a difference is refused in one line naming the keys (:func:`plan_resume`):

- keys that define the run (:data:`RUN_KEYS`, by pipeline) must be equal, argument by argument, and so must
  the data: the dataframe's path and the sha256 of its bytes (``dataset``);
- ``resume_allow_changes`` lets a resumed run take a new ``seed`` (its random state starts from the new seed
  instead of the checkpoint's) or a new ``dataset`` (the metrics and the best checkpoint of the earlier epochs,
  which were measured on other data, are not carried over);
- every other key may differ freely: ``max_epochs``, ``logs_root``/``logs_folder``/``postfix`` (the run's
  folder is the checkpoint's), ``num_workers``, ``cache_size``, ``devices``/``accelerator``/``num_nodes``/
  ``find_unused_parameters``/``gather_across_devices``, ``precision``, ``logger``/``tags``, ``valid_period``,
  ``bs_val``/``batch_size_inference``, ``metric_args``, ``log_images``, ``nan_policy``, the checks
  (``check_images``, ``show_dataset_warnings``, ``validate_before_training``), the checkpoint cadence
  (``checkpoint_every_seconds``, ``checkpoint_every_n_steps``), ``lightning_trainer_extra_args``,
  ``embeddings_cache_dir``, ``resume`` itself.

A run that already trained its ``max_epochs`` is refused too (it has nothing left to do).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oml_core.config.schemas import RESUME_ALLOWED_CHANGES
from oml_core.engine import CHECKPOINTS_FOLDER
from oml_core.lightning.callbacks.run_record import RUN_RECORD_KEY
from oml_core.lightning.pipelines.shared.preflight import check_resume_checkpoint
from oml_core.registry import ConfigError
from oml_core.utils.atomic import remove_stale_temporaries
from oml_core.utils.digest import DigestStatus

if TYPE_CHECKING:
    from oml_core.config.schemas import TrainingConfig

#: The name of the data in messages and in ``resume_allow_changes``.
DATASET = "dataset"
#: The config keys that define a run, by pipeline: a resumed run must have the checkpoint's.
RUN_KEYS: Mapping[str, tuple[str, ...]] = {
    "extractor_training_pipeline": (
        "extractor",
        "criterion",
        "optimizer",
        "scheduling",
        "sampler",
        "bs_train",
        "transforms_train",
        "transforms_val",
        "freeze_n_epochs",
        "metric_for_checkpointing",
        "mode_for_checkpointing",
        "seed",
    ),
    "postprocessor_training_pipeline": (
        "extractor",
        "transforms_extraction",
        "pairwise_model",
        "pairs_miner",
        "hard_pairs_mining",
        "postprocessor",
        "optimizer",
        "scheduling",
        "sampler",
        "bs_train",
        "transforms_train",
        "freeze_n_epochs",
        "metric_for_checkpointing",
        "mode_for_checkpointing",
        "seed",
    ),
}
#: How many differing keys a message names (the rest are counted).
_KEYS_NAMED = 6
#: How long a value may be in a message before it is cut.
_VALUE_CHARS = 40


@dataclass(frozen=True)
class Resume:
    """A resume that :func:`plan_resume` accepted.

    Attributes:
        checkpoint: The checkpoint to go on from.
        run_dir: The run's folder, which the resumed run writes into.
        verified: Whether the checkpoint's digest was checked (oml wrote it; else it may be called "good" by
            no message).
        epochs_done: The epochs the run had trained (and validated) when the checkpoint was written.
        logger_version: The version of the run's logger (TensorBoard's ``version_<n>``), or None.
        new_seed: The seed differs (allowed): the random state starts from the config's seed.
        new_dataset: The data differs (allowed): earlier metrics and the best checkpoint are not carried over.
    """

    checkpoint: Path
    run_dir: Path
    verified: bool
    epochs_done: int
    logger_version: int | str | None = None
    new_seed: bool = False
    new_dataset: bool = False


def run_dir_of(checkpoint: Path) -> Path:
    """The folder of the run that wrote ``checkpoint``: ``<run>`` of ``<run>/checkpoints/<name>.ckpt``.

    Raises:
        ConfigError: ``checkpoint`` does not lie in a run's ``checkpoints`` folder.
    """
    checkpoint = Path(checkpoint).expanduser().resolve()
    if checkpoint.parent.name != CHECKPOINTS_FOLDER:
        raise ConfigError(
            f"resume: {str(checkpoint)!r} is not in a run's {CHECKPOINTS_FOLDER} folder "
            f"(<run>/{CHECKPOINTS_FOLDER}/last.ckpt), where the resumed run goes on writing"
        )
    return checkpoint.parent.parent


def read_run_record(checkpoint: Path) -> dict[str, Any]:
    """The run record (:data:`~oml_core.lightning.callbacks.run_record.RUN_RECORD_KEY`) of a checkpoint that
    :func:`~oml_core.lightning.pipelines.shared.preflight.check_resume_checkpoint` accepted; the file is mapped,
    not read whole (``mmap=True``).

    Raises:
        ConfigError: the checkpoint has no run record (another tool, or an oml older than the record, wrote it).
    """
    import torch

    loaded = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
    record = loaded.get(RUN_RECORD_KEY)
    if not isinstance(record, Mapping):
        raise ConfigError(
            f"resume: {str(checkpoint)!r} does not record the config of its run, so its model, optimizer and "
            "data cannot be compared with this config; start a new run that loads its weights instead (the "
            "model's args.weights)"
        )
    return dict(record)


def differences(recorded: Any, current: Any, key: str) -> list[tuple[str, Any, Any]]:
    """``(key, recorded value, current value)`` of every difference of two plain config values, by the dotted
    key of the innermost value that differs (``extractor.args.arch``). Of two components (``{name, args}``)
    with different names, the component itself differs (``optimizer``), not each of its arguments."""
    if isinstance(recorded, Mapping) and isinstance(current, Mapping):
        if {"name", "args"} <= recorded.keys() & current.keys() and recorded["name"] != current["name"]:
            return [(key, recorded["name"], current["name"])]
        found: list[tuple[str, Any, Any]] = []
        for sub in sorted(recorded.keys() | current.keys(), key=str):
            found += differences(recorded.get(sub), current.get(sub), f"{key}.{sub}")
        return found
    return [] if recorded == current else [(key, recorded, current)]


def plan_resume(record: Mapping[str, Any], config: TrainingConfig) -> Resume:
    """Check the config key ``resume`` against the run being started, before any work: the checkpoint is whole
    (:func:`~oml_core.lightning.pipelines.shared.preflight.check_resume_checkpoint`), lies in a run's folder,
    was written by the same pipeline, has epochs left to train (``max_epochs``), and its run had the same
    :data:`RUN_KEYS` and data as ``record`` (the new run's,
    :func:`~oml_core.lightning.callbacks.run_record.make_run_record`), but those that ``resume_allow_changes``
    lets differ (each such change is warned about). Once accepted, the temporary files that killed writes left
    in the checkpoint's folder are removed (:func:`~oml_core.utils.atomic.remove_stale_temporaries`).

    Returns:
        The accepted :class:`Resume`.

    Raises:
        ConfigError: one line naming the checkpoint and what is wrong: the differing keys (``extractor.args.arch
            ('resnet18' -> 'resnet34')``), a run that already trained ``max_epochs`` epochs (raise it to train
            on), another pipeline's checkpoint, or a checkpoint without a run record.
    """
    assert config.resume is not None
    given = Path(config.resume).expanduser()
    verified = (
        check_resume_checkpoint(given) is DigestStatus.VERIFIED
    )  # a link loop is named before resolving it
    checkpoint = given.resolve()
    max_epochs = config.max_epochs
    run_dir = run_dir_of(checkpoint)
    earlier = read_run_record(checkpoint)
    pipeline = record["pipeline"]
    if earlier.get("pipeline") != pipeline:
        raise ConfigError(
            f"resume: {str(checkpoint)!r} was written by {earlier.get('pipeline')!r}, not by {pipeline!r}"
        )
    epochs_done = int(earlier.get("epochs_done", 0))
    if epochs_done >= max_epochs:
        raise ConfigError(
            f"resume: the run of {str(checkpoint)!r} already finished its max_epochs={max_epochs} "
            f"({epochs_done} trained): nothing is left to train; raise max_epochs to train on "
            f"(e.g. max_epochs={epochs_done + max_epochs})"
        )
    changed = _changes(earlier, record)
    refused = {key: found for key, found in changed.items() if key not in config.resume_allow_changes}
    if refused:
        found = [item for items in refused.values() for item in items]
        named = ", ".join(_said(*item) for item in found[:_KEYS_NAMED])
        more = f" and {len(found) - _KEYS_NAMED} more" if len(found) > _KEYS_NAMED else ""
        hint = [key for key in refused if key in RESUME_ALLOWED_CHANGES]
        allow = f", or allow it with resume_allow_changes=[{','.join(hint)}]" if hint else ""
        raise ConfigError(
            f"resume: the config differs from the run of {str(checkpoint)!r} in {named}{more}: a resumed run goes "
            f"on with the model, loss, optimizer, schedule, sampler, transforms, seed and data it was trained "
            f"with; undo the change or start a new run{allow}"
        )
    if "seed" in changed:
        warnings.warn(
            f"resume: seed={config.seed} differs from the run's (resume_allow_changes has seed): the random state "
            "starts from the new seed instead of the checkpoint's",
            stacklevel=2,
        )
    if DATASET in changed:
        warnings.warn(
            f"resume: the dataset differs from the run's ({_said(*changed[DATASET][0])}; resume_allow_changes has "
            f"dataset): the metrics and best.ckpt of its {epochs_done} earlier epochs, measured on the other data, "
            "are not carried over; best.ckpt becomes the best epoch on the new data",
            stacklevel=2,
        )
    remove_stale_temporaries(checkpoint.parent)  # the files of writes killed in the run it goes on with
    version = earlier.get("logger_version")
    return Resume(
        checkpoint=checkpoint,
        run_dir=run_dir,
        verified=verified,
        epochs_done=epochs_done,
        logger_version=version if isinstance(version, int | str) else None,
        new_seed="seed" in changed,
        new_dataset=DATASET in changed,
    )


def _changes(earlier: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, list[tuple[str, Any, Any]]]:
    """The differences (:func:`differences`) of two run records, by top-level key (:data:`DATASET` for the
    data: its path and the sha256 of its bytes)."""
    recorded, current = earlier.get("config", {}), record["config"]
    changed: dict[str, list[tuple[str, Any, Any]]] = {}
    for key in RUN_KEYS[record["pipeline"]]:
        found = differences(recorded.get(key), current.get(key), key)
        if found:
            changed[key] = found
    before, now = earlier.get("dataframe", {}), record["dataframe"]
    if before != now:
        changed[DATASET] = [(DATASET, _data(before), _data(now))]
    return changed


def _data(dataframe: Mapping[str, Any]) -> str:
    """A dataframe in messages: its path and the start of its sha256."""
    return f"{str(dataframe.get('path'))!r} sha256 {str(dataframe.get('sha256'))[:12]}"


def _said(key: str, old: Any, new: Any) -> str:
    """``key (old -> new)``, values longer than :data:`_VALUE_CHARS` cut (the data's descriptions whole)."""
    if key == DATASET:
        return f"{key} ({old} -> {new})"
    texts = [repr(value) for value in (old, new)]
    old_text, new_text = (t if len(t) <= _VALUE_CHARS else f"{t[: _VALUE_CHARS - 3]}..." for t in texts)
    return f"{key} ({old_text} -> {new_text})"


__all__ = [
    "DATASET",
    "RUN_KEYS",
    "Resume",
    "differences",
    "plan_resume",
    "read_run_record",
    "run_dir_of",
]
