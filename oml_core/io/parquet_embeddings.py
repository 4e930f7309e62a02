"""Embeddings as Parquet (pyarrow, a dependency of oml-core): the columns
``id`` (int64), ``path`` (string, null: unnamed), ``label`` (int64, null: unknown) and ``embedding`` (a float32
fixed-size list of ``dim``), written in row groups by a streaming writer (at most one row group is held; by
default a row group holds :data:`ROW_GROUP_BYTES` of vectors, whatever ``dim``), with the key-value metadata
``oml.format``, ``oml.version``, ``oml.dim`` and ``oml.provenance`` (the JSON of the extractor spec, the weights'
sha256 and the transforms)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow

# the submodules, reached as pyarrow.compute and pyarrow.parquet
import pyarrow.compute  # noqa: F401
import pyarrow.parquet  # noqa: F401

from oml_core.io.embeddings_data import (
    EMBEDDINGS_FORMAT,
    EMBEDDINGS_VERSION,
    EmbeddingsFile,
    EmbeddingsFileError,
    ItemsBatch,
    check_finite,
    checked_items,
)
from oml_core.io.provenance import EmbeddingsProvenance
from oml_core.utils.atomic import temporary_path_for

#: The columns of the file, the vector last.
COLUMNS = ("id", "path", "label", "embedding")
#: The bytes of vectors per row group by default (32,768 vectors of 512 floats), which bounds what is held.
ROW_GROUP_BYTES = 64 * 2**20
#: The key-value metadata keys.
FORMAT_KEY, VERSION_KEY, DIM_KEY, PROVENANCE_KEY = (
    b"oml.format",
    b"oml.version",
    b"oml.dim",
    b"oml.provenance",
)


class ParquetEmbeddingsWriter:
    """Writes ``path`` through a temporary file beside it (published by the caller), one row group of
    ``row_group_size`` rows at a time.

    Args:
        path: The ``.parquet`` file.
        provenance: What made the embeddings (None: not recorded).
        row_group_size: Rows per row group (the last may have fewer); None: as many as hold
            :data:`ROW_GROUP_BYTES` of vectors.

    Raises:
        EmbeddingsFileError: pyarrow is not installed.
    """

    def __init__(
        self,
        path: Path,
        provenance: EmbeddingsProvenance | None,
        row_group_size: int | None = None,
    ) -> None:
        if row_group_size is not None and row_group_size < 1:
            raise ValueError(f"row_group_size must be >= 1, got {row_group_size}")
        self.pa = pyarrow
        self.path, self.provenance = path, provenance
        self._row_group_size = row_group_size
        self.temporary = temporary_path_for(path)
        self._writer: Any = None
        self._dim: int | None = None
        self._pending: list[ItemsBatch] = []
        self._pending_rows = 0

    def _schema(self, dim: int) -> Any:
        pa = self.pa
        provenance = None if self.provenance is None else self.provenance.to_json()
        return pa.schema(
            [
                pa.field("id", pa.int64(), nullable=False),
                pa.field("path", pa.string()),
                pa.field("label", pa.int64()),
                pa.field("embedding", pa.list_(pa.float32(), dim), nullable=False),
            ],
            metadata={
                FORMAT_KEY: EMBEDDINGS_FORMAT.encode(),
                VERSION_KEY: str(EMBEDDINGS_VERSION).encode(),
                DIM_KEY: str(dim).encode(),
                PROVENANCE_KEY: json.dumps(provenance).encode(),
            },
        )

    def write(self, batch: ItemsBatch) -> None:
        """Buffer ``batch``; every full row group is written out.

        Raises:
            EmbeddingsFileError: vectors of another dimension than the first batch's.
        """
        dim = batch.vectors.shape[1]
        if self._writer is None:
            self._dim = dim
            self._writer = self.pa.parquet.ParquetWriter(str(self.temporary), self._schema(dim))
            if self._row_group_size is None:
                self._row_group_size = max(1, ROW_GROUP_BYTES // (4 * max(dim, 1)))
        elif dim != self._dim:
            raise EmbeddingsFileError(
                f"{self.path}: vectors of dimension {dim} after vectors of dimension {self._dim}"
            )
        self._pending.append(batch)
        self._pending_rows += len(batch.ids)
        if self._pending_rows >= self.row_group_size:
            self._flush(final=False)

    @property
    def row_group_size(self) -> int:
        """Rows per row group (known from the first batch when not given)."""
        return self._row_group_size or 1

    def _flush(self, final: bool) -> None:
        """Write the pending rows in full row groups (and, when ``final``, the rest)."""
        ids = [i for batch in self._pending for i in batch.ids]
        paths = [p for batch in self._pending for p in batch.paths]
        labels = [label for batch in self._pending for label in batch.labels]
        vectors = np.concatenate([batch.vectors for batch in self._pending]).astype(np.float32, copy=False)
        cut = len(ids) if final else len(ids) - len(ids) % self.row_group_size
        if cut:
            pa = self.pa
            embedding = pa.FixedSizeListArray.from_arrays(pa.array(vectors[:cut].reshape(-1)), self._dim)
            table = pa.Table.from_arrays(
                [
                    pa.array(ids[:cut], pa.int64()),
                    pa.array(paths[:cut], pa.string()),
                    pa.array(labels[:cut], pa.int64()),
                    embedding,
                ],
                schema=self._writer.schema,
            )
            self._writer.write_table(table, row_group_size=self.row_group_size)
        rest = ItemsBatch(ids[cut:], paths[cut:], labels[cut:], vectors[cut:])
        self._pending, self._pending_rows = ([rest] if len(rest.ids) else []), len(rest.ids)

    def finish(self) -> list[tuple[Path, Path]]:
        """Write the last row group and the footer, flushed to disk.

        Returns:
            The ``(temporary, final)`` pair to publish.
        """
        if self._writer is None:  # no item: an empty file of dimension 0
            self._dim = 0
            self._writer = self.pa.parquet.ParquetWriter(str(self.temporary), self._schema(0))
        if self._pending:
            self._flush(final=True)
        self._writer.close()
        with open(self.temporary, "rb") as file:
            os.fsync(file.fileno())
        return [(self.temporary, self.path)]

    def abort(self) -> None:
        """Close and remove the temporary file."""
        if self._writer is not None:
            self._writer.close()
        self.temporary.unlink(missing_ok=True)


def read_parquet_embeddings(path: Path) -> EmbeddingsFile:
    """The Parquet embeddings file ``path``: its items, its vectors as a float32 matrix (read a row group at a
    time into it) and the provenance of its metadata (None when it has none: a file of another tool). Besides
    oml's fixed-size lists, the ``embedding`` column may be variable lists of floats, all of one length.

    Raises:
        EmbeddingsFileError: not a Parquet file, a missing column, an ``embedding`` column that
            is not lists of floats, ragged vectors or a null one (naming the row), a row with NaN (naming it),
            bad ids, paths, labels or provenance.
    """
    pa = pyarrow
    try:
        parquet = pa.parquet.ParquetFile(str(path))
    except (OSError, pa.ArrowException) as e:
        raise EmbeddingsFileError(f"{path}: not a readable Parquet file ({type(e).__name__}: {e})") from e
    schema = parquet.schema_arrow
    missing = [column for column in COLUMNS if column not in schema.names]
    if missing:
        raise EmbeddingsFileError(
            f"{path}: has no column {missing[0]!r} (its columns: {', '.join(schema.names)})"
        )
    vector_type = schema.field("embedding").type
    if not (
        (pa.types.is_fixed_size_list(vector_type) or pa.types.is_list(vector_type))
        and pa.types.is_floating(vector_type.value_type)
    ):
        raise EmbeddingsFileError(f"{path}: its column 'embedding' is {vector_type}, not lists of floats")
    n = parquet.metadata.num_rows
    dim = vector_type.list_size if pa.types.is_fixed_size_list(vector_type) else None
    matrix: np.ndarray | None = None
    ids: list[Any] = []
    paths: list[Any] = []
    labels: list[Any] = []
    for group in range(parquet.num_row_groups):
        table = parquet.read_row_group(group, columns=list(COLUMNS))
        start = len(ids)
        vectors = table.column("embedding").combine_chunks()
        if vectors.null_count:
            row = start + int(np.flatnonzero(vectors.is_null().to_numpy(zero_copy_only=False))[0])
            raise EmbeddingsFileError(f"{path}: row {row} has no vector (null)")
        lengths = pa.compute.list_value_length(vectors).to_numpy(zero_copy_only=False)
        dim = int(lengths[0]) if dim is None and len(lengths) else dim
        if len(lengths) and (lengths != dim).any():
            row = int(np.flatnonzero(lengths != dim)[0])
            raise EmbeddingsFileError(
                f"{path}: ragged vectors: row {start + row} has {int(lengths[row])} values, row 0 has {dim}"
            )
        if matrix is None:
            matrix = np.empty((n, dim or 0), dtype=np.float32)
        values = vectors.flatten().to_numpy(zero_copy_only=False)
        matrix[start : start + len(vectors)] = values.reshape(len(vectors), dim or 0)
        ids += table.column("id").to_pylist()
        paths += table.column("path").to_pylist()
        labels += table.column("label").to_pylist()
    if matrix is None:
        matrix = np.empty((0, dim or 0), dtype=np.float32)
    ids, paths, labels = checked_items(path, ids, paths, labels, n)
    check_finite(path, matrix, paths)
    return EmbeddingsFile(
        path, "parquet", ids, paths, labels, matrix, _provenance(path, schema.metadata or {})
    )


def _provenance(path: Path, metadata: dict[bytes, bytes]) -> EmbeddingsProvenance | None:
    """The provenance of the file's key-value metadata (None: it has none, or null)."""
    if PROVENANCE_KEY not in metadata:
        return None
    try:
        data = json.loads(metadata[PROVENANCE_KEY])
        return None if data is None else EmbeddingsProvenance.from_json(data)
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as e:
        raise EmbeddingsFileError(f"{path}: its metadata {PROVENANCE_KEY.decode()} is not valid: {e}") from e


__all__ = [
    "COLUMNS",
    "ROW_GROUP_BYTES",
    "ParquetEmbeddingsWriter",
    "read_parquet_embeddings",
]
