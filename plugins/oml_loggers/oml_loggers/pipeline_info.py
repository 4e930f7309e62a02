"""What the pipeline loggers log for reproducibility: the config, its tags, the dataframe and the source.

:class:`PipelineInfo` gathers it from a pipeline's config, as OML's loggers do:

- the config itself (a plain dict, and its YAML text),
- ``tags`` from the config, with the config's ``postfix`` (the run's name suffix) appended,
- the dataframe ``dataset_root / dataframe_name`` (``dataframe_name`` may also be a list of names; a
  ``null`` ``dataset_root`` is the built-in mock dataset, as in the pipelines; files that do not exist are
  left out),
- a snapshot of the source: the ``*.py`` and ``*.yaml`` files of the ``oml_core`` package.

:meth:`PipelineInfo.write` lays them out in a folder, the layout every logger uploads::

    config.yaml
    dataset/<dataframe files>
    code/oml_core/...
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from omegaconf import OmegaConf

from oml_loggers.config import CONFIG_FILE_NAME, cfg_to_yaml

#: Sub-folder of the uploaded files holding the dataframe(s).
DATASET_DIR = "dataset"
#: Sub-folder of the uploaded files holding the source snapshot.
CODE_DIR = "code"
#: The package whose source is logged, and the files of it that are.
SOURCE_PACKAGE = "oml_core"
SOURCE_PATTERNS = ("*.py", "*.yaml")
#: The parts of :meth:`PipelineInfo.write`'s layout: ``(name, path relative to the folder)``.
PARTS = (("config", CONFIG_FILE_NAME), ("dataset", DATASET_DIR), ("code", CODE_DIR))


@dataclass(frozen=True)
class PipelineInfo:
    """The reproducibility information of one pipeline run (see the module's docstring).

    Attributes:
        config: The config as plain containers (what ``config_yaml`` holds).
        config_yaml: The config as YAML text (:func:`oml_loggers.config.cfg_to_yaml`).
        tags: The config's ``tags`` and ``postfix``, without empty or repeated ones.
        dataframes: Existing dataframe files named by the config.
        source_root: The folder holding the ``oml_core`` package.
        source_files: The source files, relative to ``source_root`` (``oml_core/...``).
    """

    config: dict[str, Any]
    config_yaml: str
    tags: list[str]
    dataframes: list[Path]
    source_root: Path
    source_files: list[Path]

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | Any) -> PipelineInfo:
        """Gather the information from a pipeline config (a dict or a ``DictConfig``)."""
        config_yaml = cfg_to_yaml(cfg)
        config = OmegaConf.to_container(OmegaConf.create(config_yaml))
        if not isinstance(config, dict):
            raise TypeError(f"a pipeline config must be a mapping, got {type(cfg).__name__}")
        source_root, source_files = source_snapshot()
        return cls(
            config=config,
            config_yaml=config_yaml,
            tags=config_tags(config),
            dataframes=dataframe_paths(config),
            source_root=source_root,
            source_files=source_files,
        )

    @property
    def source_paths(self) -> list[Path]:
        """The absolute paths of the source files."""
        return [self.source_root / rel for rel in self.source_files]

    def write(self, dst: Path) -> None:
        """Write ``config.yaml``, ``dataset/<dataframes>`` and ``code/oml_core/...`` into the folder ``dst``."""
        dst.mkdir(parents=True, exist_ok=True)
        (dst / CONFIG_FILE_NAME).write_text(self.config_yaml, encoding="utf-8")
        for path in self.dataframes:
            (dst / DATASET_DIR).mkdir(exist_ok=True)
            shutil.copyfile(path, dst / DATASET_DIR / path.name)
        for rel in self.source_files:
            target = dst / CODE_DIR / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.source_root / rel, target)

    @contextmanager
    def written(self) -> Iterator[Path]:
        """A temporary folder holding :meth:`write`'s layout, removed on exit (for clients that copy files
        when they log them)."""
        with TemporaryDirectory(prefix="oml_pipeline_info_") as tmp:
            self.write(Path(tmp))
            yield Path(tmp)

    @contextmanager
    def written_parts(self) -> Iterator[list[tuple[str, Path]]]:
        """``[(name, path)]`` of the :data:`PARTS` present in :meth:`written`'s folder (no ``dataset`` when
        the config names no existing dataframe)."""
        with self.written() as folder:
            yield [(name, folder / rel) for name, rel in PARTS if (folder / rel).exists()]


def config_tags(config: Mapping[str, Any]) -> list[str]:
    """The config's ``tags`` (a list or one string) followed by its ``postfix``, non-empty and unique."""
    tags = config.get("tags") or []
    if isinstance(tags, str):
        tags = [tags]
    candidates = [str(t) for t in tags] + [str(config.get("postfix") or "")]
    return list(dict.fromkeys(t for t in candidates if t))


def dataframe_paths(config: Mapping[str, Any]) -> list[Path]:
    """The existing files ``dataset_root / name`` for the config's ``dataframe_name`` (one name or a list).

    A ``null`` ``dataset_root`` is the built-in mock dataset (generated on first use, as by the pipelines).
    """
    names = config.get("dataframe_name")
    if not names:
        return []
    names = [names] if isinstance(names, str) else list(names)
    root = config.get("dataset_root")
    if root is None:
        from oml_core.datasets import mock

        dataset_root = mock.get_mock_dataset_root()
    else:
        dataset_root = Path(str(root)).expanduser()
    paths = [dataset_root / str(name) for name in names]
    return [path.resolve() for path in paths if path.is_file()]


def source_snapshot() -> tuple[Path, list[Path]]:
    """``(root, files)``: the folder holding the ``oml_core`` package and its source files relative to it."""
    package = Path(str(importlib.import_module(SOURCE_PACKAGE).__file__)).resolve().parent
    files = {
        path.relative_to(package.parent)
        for pattern in SOURCE_PATTERNS
        for path in package.rglob(pattern)
        if path.is_file()
    }
    return package.parent, sorted(files)


__all__ = [
    "CODE_DIR",
    "DATASET_DIR",
    "PARTS",
    "SOURCE_PACKAGE",
    "PipelineInfo",
    "config_tags",
    "dataframe_paths",
    "source_snapshot",
]
