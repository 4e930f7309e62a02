"""Pieces shared by the pipelines: the pipeline logger, the embedding metrics and their table. The config and the
components built from it are :mod:`oml_core.config`'s; the engine (devices, DDP, run folders, Trainer arguments)
is :mod:`~oml_core.engine`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oml_core.engine import path_inside
from oml_core.registry import ConfigError, Registry, RegistryError, to_plain

#: The pipeline logger of a config whose ``logger`` is null.
DEFAULT_LOGGER = "tensorboard"


def build_logger(registry: Registry, logger_cfg: Any, run_dir: Path) -> Any:
    """Build the pipeline logger (TensorBoard when the config has none); a relative ``save_dir`` is taken
    relative to the run directory, as OML does with hydra's run dir, and stays inside it; the folder the logger
    writes into (its ``log_dir``: ``save_dir/name/version``) stays inside ``save_dir``.

    Raises:
        ConfigError: a relative ``save_dir`` that leads outside the run directory (:func:`path_inside`), or a
            ``name``/``version``/``sub_dir`` that leads the logger's folder outside ``save_dir``; one line naming
            the key.
    """
    spec = dict(to_plain(logger_cfg) or {"name": DEFAULT_LOGGER, "args": {}})
    args = {key: value for key, value in (spec.get("args") or {}).items() if key != "save_dir" or value}
    if "save_dir" in args and not Path(args["save_dir"]).is_absolute():
        where = path_inside(
            run_dir, Path(args["save_dir"]), "logger.args.save_dir", "the run dir", allow_root=True
        )
        args["save_dir"] = str(where)
    # the run dir is offered as save_dir to a logger that takes one and is not given one
    args.update(
        registry.offered("logger", {"name": spec["name"], "args": args}, {"save_dir": lambda: str(run_dir)})
    )
    logger = registry.build("logger", {"name": spec["name"], "args": args})
    # TensorBoard's save_dir/name/version (None for a logger that writes into save_dir itself, or elsewhere)
    log_dir = getattr(logger, "log_dir", None)
    save_dir = args.get("save_dir")
    if log_dir and save_dir and not Path(log_dir).resolve().is_relative_to(Path(save_dir).resolve()):
        raise ConfigError(
            f"logger.args: {spec['name']!r} would write into {str(log_dir)!r}, outside its save_dir "
            f"({str(save_dir)!r}); its name, version and sub_dir name folders inside save_dir"
        )
    return logger


def log_dir_of(logger: Any) -> Path | None:
    """Where ``logger`` wrote: its ``log_dir`` (TensorBoard's version folder), else its ``save_dir`` (the local
    folder of MLflow, W&B, Neptune), else None (a logger that keeps no local files)."""
    for attribute in ("log_dir", "save_dir"):
        folder = getattr(logger, attribute, None)
        if folder:
            return Path(folder)
    return None


def embedding_metrics(
    dataset: Any,
    metric_args: Mapping[str, Any] | None,
    registry: Registry,
    postprocessor: Any,
    pipeline: str,
    ddp: bool = False,
) -> Any:
    """``EmbeddingMetrics`` of ``metric_args`` (the config key) over ``dataset``, with ``postprocessor`` (or
    None) re-ranking the retrieval results; its own printing is off: the pipelines return the metrics and the
    CLI prints its own tables. With ``ddp``, ``EmbeddingMetricsDDP``: every process updates it with its share
    and ``sync()`` gathers them (``metric_args.shard_gallery``: searches the gallery sharded across the processes
    instead; ignored on one process, which holds every embedding anyway).

    Raises:
        RegistryError: an unknown retrieval metric (the registry's message).
        ConfigError: a bad argument, in one line naming ``pipeline`` and ``metric_args``.
    """
    from oml_core.metrics import EmbeddingMetrics, EmbeddingMetricsDDP

    metric_class = EmbeddingMetricsDDP if ddp else EmbeddingMetrics
    args = {"verbose": False, **(metric_args or {})}
    if not ddp:
        args.pop("shard_gallery", None)
    try:
        return metric_class(dataset=dataset, postprocessor=postprocessor, registry=registry, **args)
    except RegistryError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{pipeline}: config key 'metric_args': {e}") from e


__all__ = ["DEFAULT_LOGGER", "build_logger", "embedding_metrics", "log_dir_of"]
