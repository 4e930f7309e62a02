"""Pieces shared by the pipelines: config access and checks, components built from their specs, loggers, the
embedding metrics. The engine (devices, DDP, run folders, Trainer arguments) is
:mod:`~oml_core.lightning.pipelines.shared.engine`."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from oml_core.compose import one_line, resolved_config
from oml_core.lightning.pipelines.shared.engine import path_inside
from oml_core.registry import ConfigError, Registry, RegistryError, to_plain
from oml_core.registry.errors import describe_error
from oml_core.registry.registry import failed_component
from oml_core.registry.specs import parameter_names

#: The pipeline logger of a config whose ``logger`` is null.
DEFAULT_LOGGER = "tensorboard"


#: Top-level keys that belong to hydra, not to a pipeline (OML's configs have a ``hydra:`` section).
HYDRA_KEYS = ("hydra",)


def as_config(cfg: Any) -> dict[str, Any]:
    """A pipeline config (dict or ``DictConfig``) as a plain dict with interpolations resolved, without hydra's
    own section (:data:`HYDRA_KEYS`, whose interpolations such as ``${hydra:runtime.cwd}`` resolve only inside
    a hydra run).

    Raises:
        ConfigError: the config is not a mapping, or an interpolation does not resolve (one line naming the key
            and the reference, :func:`~oml_core.compose.unresolvable_config_error`).
    """
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        if any(key in cfg for key in HYDRA_KEYS):
            unresolved = OmegaConf.to_container(cfg, resolve=False)
            assert isinstance(unresolved, dict)  # a DictConfig's container is a dict
            cfg = OmegaConf.create({k: v for k, v in unresolved.items() if k not in HYDRA_KEYS})
    elif isinstance(cfg, Mapping):
        cfg = {k: v for k, v in cfg.items() if k not in HYDRA_KEYS}
    plain = resolved_config(cfg)
    if not isinstance(plain, Mapping):
        raise ConfigError(f"a pipeline config must be a mapping, got {type(cfg).__name__}")
    return dict(plain)


def check_keys(cfg: Mapping[str, Any], known: Collection[str], pipeline: str) -> None:
    """Raise a ``ConfigError`` for the first top-level key of ``cfg`` that ``pipeline`` does not know, naming
    the closest known key (a misspelt key is never silently ignored)."""
    for key in cfg:
        if key not in known:
            close = difflib.get_close_matches(str(key), sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"{pipeline}: unknown config key {key!r}{hint} (known keys: {', '.join(sorted(known))})"
            )


def require(cfg: Mapping[str, Any], *keys: str, pipeline: str) -> None:
    """Raise a ``ConfigError`` naming every missing top-level key of ``cfg``."""
    missing = [k for k in keys if k not in cfg]
    if missing:
        raise ConfigError(f"{pipeline}: the config lacks the key(s) {missing}")


def spec_of(value: Any) -> dict[str, Any]:
    """A component spec as a plain ``{name, args}`` dict (a bare name becomes ``{name: value}``)."""
    spec = to_plain(value)
    return {"name": spec} if isinstance(spec, str) else dict(spec)


def build_component(
    registry: Registry, kind: str, spec: Any, key: str, pipeline: str, /, **runtime: Any
) -> Any:
    """Build the component of the config key ``key`` (e.g. an extractor whose ``args.weights`` is a checkpoint
    path, a zoo key or null), with the ``runtime`` arguments of its factory.

    Raises:
        RegistryError: an unknown name or argument (the registry's message).
        ConfigError: the component refuses its arguments: a weights file that does not exist or does not fit,
            zoo weights that cannot be downloaded, a bad argument value; one line naming ``pipeline``, ``key``,
            the component and the cause (the file, for a checkpoint). Any other exception of a component's
            factory (of a nested spec's too): one line naming ``pipeline``, ``key``, the component that raised
            it, the plugin and distribution that registered it, and the error.
    """
    from oml_core.utils.checkpoints import CheckpointError
    from oml_core.zoo.store import PretrainedDownloadError

    try:
        return registry.build(kind, spec, **runtime)
    except RegistryError:
        raise
    except (FileNotFoundError, CheckpointError, PretrainedDownloadError, ValueError) as e:
        raise ConfigError(f"{pipeline}: config key {key!r} ({spec_of(spec)['name']!r}): {one_line(e)}") from e
    except Exception as e:
        failed = failed_component(e)
        if failed is None:  # not a factory's: a bug of the core
            raise
        raise ConfigError(
            f"{pipeline}: config key {key!r}: the {failed.kind} {failed.name!r} of the plugin "
            f"{failed.plugin.provider} failed to build: {one_line(describe_error(e))}"
        ) from e


def offered_args(
    registry: Registry, kind: str, spec: Mapping[str, Any], offers: Mapping[str, Callable[[], Any]]
) -> dict[str, Any]:
    """The runtime arguments of a component: ``offers[name]()`` for every ``name`` its factory accepts and its
    config's ``args`` do not set (a sampler's ``labels`` and ``generator``, a loss's ``label2category``)."""
    accepted = inspect.signature(registry.get(kind, spec["name"]).load()).parameters
    given = set(spec.get("args") or {})
    return {name: offer() for name, offer in offers.items() if name in accepted and name not in given}


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
    args = dict(spec.get("args") or {})
    entry = registry.get("logger", spec["name"])
    if "save_dir" not in args and "save_dir" not in parameter_names(entry.load()):
        return registry.build("logger", {"name": spec["name"], "args": args})
    save_dir = Path(args.get("save_dir") or ".")
    if not save_dir.is_absolute():
        save_dir = path_inside(run_dir, save_dir, "logger.args.save_dir", "the run dir", allow_root=True)
    args["save_dir"] = str(save_dir)
    logger = registry.build("logger", {"name": spec["name"], "args": args})
    # TensorBoard's save_dir/name/version (None for a logger that writes into save_dir itself, or elsewhere)
    log_dir = getattr(logger, "log_dir", None)
    if log_dir and not Path(log_dir).resolve().is_relative_to(save_dir.resolve()):
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


__all__ = [
    "DEFAULT_LOGGER",
    "as_config",
    "build_component",
    "build_logger",
    "check_keys",
    "embedding_metrics",
    "log_dir_of",
    "offered_args",
    "one_line",
    "require",
    "spec_of",
]
