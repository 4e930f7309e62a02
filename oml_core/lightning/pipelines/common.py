"""Pieces shared by the pipelines: config access, run directories, data, loggers, the metrics table."""

from __future__ import annotations

import datetime as dt
import difflib
import inspect
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from oml_core.registry import ConfigError, Registry, to_plain


def as_config(cfg: Any) -> dict[str, Any]:
    """A pipeline config (dict or ``DictConfig``) as a plain dict with interpolations resolved."""
    plain = to_plain(cfg)
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


def check_components(cfg: Mapping[str, Any], registry: Registry, kinds: Mapping[str, str]) -> None:
    """Look up every component named by ``cfg`` (``{config key: kind}``) before any work is done, so that an
    unknown or missing plugin fails at once with the registry's message, not after data loading."""
    for key, kind in kinds.items():
        spec = to_plain(cfg.get(key))
        if spec is None:
            continue
        name = spec if isinstance(spec, str) else spec.get("name") if isinstance(spec, Mapping) else None
        if not isinstance(name, str):
            raise ConfigError(f"config key {key!r} must be a {{name, args}} spec of a {kind}, got {spec!r}")
        registry.get(kind, name)


def make_run_dir(logs_root: str | os.PathLike[str], postfix: str) -> Path:
    """A new directory ``<logs_root>/<YYYY-mm-dd_HH-MM-SS>_<postfix>`` (``_1``, ``_2`` ... appended if taken).

    Runs never write into the directory of an earlier run, so nothing already written is overwritten.
    """
    stamp = dt.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    base = Path(logs_root).expanduser().resolve() / f"{stamp}_{postfix}"
    candidate, n = base, 0
    while True:
        try:
            candidate.mkdir(parents=True, exist_ok=False)
            return candidate
        except FileExistsError:
            n += 1
            candidate = base.with_name(f"{base.name}_{n}")


def resolve_dataset_root(cfg: Mapping[str, Any]) -> Path:
    """``cfg["dataset_root"]``, or the built-in mock dataset (generated on first use) when it is null."""
    root = cfg.get("dataset_root")
    if root is None:
        from oml_core.datasets.mock import get_mock_dataset_root

        return get_mock_dataset_root()
    path = Path(root).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(f"dataset_root {str(path)!r} is not a directory")
    return path


def read_dataframe(dataset_root: Path, dataframe_name: str) -> pd.DataFrame:
    """Read ``dataset_root / dataframe_name`` after checking it with
    :func:`~oml_core.datasets.check_retrieval_dataframe_format` (columns, labels, splits, query/gallery
    flags, boxes, existing image paths).

    Raises:
        ConfigError: the file does not exist, or is not in OML's format (the message names the file, the
            column and the first offending rows).
    """
    from oml_core.datasets import DataFrameFormatError, check_retrieval_dataframe_format

    path = dataset_root / dataframe_name
    if not path.is_file():
        raise ConfigError(f"dataframe {str(path)!r} (dataset_root + dataframe_name) does not exist")
    try:
        check_retrieval_dataframe_format(path, dataset_root=dataset_root, verbose=False)
    except DataFrameFormatError as e:
        raise ConfigError(str(e)) from e
    return pd.read_csv(path)


def split_dataframe(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``split == "train"`` and ``split == "validation"`` rows of a checked dataframe, index reset."""
    df_train = df[df["split"] == "train"].reset_index(drop=True)
    df_val = df[df["split"] == "validation"].reset_index(drop=True)
    return df_train, df_val


def build_logger(registry: Registry, logger_cfg: Any, run_dir: Path) -> Any:
    """Build the pipeline logger (TensorBoard when the config has none); a relative ``save_dir`` is taken
    relative to the run directory, as OML does with hydra's run dir."""
    spec = dict(to_plain(logger_cfg) or {"name": "tensorboard", "args": {}})
    args = dict(spec.get("args") or {})
    entry = registry.get("logger", spec["name"])
    if "save_dir" in args or "save_dir" in _parameters(entry.load()):
        save_dir = Path(args.get("save_dir") or ".")
        args["save_dir"] = str(save_dir if save_dir.is_absolute() else run_dir / save_dir)
    return registry.build("logger", {"name": spec["name"], "args": args})


def _parameters(factory: Any) -> set[str]:
    try:
        return set(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        return set()


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
