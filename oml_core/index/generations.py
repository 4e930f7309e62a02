"""The generations of a saved gallery index (format version 5; 4 with its items and embeddings read whole, 3
without the manifest): how an index changes in place, atomically, each commit costing what its changes cost.

An index folder holds what never changes at its top and what changes in generation folders::

    index.json        format tag, version 5, the config, the sha256 of weights.pt, and the pointer (written
                      atomically: temporary file, fsync, os.replace, fsync of the folder): the number N of the
                      current generation, the base generation B whose folder holds the items, and the segments of
                      its log that make B + 1, ..., N, in order (each: its generation, its number of items, the
                      sha256 of its file); and the manifest of B's files (:mod:`oml_core.index.manifest`)
    weights.pt        the extractor's weights, and the probe query (e.g. probe.png): as in version 2
    index.lock        the writers' lock (fcntl), made by the first change
    gen-B/            the base generation: generation.json (its number, n_items, dim, whether the calibration
                      is stale, the calibration's arguments), items.arrow (ids, paths, labels and the knn backend's
                      key of every item; version 4: items.json), embeddings.npy and embeddings.pt (version 4: the
                      embeddings inside embeddings.pt), backend/, calibration.json and calibration.png; and its
                      log: log-(B+1).pt, ..., log-N.pt (:mod:`oml_core.index.segments`: the changes of one commit
                      each, written once and never changed)
    gen-B'/           the previous base generation, kept until the next whole generation (for a reader in the
                      middle of a load)

A change (:meth:`GalleryIndex.commit <oml_core.index.gallery.GalleryIndex.commit>`) takes the lock and writes
either a segment, ``gen-B/log-(N+1).pt``, of its changes only (their ids, vectors, names, labels and the ids
removed: bytes independent of the gallery's size), or, when the log's items would exceed a fraction of the
base's (or its segments a count, or the change recalibrates), a whole generation ``gen-(N+1)/`` (the
compaction: each file fsync-ed, then the folder). Either way, then it replaces ``index.json``: a process killed
at any moment leaves the index as before (``index.json`` still names generation N; an unfinished folder or
segment is never read, and is replaced or removed by a later change) or as after. A compaction then removes the
generations other than the new one and the previous base. A reader reads ``index.json``, then the base it names
and the segments it names (each checked against its sha256), applying them in order; a reader that holds the
same base takes new segments only.

A version 2 folder (everything at the top, ``index.json`` with ``n_items`` and ``dim``) is read as generation 0;
its first change writes ``gen-1/`` and turns it into version 5 (its top-level files of the generation are
removed by the compaction after, like a previous generation). A version 3 ``index.json`` (written before the
manifest) is read as version 4 without a manifest; the first commit on a folder of version 3 or 4 (even without
changes) writes a whole generation of version 5, with the manifest and the mapped files; one
without ``base`` (written before the log) is its own base, without segments.
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
from typing import Any, cast

from oml_core.index.errors import GalleryIndexError, IndexLockedError
from oml_core.index.item_table import ITEMS_TABLE_FILE
from oml_core.index.manifest import Manifest, read_manifest
from oml_core.index.storage import (
    BACKEND_FOLDER,
    CALIBRATION_FILE,
    CALIBRATION_PLOT,
    EMBEDDINGS_FILE,
    EMBEDDINGS_ROWS_FILE,
    INDEX_FILE,
    INDEX_FORMAT,
    INDEX_VERSION,
    ITEMS_FILE,
    read_json,
)

#: The layout of version 2, read as generation 0.
LEGACY_VERSION = 2
#: The layout of version 3: version 4 without the manifest.
UNBOUND_VERSION = 3
#: A generation's own small file: its number, size, dimension, and the state of its calibration.
GENERATION_FILE = "generation.json"
#: Its format tag.
GENERATION_FORMAT = "oml-gallery-generation"
#: The writers' lock file.
LOCK_FILE = "index.lock"
#: The folder name of generation N: ``gen-N``.
GENERATION_FOLDER = re.compile(r"gen-(?P<n>[0-9]+)")
#: The file name of the segment of a base generation's log that makes generation N: ``log-N.pt``.
SEGMENT_FILE = "log-{generation}.pt"
#: The files of a generation that a version 2 index keeps at its top.
GENERATION_FILES = (ITEMS_FILE, EMBEDDINGS_FILE, BACKEND_FOLDER, CALIBRATION_FILE, CALIBRATION_PLOT)
#: The files of a generation: those of version 2, and version 5's items and embeddings (the base's).
GENERATION_DATA = (*GENERATION_FILES, ITEMS_TABLE_FILE, EMBEDDINGS_ROWS_FILE)


def generation_folder(folder: Path, generation: int) -> Path:
    """The folder of ``generation`` in the index ``folder`` (generation 0, of version 2: ``folder`` itself)."""
    return folder if generation == 0 else folder / f"gen-{generation}"


def segment_path(data: Path, generation: int) -> Path:
    """The segment file, in the base generation's folder ``data``, of the changes that make ``generation``."""
    return data / SEGMENT_FILE.format(generation=generation)


@dataclass(frozen=True)
class Segment:
    """A segment of the log, as ``index.json`` names it.

    Attributes:
        generation: The generation its changes make.
        items: How many items they put in or remove.
        sha256: The sha256 hex digest of its file.
    """

    generation: int
    items: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        """The segment as ``index.json`` keeps it."""
        return {"generation": self.generation, "items": self.items, "sha256": self.sha256}


@dataclass(frozen=True)
class Layout:
    """What ``index.json`` and the base generation it names say.

    Attributes:
        meta: ``index.json`` (its config, ``weights_sha256`` ...).
        meta_path: Its path.
        generation: The current generation (0: a version 2 folder).
        data: The folder of the base generation's files (and of its log's segments).
        n_items: The base generation's number of items.
        dim: Their dimension.
        calibration_stale: Whether the base's calibration predates changes of the gallery.
        calibration_args: The arguments the calibration was made with (None: unknown, or not calibrated).
        base: The base generation (``generation`` when the log is empty).
        segments: The segments that make ``base + 1, ..., generation``, in order.
        manifest: The manifest of the index's files (None: an index of version 3 or 2, written before it).
        version: The version of ``index.json`` (the files of the base: version 5's ``items.arrow`` and
            ``embeddings.npy``, or ``items.json`` and the tensor of ``embeddings.pt`` before).
    """

    meta: dict[str, Any]
    meta_path: Path
    generation: int
    data: Path
    n_items: int
    dim: int
    calibration_stale: bool = False
    calibration_args: dict[str, Any] | None = None
    base: int = 0
    segments: tuple[Segment, ...] = ()
    manifest: Manifest | None = None
    version: int = INDEX_VERSION


def generation_names(generation: int) -> list[str]:
    """The paths, relative to the index's folder, of the files and folders of ``generation`` (those a version 2
    index keeps at its top for generation 0), its :data:`GENERATION_FILE` first."""
    prefix = "" if generation == 0 else f"gen-{generation}/"
    return [f"{prefix}{name}" for name in (GENERATION_FILE, *GENERATION_DATA)]


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
    """The layout of the index ``folder``: its ``index.json`` (version 5, 4, 3 or 2) and its current generation.

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
            f"be checked; this oml reads versions {LEGACY_VERSION} to {INDEX_VERSION}: rebuild the index "
            f"(oml index build)"
        )
    if version == LEGACY_VERSION:
        try:
            n_items, dim = int(meta["n_items"]), int(meta["dim"])
            return Layout(meta, meta_path, 0, folder, n_items, dim, version=LEGACY_VERSION)
        except (KeyError, TypeError, ValueError) as e:
            raise GalleryIndexError(
                f"{meta_path}: not a valid gallery index ({type(e).__name__}: {e})"
            ) from e
    if not _is_count(version) or version not in range(UNBOUND_VERSION, INDEX_VERSION + 1):
        raise GalleryIndexError(
            f"{meta_path}: an index of version {version!r}; this oml reads versions {LEGACY_VERSION} to "
            f"{INDEX_VERSION}"
        )
    version = cast(int, version)
    manifest = read_manifest(meta, meta_path) if version > UNBOUND_VERSION else None
    generation = meta.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 1:
        raise GalleryIndexError(f"{meta_path}: its generation must be a positive integer, got {generation!r}")
    base, segments = _log_of(meta, meta_path, generation)
    data = generation_folder(folder, base)
    info_path = data / GENERATION_FILE
    info = read_json(info_path)
    try:
        if info["format"] != GENERATION_FORMAT or info["generation"] != base:
            raise ValueError(f"not generation {base} of format {GENERATION_FORMAT!r}")
        stale, args = info["calibration_stale"], info["calibration_args"]
        if not isinstance(stale, bool) or not (args is None or isinstance(args, dict)):
            raise TypeError("calibration_stale must be a bool, calibration_args null or a mapping")
        n_items, dim = int(info["n_items"]), int(info["dim"])
    except (KeyError, TypeError, ValueError) as e:
        raise GalleryIndexError(f"{info_path}: not a valid generation ({type(e).__name__}: {e})") from e
    return Layout(
        meta, meta_path, generation, data, n_items, dim, stale, args, base, segments, manifest, version
    )


def _log_of(meta: dict[str, Any], meta_path: Path, generation: int) -> tuple[int, tuple[Segment, ...]]:
    """The base generation and the segments of the log that ``index.json`` (``meta``) names for ``generation``
    (none named: ``generation`` is its own base).

    Raises:
        GalleryIndexError: a base that is not a positive integer, segments that do not make ``base + 1, ...,
            generation`` in order, or a segment without its number of items or digest (naming ``meta_path``).
    """
    base, records = meta.get("base", generation), meta.get("segments", [])
    try:
        if not _is_count(base) or base < 1 or not isinstance(records, list):
            raise ValueError(f"base must be a positive integer and segments a list, got {base!r}")
        segments = tuple(
            Segment(record["generation"], record["items"], record["sha256"]) for record in records
        )
        if [s.generation for s in segments] != list(range(base + 1, generation + 1)):
            raise ValueError(f"the segments must make the generations {base + 1} to {generation} in order")
        for segment in segments:
            if not _is_count(segment.items) or not _is_sha256(segment.sha256):
                raise ValueError(f"segment {segment.generation} needs its number of items and its sha256")
    except (KeyError, TypeError, ValueError) as e:
        raise GalleryIndexError(f"{meta_path}: not a valid log of changes ({type(e).__name__}: {e})") from e
    return base, segments


def pointer(
    meta: dict[str, Any], generation: int, base: int, segments: tuple[Segment, ...]
) -> dict[str, Any]:
    """The content of ``index.json`` that names ``generation``, made of the base generation ``base`` and the
    ``segments`` of its log: ``meta`` (what never changes, the manifest of ``base`` among it) with the pointer of
    version 5 (a commit on a folder of an older version writes a whole generation first)."""
    kept = {k: v for k, v in meta.items() if k not in ("n_items", "dim", "generation", "base", "segments")}
    return {
        **kept,
        "version": INDEX_VERSION,
        "generation": generation,
        "base": base,
        "segments": [segment.to_dict() for segment in segments],
    }


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


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
    "SEGMENT_FILE",
    "Layout",
    "Segment",
    "UNBOUND_VERSION",
    "current_generation",
    "generation_folder",
    "generation_info",
    "generation_names",
    "pointer",
    "read_layout",
    "remove_generations",
    "segment_path",
    "writer_lock",
]
