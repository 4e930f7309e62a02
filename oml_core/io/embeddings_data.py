"""What an embeddings file holds, in memory: a batch of items to write (:class:`ItemsBatch`), a file read back
(:class:`EmbeddingsFile`), the error of a bad file, and the checks every format shares (items, finite rows)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from oml_core.io.provenance import EmbeddingsProvenance

#: The formats of embeddings files, and the suffix of each (``json``: OML's ``predictions.json``).
SUFFIXES = {"json": ".json", "parquet": ".parquet", "npy": ".npy"}
FORMATS = tuple(SUFFIXES)
#: The format tag of the sidecar and of the Parquet metadata, and the version of the layout.
EMBEDDINGS_FORMAT = "oml-embeddings"
EMBEDDINGS_VERSION = 1
#: Rows checked at a time for non-finite values (a memory-mapped matrix is read in such chunks).
CHECK_CHUNK_ROWS = 65536


class EmbeddingsFileError(ValueError):
    """An embeddings file that cannot be written or read: the message is one line naming the file and what is
    wrong (a missing column, ragged vectors, a row with NaN, a sidecar that disagrees, a file that exists)."""


@dataclass(frozen=True)
class ItemsBatch:
    """Items to write, in their order.

    Attributes:
        ids: Their integer ids.
        paths: Their names (image paths, or a modality's names; None: unnamed).
        labels: Their labels (None: unknown).
        vectors: ``[len(ids), dim]`` float32 embeddings.
    """

    ids: list[int]
    paths: list[str | None]
    labels: list[int | None]
    vectors: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.ids)
        if self.vectors.ndim != 2 or len(self.vectors) != n or len(self.paths) != n or len(self.labels) != n:
            raise ValueError(
                f"a batch of items needs one id, path and label per row of its [n, dim] vectors; got {n} ids, "
                f"{len(self.paths)} paths, {len(self.labels)} labels and vectors of shape {self.vectors.shape}"
            )


@dataclass(frozen=True)
class EmbeddingsFile:
    """An embeddings file read back (:func:`oml_core.io.embeddings_files.read_embeddings_file`).

    Attributes:
        path: The file.
        format: ``json``, ``parquet`` or ``npy``.
        ids: The items' ids (for a file without ids: their positions ``0, 1, ...``).
        paths: Their names (None: unnamed).
        labels: Their labels (None: unknown).
        embeddings: ``[n, dim]`` float32 (read-only and memory-mapped for ``npy``).
        provenance: What made them (None: the file records none, e.g. a ``predictions.json`` of OML).
    """

    path: Path
    format: str
    ids: list[int]
    paths: list[str | None]
    labels: list[int | None]
    embeddings: np.ndarray
    provenance: EmbeddingsProvenance | None

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        """The size of every vector."""
        return int(self.embeddings.shape[1])


def checked_items(
    file: Path, ids: Any, paths: Any, labels: Any, n: int
) -> tuple[list[int], list[Any], list[Any]]:
    """``ids``, ``paths`` and ``labels`` of ``file``'s ``n`` items, checked: lists of ``n`` values each, the ids
    distinct integers, the paths strings or null, the labels integers or null.

    Raises:
        EmbeddingsFileError: naming ``file``, the list and the first bad item.
    """
    for name, values in (("ids", ids), ("paths", paths), ("labels", labels)):
        if not isinstance(values, list) or len(values) != n:
            found = f"{len(values)} values" if isinstance(values, list) else type(values).__name__
            raise EmbeddingsFileError(
                f"{file}: its {name} must be a list of its {n} items' values, got {found}"
            )
    seen: set[int] = set()
    for position, value in enumerate(ids):
        if not _is_int(value):
            raise EmbeddingsFileError(f"{file}: id of item {position} is {value!r}, not an integer")
        if value in seen:
            raise EmbeddingsFileError(f"{file}: id {value} is given to two items; ids must be distinct")
        seen.add(value)
    for position, value in enumerate(paths):
        if value is not None and not isinstance(value, str):
            raise EmbeddingsFileError(f"{file}: path of item {position} is {value!r}, not a string or null")
    for position, value in enumerate(labels):
        if value is not None and not _is_int(value):
            raise EmbeddingsFileError(
                f"{file}: label of item {position} is {value!r}, not an integer or null"
            )
    return [int(i) for i in ids], list(paths), [None if v is None else int(v) for v in labels]


def first_non_finite_row(vectors: np.ndarray, offset: int = 0) -> int | None:
    """The index (plus ``offset``) of the first row of ``vectors`` holding a NaN or an infinity, read in chunks
    of :data:`CHECK_CHUNK_ROWS` rows; None when every value is finite."""
    for start in range(0, len(vectors), CHECK_CHUNK_ROWS):
        bad = ~np.isfinite(vectors[start : start + CHECK_CHUNK_ROWS]).all(axis=1)
        if bad.any():
            return offset + start + int(np.flatnonzero(bad)[0])
    return None


def check_finite(file: Path, vectors: np.ndarray, paths: Sequence[str | None], offset: int = 0) -> None:
    """Check that every row of ``vectors`` (rows ``offset, ...`` of ``file``) is finite.

    Raises:
        EmbeddingsFileError: ``<file>: row <i> (<path>) holds NaN or infinite values``.
    """
    row = first_non_finite_row(vectors, offset)
    if row is not None:
        name = paths[row - offset] if row - offset < len(paths) else None
        named = f" ({name})" if name is not None else ""
        raise EmbeddingsFileError(f"{file}: row {row}{named} holds NaN or infinite values")


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a real number (not a bool) that is finite."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


__all__ = [
    "CHECK_CHUNK_ROWS",
    "EMBEDDINGS_FORMAT",
    "EMBEDDINGS_VERSION",
    "FORMATS",
    "SUFFIXES",
    "EmbeddingsFile",
    "EmbeddingsFileError",
    "ItemsBatch",
    "check_finite",
    "checked_items",
    "first_non_finite_row",
    "is_finite_number",
]
