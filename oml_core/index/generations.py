"""The generations of a saved gallery index (format version 3): how an index changes in place, atomically.

An index folder holds what never changes at its top and what changes in generation folders::

    index.json        format tag, version 3, the config, the sha256 of weights.pt, and the pointer: the number N
                      of the current generation (written atomically: temporary file, fsync, os.replace, fsync of
                      the folder)
    weights.pt        the extractor's weights, and the probe query (e.g. probe.png): as in version 2
    index.lock        the writers' lock (fcntl), made by the first change
    gen-N/            the current generation: generation.json (its number, n_items, dim, whether the calibration
                      is stale, the calibration's arguments), items.json (ids, paths, labels and the knn backend's
                      key of every item), embeddings.pt, backend/, calibration.json and calibration.png
    gen-(N-1)/        the previous generation, kept until the next change (for a reader in the middle of a load)

A change (:meth:`GalleryIndex.commit <oml_core.index.gallery.GalleryIndex.commit>`) takes the lock, writes
``gen-(N+1)/`` whole (each file fsync-ed, then the folder), then replaces ``index.json``: a process killed at
any moment leaves the index as before (``index.json`` still names ``gen-N``; the unfinished folder is removed by
the next change) or as after. Then the generations before N are removed. A reader reads ``index.json``, then
the generation it names.

A version 2 folder (everything at the top, ``index.json`` with ``n_items`` and ``dim``) is read as generation 0;
its first change writes ``gen-1/`` and turns it into version 3 (its top-level files of the generation are
removed by the change after, like a previous generation).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oml_core.index.errors import GalleryIndexError, IndexLockedError
from oml_core.index.storage import (
    BACKEND_FOLDER,
    CALIBRATION_FILE,
    CALIBRATION_PLOT,
    EMBEDDINGS_FILE,
    INDEX_FILE,
    INDEX_FORMAT,
    INDEX_VERSION,
    ITEMS_FILE,
    read_json,
)

#: The layout of version 2, read as generation 0.
LEGACY_VERSION = 2
#: A generation's own small file: its number, size, dimension, and the state of its calibration.
GENERATION_FILE = "generation.json"
#: Its format tag.
GENERATION_FORMAT = "oml-gallery-generation"
#: The writers' lock file.
LOCK_FILE = "index.lock"
#: The folder name of generation N: ``gen-N``.
GENERATION_FOLDER = re.compile(r"gen-(?P<n>[0-9]+)")
#: The files of a generation that a version 2 index keeps at its top.
GENERATION_FILES = (ITEMS_FILE, EMBEDDINGS_FILE, BACKEND_FOLDER, CALIBRATION_FILE, CALIBRATION_PLOT)


def generation_folder(folder: Path, generation: int) -> Path:
    """The folder of ``generation`` in the index ``folder`` (generation 0, of version 2: ``folder`` itself)."""
    return folder if generation == 0 else folder / f"gen-{generation}"


@dataclass(frozen=True)
class Layout:
    """What ``index.json`` and the generation it names say.

    Attributes:
        meta: ``index.json`` (its config, ``weights_sha256`` ...).
        meta_path: Its path.
        generation: The current generation (0: a version 2 folder).
        data: The folder of the generation's files.
        n_items: Its number of items.
        dim: Their dimension.
        calibration_stale: Whether its calibration predates changes of the gallery.
        calibration_args: The arguments the calibration was made with (None: unknown, or not calibrated).
    """

    meta: dict[str, Any]
    meta_path: Path
    generation: int
    data: Path
    n_items: int
    dim: int
    calibration_stale: bool = False
    calibration_args: dict[str, Any] | None = None


def current_generation(folder: Path) -> int | None:
    """The generation ``index.json`` of ``folder`` names now (0 for version 2), or None when it cannot be read:
    a cheap check (one small file) of whether another process changed the index."""
    try:
        meta = read_json(folder / INDEX_FILE)
    except GalleryIndexError:
        return None
    if not isinstance(meta, dict):
        return None
    generation = meta.get("generation", 0 if meta.get("version") == LEGACY_VERSION else None)
    return generation if isinstance(generation, int) and not isinstance(generation, bool) else None


def read_layout(folder: Path) -> Layout:
    """The layout of the index ``folder``: its ``index.json`` (version 3 or 2) and its current generation.

    Raises:
        GalleryIndexError: no such folder, a foreign or corrupt ``index.json`` or ``generation.json``, another
            version (the message names the file).
    """
    if not folder.is_dir():
        raise GalleryIndexError(f"{folder}: no such gallery index folder")
    meta_path = folder / INDEX_FILE
    meta = read_json(meta_path)
    if not isinstance(meta, dict) or meta.get("format") != INDEX_FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise GalleryIndexError(f"{meta_path}: not an oml gallery index (format {found!r})")
    version = meta.get("version")
    if version == 1:
        raise GalleryIndexError(
            f"{meta_path}: an index of version 1, which keeps only the path of its weights, so its model cannot "
            f"be checked; this oml reads versions {LEGACY_VERSION} and {INDEX_VERSION}: rebuild the index "
            f"(oml index build)"
        )
    if version == LEGACY_VERSION:
        try:
            return Layout(meta, meta_path, 0, folder, int(meta["n_items"]), int(meta["dim"]))
        except (KeyError, TypeError, ValueError) as e:
            raise GalleryIndexError(
                f"{meta_path}: not a valid gallery index ({type(e).__name__}: {e})"
            ) from e
    if version != INDEX_VERSION:
        raise GalleryIndexError(
            f"{meta_path}: an index of version {version!r}; this oml reads versions {LEGACY_VERSION} and "
            f"{INDEX_VERSION}"
        )
    generation = meta.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 1:
        raise GalleryIndexError(f"{meta_path}: its generation must be a positive integer, got {generation!r}")
    data = generation_folder(folder, generation)
    info_path = data / GENERATION_FILE
    info = read_json(info_path)
    try:
        if info["format"] != GENERATION_FORMAT or info["generation"] != generation:
            raise ValueError(f"not generation {generation} of format {GENERATION_FORMAT!r}")
        stale, args = info["calibration_stale"], info["calibration_args"]
        if not isinstance(stale, bool) or not (args is None or isinstance(args, dict)):
            raise TypeError("calibration_stale must be a bool, calibration_args null or a mapping")
        return Layout(meta, meta_path, generation, data, int(info["n_items"]), int(info["dim"]), stale, args)
    except (KeyError, TypeError, ValueError) as e:
        raise GalleryIndexError(f"{info_path}: not a valid generation ({type(e).__name__}: {e})") from e


def generation_info(
    generation: int, n_items: int, dim: int, calibration_stale: bool, calibration_args: dict[str, Any] | None
) -> dict[str, Any]:
    """The content of a generation's :data:`GENERATION_FILE`."""
    return {
        "format": GENERATION_FORMAT,
        "generation": generation,
        "n_items": n_items,
        "dim": dim,
        "calibration_stale": calibration_stale,
        "calibration_args": calibration_args,
    }


@contextlib.contextmanager
def writer_lock(folder: Path, timeout: float) -> Iterator[None]:
    """Hold the exclusive writer lock of the index ``folder`` (``fcntl.flock`` of :data:`LOCK_FILE`, released
    when the block ends or the process dies), waiting up to ``timeout`` seconds for another writer.

    Raises:
        IndexLockedError: another process held it for the whole ``timeout``.
    """
    path = folder / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise IndexLockedError(
                        f"{path}: another process is changing the index (waited {timeout:g} s); try again"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def remove_generations(folder: Path, keep: set[int]) -> None:
    """Remove the generation folders of ``folder`` whose number is not in ``keep`` (older ones, and unfinished
    ones left by a killed change), and, when ``0`` is not kept, the generation files of version 2 at its top.
    Called with the writer lock held."""
    for entry in folder.iterdir():
        match = GENERATION_FOLDER.fullmatch(entry.name)
        if match is not None and int(match["n"]) not in keep and entry.is_dir():
            shutil.rmtree(entry)
    if 0 not in keep:
        for name in GENERATION_FILES:
            path = folder / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()


__all__ = [
    "GENERATION_FILE",
    "GENERATION_FORMAT",
    "LEGACY_VERSION",
    "LOCK_FILE",
    "Layout",
    "current_generation",
    "generation_folder",
    "generation_info",
    "read_layout",
    "remove_generations",
    "writer_lock",
]
