"""``build_gallery_index``: the gallery index of a config (``oml index build``; default config
``oml_core/configs/index_build.yaml``), written to a new folder."""

from __future__ import annotations

import datetime as dt
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oml_core.compose import one_line, resolved_config
from oml_core.index.calibration import CalibrationError
from oml_core.index.errors import GalleryIndexError
from oml_core.index.gallery import GALLERY_ROWS, GalleryIndex, check_calibration_args
from oml_core.registry import ConfigError, Registry, default_registry

#: Every key of the config, all required (the default config has them all).
CONFIG_KEYS = (
    "seed",
    "dataset_root",
    "dataframe_name",
    "data_dir",
    "gallery_rows",
    "index_dir",
    "logs_root",
    "bs",
    "num_workers",
    "transforms",
    "extractor",
    "distance",
    "knn_backend",
    "calibration",
)


@dataclass
class IndexBuildResult:
    """What ``build_gallery_index`` produced.

    Attributes:
        index: The index.
        index_dir: The folder it was saved to.
        source: What its items are (the dataframe file, or the folder of images).
        not_calibrated: Why it was not calibrated (None when it was).
    """

    index: GalleryIndex
    index_dir: Path
    source: Path
    not_calibrated: str | None


def build_gallery_index(cfg: Mapping[str, Any] | Any, registry: Registry | None = None) -> IndexBuildResult:
    """Build the gallery index of ``cfg`` and save it to its new ``index_dir``.

    The config's keys (all required; the default config has them, see its comments): ``dataset_root``
    (null: the built-in mock dataset) and ``dataframe_name``, or ``data_dir`` (a folder of images, no labels);
    ``gallery_rows`` (``all`` or ``gallery``, see :meth:`GalleryIndex.from_dataframe`); ``index_dir`` (null:
    ``logs_root/<date>_<time>_index``); ``extractor``, ``transforms``, ``knn_backend`` (``{name, args}`` specs);
    ``distance``; ``seed``, ``bs``, ``num_workers``; ``calibration`` (null or ``{target, value, top_n}``: the
    arguments of :meth:`GalleryIndex.calibrate`, used when the dataframe has ``split == validation`` rows).

    ``index_dir`` is checked to be free before any image is read: an index never overwrites a folder.

    Raises:
        ConfigError: an unknown or missing key, a bad value, an ``index_dir`` that exists and is not empty, a bad
            dataframe, an image that cannot be read, an extractor that cannot be built, a calibration target
            that cannot be reached (one line naming the key, file or target).
        RegistryError: an unknown component name.
    """
    cfg = _checked(cfg)
    registry = registry or default_registry()
    index_dir = _index_dir(cfg)
    index_args = {
        "extractor": cfg["extractor"],
        "transforms": cfg["transforms"],
        "knn_backend": cfg["knn_backend"],
        "distance": cfg["distance"],
        "registry": registry,
        "seed": cfg["seed"],
        "batch_size": cfg["bs"],
        "num_workers": cfg["num_workers"],
    }
    not_calibrated = None
    try:
        if cfg["data_dir"] is not None:
            source = Path(cfg["data_dir"]).expanduser().resolve()
            index = GalleryIndex.from_folder(source, **index_args)
            not_calibrated = "a folder of images has no labels"
        else:
            df, source, root = _dataframe(cfg)
            calibration = cfg["calibration"]
            if calibration is not None and not (df["split"] == "validation").any():
                calibration, not_calibrated = None, f"{source} has no split=validation rows"
            elif calibration is None:
                not_calibrated = "calibration is null"
            index = GalleryIndex.from_dataframe(
                df, root, rows=cfg["gallery_rows"], calibration=calibration, **index_args
            )
    except ConfigError:
        raise
    except CalibrationError as e:
        raise ConfigError(f"calibration: {one_line(e)}") from e
    except (GalleryIndexError, ValueError) as e:  # a bad value, dataframe or image, named in the message
        raise ConfigError(one_line(e)) from e
    index.save(index_dir)
    return IndexBuildResult(index=index, index_dir=index_dir, source=source, not_calibrated=not_calibrated)


def _checked(cfg: Any) -> dict[str, Any]:
    """The config as a plain dict (its interpolations resolved), its keys and simple values checked."""
    cfg = resolved_config(cfg)
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"the config must be a mapping, got {type(cfg).__name__}")
    cfg = {key: value for key, value in cfg.items() if key != "hydra"}
    for key in cfg:
        if key not in CONFIG_KEYS:
            close = difflib.get_close_matches(str(key), CONFIG_KEYS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"unknown config key {key!r}{hint} (known keys: {', '.join(CONFIG_KEYS)})")
    missing = [key for key in CONFIG_KEYS if key not in cfg]
    if missing:
        raise ConfigError(f"the config lacks the key(s) {missing}")
    for key, minimum in (("bs", 1), ("num_workers", 0), ("seed", 0)):
        if not _integer_at_least(cfg[key], minimum):
            raise ConfigError(f"{key} must be an integer >= {minimum}, got {cfg[key]!r}")
    if cfg["gallery_rows"] not in GALLERY_ROWS:
        raise ConfigError(f"gallery_rows must be one of {list(GALLERY_ROWS)}, got {cfg['gallery_rows']!r}")
    calibration = cfg["calibration"]
    if calibration is not None:
        if not isinstance(calibration, Mapping):
            raise ConfigError(
                f"calibration must be null or a mapping of target, value, top_n, got {calibration!r}"
            )
        try:
            check_calibration_args(calibration)
        except ValueError as e:
            raise ConfigError(f"calibration: {e}") from e
    if cfg["data_dir"] is not None and cfg["dataset_root"] is not None:
        raise ConfigError(
            "give either data_dir (a folder of images) or dataset_root (with dataframe_name), not both"
        )
    return cfg


def _integer_at_least(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _index_dir(cfg: Mapping[str, Any]) -> Path:
    """``index_dir`` when it is free (missing or an empty folder), or a new ``logs_root/<date>_<time>_index``."""
    if cfg["index_dir"] is not None:
        folder = Path(cfg["index_dir"]).expanduser().resolve()
        if folder.exists() and not (folder.is_dir() and not any(folder.iterdir())):
            raise ConfigError(
                f"index_dir {str(folder)!r} exists and is not an empty folder; an index is never "
                f"written over it: choose a new index_dir"
            )
        return folder
    base = Path(cfg["logs_root"]).expanduser().resolve() / f"{dt.datetime.now():%Y-%m-%d_%H-%M-%S}_index"
    folder, n = base, 0
    while folder.exists():
        n += 1
        folder = base.with_name(f"{base.name}_{n}")
    return folder


def _dataframe(cfg: Mapping[str, Any]) -> tuple[Any, Path, Path]:
    """The checked dataframe of ``dataset_root / dataframe_name`` (the mock dataset's when ``dataset_root`` is
    null), its path and the dataset root."""
    from oml_core.datasets.dataframe_format import read_dataframe

    if cfg["dataset_root"] is None:
        from oml_core.datasets.mock import get_mock_dataset_root

        root = get_mock_dataset_root()
    else:
        root = Path(cfg["dataset_root"]).expanduser().resolve()
        if not root.is_dir():
            raise ConfigError(f"dataset_root {str(root)!r} is not a directory")
    return read_dataframe(root, cfg["dataframe_name"]), root / cfg["dataframe_name"], root


__all__ = ["CONFIG_KEYS", "IndexBuildResult", "build_gallery_index"]
