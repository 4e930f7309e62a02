"""The segments of an index's log of changes: the file a commit of a few changes writes instead of a whole
generation (see :mod:`oml_core.index.generations`).

A segment holds the changes of one commit, in the order they were made: the items put in (their ids, float32
vectors, names and labels) and the ids removed. It is written once, atomically (temporary file, fsync,
``os.replace``, fsync of the folder) and never changed; ``index.json`` names it with the sha256 of its bytes, which
is checked before it is read (``torch.load(weights_only=True)`` of the bytes that were hashed)::

    {format: "oml-gallery-segment", version: 1, generation: N, changes: [
        {kind: "upsert", ids: [...], embeddings: [n, dim] float32, paths: [...], labels: [...]},
        {kind: "remove", ids: [...]}, ...]}

Its size is that of its changes, whatever the size of the gallery.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from oml_core.index.changes import Removal, Upsert
from oml_core.index.errors import GalleryIndexError
from oml_core.utils.atomic import atomic_write_bytes

#: The format tag of a segment file.
SEGMENT_FORMAT = "oml-gallery-segment"
#: The version of the segment files this code writes and reads.
SEGMENT_VERSION = 1
#: The changes a segment holds (a recalibration is written as a whole generation, with its curve).
LoggedChange = Upsert | Removal


def write_segment(path: Path, generation: int, changes: Sequence[LoggedChange]) -> str:
    """Write ``changes``, which make ``generation``, as the segment file ``path``, atomically and durably.

    Returns:
        The sha256 hex digest of the file's bytes (what ``index.json`` names it with).
    """
    records: list[dict[str, Any]] = []
    for change in changes:
        if isinstance(change, Upsert):
            records.append(
                {
                    "kind": "upsert",
                    "ids": list(change.ids),
                    # a copy: a view of a larger tensor would save the whole storage it is a view of
                    "embeddings": change.embeddings.detach().float().cpu().contiguous().clone(),
                    "paths": list(change.paths),
                    "labels": list(change.labels),
                }
            )
        else:
            records.append({"kind": "remove", "ids": list(change.ids)})
    buffer = io.BytesIO()
    torch.save(
        {"format": SEGMENT_FORMAT, "version": SEGMENT_VERSION, "generation": generation, "changes": records},
        buffer,
    )
    atomic_write_bytes(path, buffer.getbuffer())
    return hashlib.sha256(buffer.getbuffer()).hexdigest()


def read_segment(path: Path, sha256: str, generation: int, dim: int) -> list[LoggedChange]:
    """The changes of the segment file ``path``, which ``index.json`` names with ``sha256`` as the one that makes
    ``generation`` (its bytes are hashed before they are loaded).

    Args:
        path: The file.
        sha256: The digest of its bytes.
        generation: The generation it makes.
        dim: The dimension of the index's embeddings (0: an empty index, which takes the segment's).

    Raises:
        GalleryIndexError: no such file, another digest (a file that was changed or cut short), not a segment of
            that generation, or changes that are not valid (ids that are not distinct integers, vectors that are
            not ``[n, dim]`` finite floats, names or labels not one per item); the message names the file.
    """
    try:
        data = path.read_bytes()
    except OSError as e:
        raise GalleryIndexError(f"{path}: the segment of generation {generation} cannot be read ({e})") from e
    found = hashlib.sha256(data).hexdigest()
    if found != sha256:
        raise GalleryIndexError(
            f"{path}: the segment of generation {generation} has sha256 {found}, index.json names {sha256}: the "
            f"file was changed or cut short"
        )
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # a file of the right digest that torch cannot read: written by something else
        raise GalleryIndexError(f"{path}: not a readable segment ({type(e).__name__}: {e})") from e
    try:
        if not isinstance(state, dict) or state.get("format") != SEGMENT_FORMAT:
            raise ValueError(f"not of the format {SEGMENT_FORMAT!r}")
        if state.get("version") != SEGMENT_VERSION or state.get("generation") != generation:
            raise ValueError(
                f"version {state.get('version')!r} of generation {state.get('generation')!r}, expected version "
                f"{SEGMENT_VERSION} of generation {generation}"
            )
        records = state["changes"]
        if not isinstance(records, list):
            raise TypeError("changes must be a list")
        changes: list[LoggedChange] = []
        for record in records:
            change = _change(record, dim)
            if isinstance(change, Upsert) and dim == 0:
                dim = int(change.embeddings.shape[1])
            changes.append(change)
        return changes
    except (KeyError, TypeError, ValueError) as e:
        raise GalleryIndexError(f"{path}: not a valid segment ({type(e).__name__}: {e})") from e


def _change(record: Any, dim: int) -> LoggedChange:
    """The change of one ``record`` of a segment, checked (``dim`` 0: any dimension).

    Raises:
        KeyError, TypeError, ValueError: what is wrong with it.
    """
    if not isinstance(record, dict) or record.get("kind") not in ("upsert", "remove"):
        raise ValueError("a change must be a mapping of kind 'upsert' or 'remove'")
    ids = record["ids"]
    if not isinstance(ids, list) or not all(_is_int(i) for i in ids) or len(set(ids)) != len(ids):
        raise ValueError("the ids of a change must be distinct integers")
    if record["kind"] == "remove":
        return Removal(ids)
    embeddings, paths, labels = record["embeddings"], record["paths"], record["labels"]
    n = len(ids)
    if not isinstance(embeddings, Tensor) or embeddings.dtype != torch.float32 or embeddings.ndim != 2:
        raise TypeError("the embeddings of an upsert must be a float32 matrix")
    if (
        len(embeddings) != n
        or (dim and embeddings.shape[1] != dim)
        or not bool(torch.isfinite(embeddings).all())
    ):
        raise ValueError(f"the embeddings of an upsert must be {n} finite rows of dimension {dim or 'any'}")
    if (
        not isinstance(paths, list)
        or len(paths) != n
        or not all(p is None or isinstance(p, str) for p in paths)
    ):
        raise ValueError("the paths of an upsert must be a string or null per item")
    if not isinstance(labels, list) or len(labels) != n or not all(v is None or _is_int(v) for v in labels):
        raise ValueError("the labels of an upsert must be an integer or null per item")
    return Upsert(embeddings, ids, paths, labels)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def log_items(changes: Sequence[object]) -> int:
    """How many items ``changes`` put in or remove (what a commit's choice between a segment and a whole
    generation counts); a change of no item (a recalibration) counts none."""
    return sum(len(change.ids) for change in changes if isinstance(change, Upsert | Removal))


__all__ = ["SEGMENT_FORMAT", "SEGMENT_VERSION", "LoggedChange", "log_items", "read_segment", "write_segment"]
