"""Embeddings files: items (ids, paths, labels) with their float32 vectors and the provenance of the vectors
(:mod:`oml_core.io.provenance`), in one of three formats chosen by the file's suffix:

- ``.parquet``: columns ``id, path, label, embedding`` (a float32 fixed-size list), in row groups, the provenance
  and ``dim`` in its key-value metadata (:mod:`oml_core.io.parquet_embeddings`);
- ``.npy``: a float32 ``[n, dim]`` matrix, read back memory-mapped, and the sidecar ``<file>.meta.json`` with
  the items and the provenance (:mod:`oml_core.io.npy_embeddings`);
- ``.json``: OML's ``{path: [feature, ...]}`` (``predictions.json``, byte for byte what ``json.dump`` writes),
  and the same sidecar (:mod:`oml_core.io.json_embeddings`).

:class:`EmbeddingsWriter` writes batch by batch, so that no more than a batch (a row group for Parquet) of
vectors is held; the files appear when it is closed, whole (written as temporary files beside them, then
published under their names by a hard link, which never replaces an existing file). :func:`read_embeddings_file`
reads any of the three, with one-line errors naming the file and what is wrong.

Example::

    with EmbeddingsWriter("gallery.parquet", provenance=provenance) as writer:
        for batch in batches:
            writer.write(batch.embeddings, ids=batch.ids, paths=batch.paths, labels=batch.labels)
    found = read_embeddings_file("gallery.parquet")  # .ids, .paths, .labels, .embeddings, .provenance
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import numpy as np

from oml_core.io.embeddings_data import (
    FORMATS,
    SUFFIXES,
    EmbeddingsFile,
    EmbeddingsFileError,
    ItemsBatch,
    first_non_finite_row,
)
from oml_core.io.json_embeddings import JsonEmbeddingsWriter, read_json_embeddings
from oml_core.io.npy_embeddings import NpyEmbeddingsWriter, read_npy_embeddings
from oml_core.io.parquet_embeddings import ParquetEmbeddingsWriter, read_parquet_embeddings
from oml_core.io.provenance import EmbeddingsProvenance
from oml_core.io.sidecar import sidecar_of
from oml_core.utils.atomic import fsync_directory, remove_stale_temporaries


class _FormatWriter(Protocol):
    def write(self, batch: ItemsBatch) -> None: ...

    def finish(self) -> list[tuple[Path, Path]]: ...

    def abort(self) -> None: ...


def format_of(path: str | os.PathLike[str]) -> str:
    """The format of an embeddings file by its suffix: ``json``, ``parquet`` or ``npy``.

    Raises:
        EmbeddingsFileError: another suffix.
    """
    suffix = Path(path).suffix.lower()
    for name, known in SUFFIXES.items():
        if suffix == known:
            return name
    raise EmbeddingsFileError(
        f"{path}: not an embeddings file by its name; the suffixes are {', '.join(SUFFIXES.values())}"
    )


def written_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files that writing the embeddings file ``path`` makes: the file, and the sidecar of ``.npy`` and
    ``.json``."""
    path = Path(path)
    return [path] if format_of(path) == "parquet" else [path, sidecar_of(path)]


def check_format_available(format: str) -> None:
    """Check that ``format`` is one of :data:`FORMATS`.

    Raises:
        EmbeddingsFileError: an unknown format.
    """
    if format not in FORMATS:
        raise EmbeddingsFileError(f"unknown format {format!r}; the formats are {', '.join(FORMATS)}")


def check_writable(path: str | os.PathLike[str], format: str | None = None) -> Path:
    """Check, before any work, that the embeddings file ``path`` can be written in ``format`` (None: its
    suffix's): the suffix is the format's, none of its files exists (nothing is ever overwritten).

    Returns:
        ``path`` as a ``Path``.

    Raises:
        EmbeddingsFileError: an unknown format, a suffix of another format, an existing file.
    """
    path = Path(path)
    found = format_of(path)
    if format is not None and found != format:
        check_format_available(format)
        raise EmbeddingsFileError(f"{path}: a {format} embeddings file must end with {SUFFIXES[format]}")
    for file in written_files(path):
        if file.exists():
            raise EmbeddingsFileError(f"{file}: exists and is never overwritten; choose another file")
    check_format_available(found)
    return path


class EmbeddingsWriter:
    """Writes an embeddings file batch by batch: the items and vectors of each :meth:`write` go to temporary
    files beside ``path`` at once (Parquet: a row group at a time), and :meth:`close` publishes them under their
    names (the sidecar first, then the file). Leaving its ``with`` block on an error (or :meth:`abort`) removes
    the temporaries and writes nothing.

    Args:
        path: The file; its suffix (``.parquet``, ``.npy``, ``.json``) is its format.
        provenance: What made the embeddings (written into the file's metadata or sidecar); None: not recorded.
        row_group_size: Rows per Parquet row group; None: as many as hold 64 MiB of vectors
            (:data:`~oml_core.io.parquet_embeddings.ROW_GROUP_BYTES`).

    Raises:
        EmbeddingsFileError: see :func:`check_writable`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        provenance: EmbeddingsProvenance | None = None,
        *,
        row_group_size: int | None = None,
    ) -> None:
        self.path = check_writable(path)
        self.format = format_of(self.path)
        self.n_items = 0
        for file in written_files(self.path):
            remove_stale_temporaries(self.path.parent, file.name)
        writer: _FormatWriter
        if self.format == "parquet":
            writer = ParquetEmbeddingsWriter(self.path, provenance, row_group_size)
        elif self.format == "npy":
            writer = NpyEmbeddingsWriter(self.path, provenance)
        else:
            writer = JsonEmbeddingsWriter(self.path, provenance)
        self._writer: _FormatWriter | None = writer

    def write(
        self,
        embeddings: Any,
        ids: Sequence[int],
        paths: Sequence[str | None] | None = None,
        labels: Sequence[int | None] | None = None,
    ) -> None:
        """Write a batch: ``[b, dim]`` embeddings (a numpy array or a tensor) of the items ``ids``, named
        ``paths`` (None: unnamed) with ``labels`` (None: unknown).

        Raises:
            EmbeddingsFileError: a row with NaN or infinity (naming the item), another dimension than the
                first batch's, an item without a path in a JSON file.
            ValueError: lists of other lengths than the embeddings' rows.
            RuntimeError: the writer is closed.
        """
        if self._writer is None:
            raise RuntimeError(f"{self.path}: the writer is closed")
        vectors = _as_float32(embeddings)
        n = len(vectors)
        batch = ItemsBatch(
            [int(i) for i in ids],
            [None] * n if paths is None else [None if p is None else str(p) for p in paths],
            [None] * n if labels is None else [None if v is None else int(v) for v in labels],
            vectors,
        )
        row = first_non_finite_row(vectors)
        if row is not None:
            name = batch.paths[row] if batch.paths[row] is not None else f"id {batch.ids[row]}"
            raise EmbeddingsFileError(
                f"{self.path}: the embedding of item {self.n_items + row} ({name}) holds NaN or infinite values"
            )
        self._writer.write(batch)
        self.n_items += n

    def close(self) -> Path:
        """Finish the files and publish them under their names.

        Returns:
            The file's path.

        Raises:
            EmbeddingsFileError: a file of the same name appeared meanwhile (it is kept; nothing is replaced).
        """
        if self._writer is None:
            return self.path
        writer, self._writer = self._writer, None
        try:
            published = writer.finish()
        except BaseException:
            writer.abort()
            raise
        done: list[Path] = []
        for temporary, final in published:
            try:
                os.link(temporary, final)  # fails on an existing file: never replaces it
            except FileExistsError:
                for path in [
                    *done,
                    *(left for left, _ in published),
                ]:  # ours only: the new names and temporaries
                    path.unlink(missing_ok=True)
                raise EmbeddingsFileError(
                    f"{final}: appeared while it was written; it is kept as it is"
                ) from None
            done.append(final)
        for temporary, _ in published:
            temporary.unlink()
        fsync_directory(self.path.parent)
        return self.path

    def abort(self) -> None:
        """Stop writing and remove the temporary files; nothing is published."""
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.abort()

    def __enter__(self) -> EmbeddingsWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


def read_embeddings_file(path: str | os.PathLike[str]) -> EmbeddingsFile:
    """The embeddings file ``path`` (format by its suffix): its items' ids, paths and labels, its float32
    ``[n, dim]`` matrix (memory-mapped for ``.npy``) and its provenance, every value checked.

    Raises:
        EmbeddingsFileError: no such file, an unknown suffix, or a bad file (one line naming the file and what is
            wrong: a missing column, ragged vectors, a row with NaN, a sidecar disagreeing in count, ...).
    """
    path = Path(path)
    format = format_of(path)
    if not path.is_file():
        raise EmbeddingsFileError(f"{path}: no such embeddings file")
    if format == "parquet":
        return read_parquet_embeddings(path)
    if format == "npy":
        return read_npy_embeddings(path)
    return read_json_embeddings(path)


def _as_float32(embeddings: Any) -> np.ndarray:
    """A ``[b, dim]`` float32 numpy array of a tensor or an array."""
    if hasattr(embeddings, "detach"):
        embeddings = embeddings.detach().float().cpu().numpy()
    array = np.asarray(embeddings, dtype=np.float32)
    if array.ndim != 2:
        raise ValueError(f"embeddings must be a [n, dim] matrix, got shape {array.shape}")
    return array


__all__ = [
    "FORMATS",
    "EmbeddingsFile",
    "EmbeddingsFileError",
    "EmbeddingsWriter",
    "check_format_available",
    "check_writable",
    "format_of",
    "read_embeddings_file",
    "written_files",
]
