"""``build_gallery_index``: the gallery index of a config (``oml index build``; default config
``oml_core/configs/index_build.yaml``), of the items of its dataset component (``dataset``; null: images), written
to a new folder."""

from __future__ import annotations

import datetime as dt
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oml_core.compose import one_line, resolved_config
from oml_core.index.calibration import CalibrationError
from oml_core.index.errors import GalleryIndexError
from oml_core.index.gallery import GALLERY_ROWS, GalleryIndex, check_calibration_args
from oml_core.lightning.pipelines.shared.common import offered_args, spec_of
from oml_core.lightning.pipelines.shared.data import DEFAULT_DATASET
from oml_core.registry import ConfigError, Registry, default_registry

#: The data keys that name folders (made absolute, so that ``oml search`` may run elsewhere).
FOLDER_KEYS = ("dataset_root", "data_dir")
#: The keys a config may leave out (written before they existed), with the value they then take.
OPTIONAL_KEYS = {"dataset": None, "check_images": True}
#: Every key of the config, all required but :data:`OPTIONAL_KEYS` (the default config has them all).
CONFIG_KEYS = (
    "seed",
    "dataset",
    "dataset_root",
    "dataframe_name",
    "data_dir",
    "check_images",
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
        source: What its items are (the dataset component's source: the dataframe file, or the folder of images).
        not_calibrated: Why it was not calibrated (None when it was).
    """

    index: GalleryIndex
    index_dir: Path
    source: Path
    not_calibrated: str | None


def build_gallery_index(cfg: Mapping[str, Any] | Any, registry: Registry | None = None) -> IndexBuildResult:
    """Build the gallery index of ``cfg`` and save it to its new ``index_dir``.

    The config's keys (all required but ``dataset`` and ``check_images``; the default config has them, see its
    comments): ``dataset`` (the dataset component, ``{name, args}``; null or absent: images), offered, as the
    pipelines offer them, the data keys ``dataset_root`` (null: the built-in mock dataset) and ``dataframe_name``,
    or ``data_dir`` (a folder of items, no labels), ``check_images``, ``num_workers`` and ``transforms`` (as
    ``transforms_predict`` and ``transforms_val``); ``gallery_rows`` (``all`` or ``gallery``, see
    :meth:`GalleryIndex.add_dataset`); ``index_dir`` (null: ``logs_root/<date>_<time>_index``); ``extractor``,
    ``transforms``, ``knn_backend`` (``{name, args}`` specs); ``distance``; ``seed``, ``bs``, ``num_workers``;
    ``calibration`` (null or ``{target, value, top_n}``: the arguments of :meth:`GalleryIndex.calibrate`, used when
    the component has a validation split, e.g. ``split == validation`` rows). The index records the component's
    spec and the data keys its factory takes, so that ``oml search`` builds it again for the queries.

    ``index_dir`` is checked to be free before any item is read: an index never overwrites a folder.

    Raises:
        ConfigError: an unknown or missing key, a bad value, an ``index_dir`` that exists and is not empty, bad
            data, an item that cannot be read, an extractor that cannot be built, a calibration target that
            cannot be reached (one line naming the key, file or target).
        RegistryError: an unknown component name.
    """
    cfg = _checked(cfg)
    registry = registry or default_registry()
    index_dir = _index_dir(cfg)
    try:
        index = GalleryIndex(
            extractor=cfg["extractor"],
            transforms=cfg["transforms"],
            knn_backend=cfg["knn_backend"],
            distance=cfg["distance"],
            dataset=cfg["dataset"],
            data=_data_keys(cfg, registry),
            registry=registry,
            seed=cfg["seed"],
            batch_size=cfg["bs"],
            num_workers=cfg["num_workers"],
        )
        not_calibrated = index.add_dataset(rows=cfg["gallery_rows"], calibration=cfg["calibration"])
    except ConfigError:
        raise
    except CalibrationError as e:
        raise ConfigError(f"calibration: {one_line(e)}") from e
    except (GalleryIndexError, ValueError) as e:  # a bad value, dataframe or item, named in the message
        raise ConfigError(one_line(e)) from e
    if cfg["calibration"] is None:
        not_calibrated = "calibration is null"
    index.save(index_dir)
    return IndexBuildResult(index, index_dir, Path(index.data.source), not_calibrated)


def _data_keys(cfg: Mapping[str, Any], registry: Registry) -> dict[str, Any]:
    """The data keys of ``cfg`` that the factory of its dataset component takes (and its ``args`` do not set):
    ``dataset_root`` and ``data_dir`` absolute, ``dataframe_name`` null with ``data_dir`` (a folder replaces the
    dataframe)."""
    folders = {
        key: None if cfg[key] is None else str(Path(cfg[key]).expanduser().resolve()) for key in FOLDER_KEYS
    }
    values = {
        **folders,
        "dataframe_name": None if cfg["data_dir"] is not None else cfg["dataframe_name"],
        "check_images": cfg["check_images"],
        "num_workers": cfg["num_workers"],
    }
    spec = spec_of(cfg["dataset"] or DEFAULT_DATASET)
    return offered_args(registry, "dataset", spec, {key: _offer(value) for key, value in values.items()})


def _offer(value: Any) -> Callable[[], Any]:
    return lambda: value


def _checked(cfg: Any) -> dict[str, Any]:
    """The config as a plain dict (its interpolations resolved), its keys and simple values checked."""
    cfg = resolved_config(cfg)
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"the config must be a mapping, got {type(cfg).__name__}")
    cfg = {**OPTIONAL_KEYS, **{key: value for key, value in cfg.items() if key != "hydra"}}
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
    if not isinstance(cfg["check_images"], bool):
        raise ConfigError(f"check_images must be true or false, got {cfg['check_images']!r}")
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


__all__ = ["CONFIG_KEYS", "OPTIONAL_KEYS", "IndexBuildResult", "build_gallery_index"]
