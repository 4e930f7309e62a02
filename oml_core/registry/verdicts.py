"""The verdicts of the plugins' isolated checks, kept in the user cache folder between commands.

A verdict is what loading a plugin in a process of its own gave (:mod:`oml_core.registry.isolation`): ``None``
when it imported and its hooks ran, else the one-line failure (``oml plugin x (x-plugin 0.3): exited with status 3
during import``). It holds for one state of the plugin, its :func:`fingerprint`: the entry point (name, value),
its distribution's name, version and the files of its ``*.dist-info`` folder, the folder that holds that one (the
site-packages: installing or removing any distribution there changes its modification time), and the files of the
plugin's top-level package (each file's path, modification time and size), read from the metadata and the file
system alone, nothing imported. A reinstall, an upgrade or an edit of the plugin's files, or an install beside it
(a dependency it lacked) changes it, and the plugin is checked again; what a plugin's behaviour depends on beyond
those (the environment variables, a package installed elsewhere) does not: ``oml plugins --check`` checks every
plugin again and replaces the verdicts.

The file ``<cache folder>/plugin-verdicts.json`` (:func:`~oml_core.caches.folder.get_cache_dir`) keeps the verdicts
of each Python environment (its prefix, Python's and oml-core's versions) apart: ``{"format": 1, "environments":
{<environment key>: {<fingerprint>: {"name", "distribution", "version", "error"}}}}``. It is written atomically;
a file that cannot be read is as no verdicts, one that cannot be written leaves the plugins to be checked again by
the next command.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from oml_core import __version__
from oml_core.caches.folder import get_cache_dir
from oml_core.registry.entry import PluginInfo
from oml_core.registry.manager import FoundPlugin
from oml_core.utils.atomic import atomic_write

VERDICTS_FILE = "plugin-verdicts.json"
VERDICTS_FORMAT = 1

_log = logging.getLogger(__name__)


def verdicts_path() -> Path:
    """``<the user cache folder>/plugin-verdicts.json``."""
    return get_cache_dir() / VERDICTS_FILE


def environment_key() -> str:
    """The Python environment that verdicts hold for: its prefix, Python's version and oml-core's version."""
    return f"{sys.prefix} | Python {sys.version.split()[0]} | oml-core {__version__}"


def fingerprint(plugin: FoundPlugin) -> str:
    """The sha256 of the state of ``plugin`` that its verdict holds for (see the module's docstring)."""
    ep, info = plugin.entry_point, plugin.info
    parts = [ep.name, ep.value, str(info.distribution), str(info.version)]
    for path in (*_metadata_files(ep), *module_files(ep.module)):
        with contextlib.suppress(OSError):  # gone meanwhile: the fingerprint differs from one with it anyway
            stat = path.stat()
            parts.append(f"{path}\t{stat.st_mtime_ns}\t{stat.st_size}")
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _metadata_files(ep: Any) -> list[Path]:
    """The folder that holds the ``*.dist-info`` folder of the entry point's distribution, and that folder's files
    (none when it has no folder)."""
    folder = getattr(getattr(ep, "dist", None), "_path", None)  # importlib.metadata.PathDistribution's
    if folder is None or not Path(folder).is_dir():
        return []
    return [Path(folder).parent, *sorted(path for path in Path(folder).iterdir() if path.is_file())]


def module_files(module: str) -> list[Path]:
    """The source and extension files of the top-level package of ``module`` (the module itself when it is no
    package), found as the import system finds them, without importing anything; ``[]`` when it is not found."""
    top = module.partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):  # a top-level name never imports a parent; a broken finder says nothing
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return sorted(path for folder in spec.submodule_search_locations for path in _package_files(folder))
    return [Path(spec.origin)] if spec.origin and os.path.isfile(spec.origin) else []


def _package_files(folder: str) -> Iterator[Path]:
    suffixes = tuple(importlib.machinery.all_suffixes())
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        yield from (Path(root, name) for name in files if name.endswith(suffixes))


def read_verdicts(path: Path) -> dict[str, str | None]:
    """The verdicts of this environment kept in ``path``, by fingerprint; ``{}`` when the file is missing or
    cannot be read."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        kept = document["environments"][environment_key()] if document["format"] == VERDICTS_FORMAT else {}
        return {key: value["error"] for key, value in kept.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def store_verdicts(path: Path, verdicts: Mapping[FoundPlugin, str | None]) -> None:
    """Keep ``verdicts`` in ``path`` for this environment, replacing those of the same plugins (name and
    distribution) in another state; the other environments' are kept. An ``OSError`` is logged, not raised."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if document.get("format") != VERDICTS_FORMAT or not isinstance(document.get("environments"), dict):
            raise ValueError("another format")
    except (OSError, ValueError, AttributeError):
        document = {"format": VERDICTS_FORMAT, "environments": {}}
    kept = document["environments"].get(environment_key())
    kept = kept if isinstance(kept, dict) else {}
    renewed = {_identity(plugin.info) for plugin in verdicts}
    kept = {
        key: value
        for key, value in kept.items()
        if isinstance(value, dict) and (value.get("name"), value.get("distribution")) not in renewed
    }
    for plugin, error in verdicts.items():
        kept[fingerprint(plugin)] = {
            "name": plugin.info.name,
            "distribution": plugin.info.distribution,
            "version": plugin.info.version,
            "error": error,
        }
    document["environments"][environment_key()] = kept
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path) as file:
            file.write(json.dumps(document, indent=1, sort_keys=True).encode("utf-8"))
    except OSError as e:  # AtomicWriteError among them: the plugins are checked again next time
        _log.warning("the plugins' verdicts cannot be kept in %s: %s", path, e)


def _identity(info: PluginInfo) -> tuple[str, str | None]:
    return info.name, info.distribution


__all__ = [
    "VERDICTS_FILE",
    "environment_key",
    "fingerprint",
    "module_files",
    "read_verdicts",
    "store_verdicts",
    "verdicts_path",
]
