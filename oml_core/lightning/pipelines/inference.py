"""Pieces shared by the inference pipelines (validation and prediction): their config checks and Trainer
arguments on one device, the extractor built from its config, and the check that every image can be read."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from oml_core.lightning.pipelines.common import (
    as_config,
    check_keys,
    is_ddp_devices,
    merge_trainer_args,
    parse_engine_params,
    require,
)
from oml_core.registry import ConfigError, Registry, RegistryError

#: Default values of the engine keys of the inference pipelines (when a config leaves them out).
ENGINE_DEFAULTS: dict[str, Any] = {
    "accelerator": None,
    "devices": 1,
    "precision": 32,
    "seed": 42,
    "num_workers": 0,
    "lightning_trainer_extra_args": None,
}
#: Trainer arguments set by other config keys, so ``lightning_trainer_extra_args`` may not set them.
TRAINER_ARGS_SET_BY_KEYS = {
    "accelerator": "the config key 'accelerator'",
    "devices": "the config key 'devices'",
    "strategy": "the config key 'devices' (one device)",
    "use_distributed_sampler": "the config key 'devices' (one device)",
    "precision": "the config key 'precision'",
    "logger": "the config key 'logger' (prediction logs nothing)",
    "callbacks": "its own callbacks",
    "default_root_dir": "the config keys 'logs_root' and 'logs_folder' (or 'save_dir')",
}
TRAINER_DEFAULTS = {"deterministic": True, "enable_model_summary": False, "enable_checkpointing": False}

#: How many unreadable files an error message names (the rest are counted).
MAX_FILES_NAMED = 5


def inference_config(
    cfg: Mapping[str, Any] | Any, required: Sequence[str], defaults: Mapping[str, Any], pipeline: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config of an inference pipeline, checked, and the ``pl.Trainer`` arguments it gives.

    The known keys of ``pipeline`` are ``required`` and those of ``defaults``; ``defaults`` fill the optional
    keys the config leaves out. The Trainer arguments are those of the engine keys ``accelerator`` (null: gpu
    when CUDA is available, else cpu), ``devices`` and ``precision``
    (:func:`~oml_core.lightning.pipelines.common.parse_engine_params`), :data:`TRAINER_DEFAULTS`, and
    ``lightning_trainer_extra_args`` (any other ``pl.Trainer`` arguments, e.g. ``enable_progress_bar``).

    The inference pipelines run on one device: their metrics and predictions are gathered in one process
    (several devices are the training pipeline's business).

    Returns:
        ``(config as a plain dict with the defaults, Trainer arguments without logger, callbacks and root dir)``.

    Raises:
        ConfigError: a key that is not known (naming the closest known key), a missing required key, devices
            other than one device, or ``lightning_trainer_extra_args`` that ``pl.Trainer`` does not take or
            that a config key sets.
    """
    cfg = as_config(cfg)
    check_keys(cfg, {*required, *defaults}, pipeline)
    require(cfg, *required, pipeline=pipeline)
    cfg = {**defaults, **cfg}
    engine = parse_engine_params(cfg)
    if is_ddp_devices(engine["devices"]):
        raise ConfigError(
            f"{pipeline}: devices={cfg['devices']!r}, but this pipeline runs on one device: set devices to 1 "
            f"or to a list of one device index, e.g. [0]"
        )
    trainer_args = merge_trainer_args(
        {**TRAINER_DEFAULTS, **engine, "precision": cfg["precision"]},
        cfg["lightning_trainer_extra_args"],
        TRAINER_ARGS_SET_BY_KEYS,
    )
    return cfg, trainer_args


def build_extractor(registry: Registry, spec: Any, pipeline: str) -> Any:
    """Build the extractor of the config key ``extractor`` (its ``args.weights``: a checkpoint path, a zoo key
    or null).

    Raises:
        RegistryError: an unknown name or argument (the registry's message).
        ConfigError: the extractor refuses its arguments: a weights file that does not exist or does not fit,
            zoo weights that cannot be downloaded, a bad argument value; the message names the extractor and
            the cause (the file, for a checkpoint).
    """
    from oml_core.utils.checkpoints import CheckpointError
    from oml_core.zoo.store import PretrainedDownloadError

    try:
        return registry.build("extractor", spec)
    except RegistryError:
        raise
    except (FileNotFoundError, CheckpointError, PretrainedDownloadError, ValueError) as e:
        name = spec.get("name") if isinstance(spec, Mapping) else spec
        raise ConfigError(f"{pipeline}: config key 'extractor' ({name!r}): {_one_line(e)}") from e


def check_images(
    paths: Sequence[Path],
    f_imread: Callable[[Path], Any],
    num_workers: int,
    pipeline: str,
    progress_bar: bool = True,
) -> None:
    """Read every image once (``num_workers`` threads at a time) before any model runs.

    Raises:
        ConfigError: files that are missing or cannot be read as images; one line that counts them and names
            the first :data:`MAX_FILES_NAMED`, each with its error.
    """

    def problem(path: Path) -> str | None:
        try:
            f_imread(path)
        except Exception as e:  # whatever the reader raises, the file is reported
            return f"{str(path)!r} ({_one_line(e)})"
        return None

    with ThreadPoolExecutor(max_workers=max(1, int(num_workers))) as pool:
        results = tqdm(
            pool.map(problem, paths), total=len(paths), desc="Checking images", disable=not progress_bar
        )
        problems = [p for p in results if p is not None]
    if problems:
        named = "; ".join(problems[:MAX_FILES_NAMED])
        more = f"; and {len(problems) - MAX_FILES_NAMED} more" if len(problems) > MAX_FILES_NAMED else ""
        raise ConfigError(
            f"{pipeline}: {len(problems)} of {len(paths)} image files cannot be read: {named}{more}"
        )


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


__all__ = [
    "ENGINE_DEFAULTS",
    "MAX_FILES_NAMED",
    "TRAINER_ARGS_SET_BY_KEYS",
    "TRAINER_DEFAULTS",
    "build_extractor",
    "check_images",
    "inference_config",
]
