"""The items of a gallery index as columns (id, path, label, knn backend key, in the order of the embeddings),
kept in an Arrow table: read memory-mapped from the generation's ``items.arrow`` (format version 5), so that an
index whose items do not fit in memory opens, and changed by appending tables (no copy) or filtering (a copy of
the rows kept).

``items.arrow`` is an Arrow IPC file (uncompressed, written in record batches of :data:`BATCH_ROWS` rows) of the
columns ``id`` (int64), ``path`` (large_string, null: an item without a name), ``label`` (int64, null: unknown)
and ``key`` (int64, increasing), with the schema metadata ``format`` (:data:`ITEMS_FORMAT`), ``version`` and
``uid`` (that of the generation's data, :func:`~oml_core.index.manifest.content_uid`). It is opened with
``pyarrow.memory_map``: its columns are views of a read-only shared mapping, which the process's data limit does
not count and the kernel pages in as rows are read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch import Tensor

from oml_core.index.errors import GalleryIndexError
from oml_core.utils.atomic import atomic_write

#: The file of a generation's items (format version 5).
ITEMS_TABLE_FILE = "items.arrow"
#: Its format tag (in the schema's metadata).
ITEMS_FORMAT = "oml-gallery-items"
#: Rows per record batch written, and per chunk of the content digest.
BATCH_ROWS = 65536
#: The columns and their types.
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("path", pa.large_string()),
        pa.field("label", pa.int64()),
        pa.field("key", pa.int64(), nullable=False),
    ]
)


class ItemTable:
    """The items of an index (see the module), in row order.

    Args:
        table: A table of :data:`SCHEMA`'s columns (None: no items).
    """

    def __init__(self, table: pa.Table | None = None) -> None:
        self._table = SCHEMA.empty_table() if table is None else table
        self._ids: np.ndarray | None = None
        self._keys: Tensor | None = None

    @classmethod
    def of(
        cls, ids: Sequence[int], paths: Sequence[str | None], labels: Sequence[int | None], keys: Tensor
    ) -> ItemTable:
        """The items of the given columns (of one length)."""
        arrays = [
            pa.array(ids, pa.int64()),
            pa.array(paths, pa.large_string()),
            pa.array(labels, pa.int64()),
            pa.array(keys.numpy(), pa.int64()),
        ]
        return cls(pa.Table.from_arrays(arrays, schema=SCHEMA))

    def __len__(self) -> int:
        return self._table.num_rows

    def append(self, other: ItemTable) -> None:
        """Append the items of ``other`` after these (their tables are chained, not copied)."""
        self._table = pa.concat_tables([self._table, other._table])
        self._ids, self._keys = None, None

    def keep(self, kept: np.ndarray) -> None:
        """Keep only the rows where the ``[len(self)]`` bool mask ``kept`` is true, in their order (a copy of
        them, in memory)."""
        self._table = self._table.filter(pa.array(kept, pa.bool_())).combine_chunks()
        self._ids, self._keys = None, None

    @property
    def id_array(self) -> np.ndarray:
        """``[n]`` int64 ids (a view of the mapping when the table is one chunk, else a copy made once)."""
        if self._ids is None:
            self._ids = _int64s(self._table.column("id"))
        return self._ids

    @property
    def keys(self) -> Tensor:
        """``[n]`` int64 knn backend keys, increasing."""
        if self._keys is None:
            self._keys = torch.from_numpy(_int64s(self._table.column("key")).copy())
        return self._keys

    @property
    def ids(self) -> list[int]:
        """The ids, as a list."""
        return self._table.column("id").to_pylist()

    @property
    def paths(self) -> list[str | None]:
        """The names (None: none), as a list."""
        return self._table.column("path").to_pylist()

    @property
    def labels(self) -> list[int | None]:
        """The labels (None: unknown), as a list."""
        return self._table.column("label").to_pylist()

    def max_id(self) -> int | None:
        """The largest id (None: no items)."""
        value = pc.max(self._table.column("id")).as_py() if len(self) else None
        return None if value is None else int(value)

    def rows(self, positions: Sequence[int]) -> list[tuple[int, str | None, int | None]]:
        """The id, name and label of the items at ``positions``, in their order."""
        taken = self._table.take(pa.array(positions, pa.int64()))
        return list(
            zip(
                taken.column("id").to_pylist(),
                taken.column("path").to_pylist(),
                taken.column("label").to_pylist(),
            )
        )

    def records(self) -> Iterator[dict[str, list[Any]]]:
        """The columns ``ids``, ``paths``, ``labels``, ``keys`` as lists, :data:`BATCH_ROWS` rows at a time."""
        for batch in self._table.to_batches(max_chunksize=BATCH_ROWS):
            yield {
                "ids": batch.column("id").to_pylist(),
                "paths": batch.column("path").to_pylist(),
                "labels": batch.column("label").to_pylist(),
                "keys": batch.column("key").to_pylist(),
            }

    def write(self, path: Path, uid: str, version: int) -> None:
        """Write the items into the Arrow IPC file ``path`` atomically, a record batch of :data:`BATCH_ROWS`
        rows at a time, with ``uid`` and ``version`` in the schema's metadata."""
        metadata = {"format": ITEMS_FORMAT, "version": str(version), "uid": uid}
        schema = SCHEMA.with_metadata(metadata)
        with atomic_write(path) as file, pa.ipc.new_file(file, schema) as writer:
            for batch in self._table.to_batches(max_chunksize=BATCH_ROWS):
                writer.write_batch(pa.RecordBatch.from_arrays(batch.columns, schema=schema))

    @classmethod
    def read(cls, path: Path, n_items: int) -> tuple[ItemTable, str | None]:
        """The items of the ``items.arrow`` file ``path``, memory-mapped, and the uid they carry, checked: the
        format, :data:`SCHEMA`'s columns, ``n_items`` rows, distinct ids and increasing keys.

        Raises:
            GalleryIndexError: no such file, not an Arrow IPC file, another format, other columns, another
                number of rows, ids given twice, keys not increasing (naming the file).
        """
        if not path.is_file():
            raise GalleryIndexError(f"{path}: no such file; the index's items are missing")
        try:
            with pa.ipc.open_file(pa.memory_map(str(path), "r")) as reader:
                table = reader.read_all()
        except (OSError, pa.ArrowException) as e:
            raise GalleryIndexError(f"{path}: not a readable Arrow file of gallery items ({e})") from e
        metadata = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        if metadata.get("format") != ITEMS_FORMAT:
            raise GalleryIndexError(f"{path}: not gallery items (format {metadata.get('format')!r})")
        if [(f.name, f.type) for f in table.schema] != [(f.name, f.type) for f in SCHEMA]:
            raise GalleryIndexError(
                f"{path}: its columns are {table.schema.names}, gallery items have {SCHEMA.names}"
            )
        if table.num_rows != n_items:
            raise GalleryIndexError(f"{path}: holds {table.num_rows} items, the index has {n_items}")
        items = cls(table)
        items.check(path)
        return items, metadata.get("uid")

    def check(self, path: Path) -> None:
        """Check that the ids and keys have no nulls, the ids are distinct and the keys increase.

        Raises:
            GalleryIndexError: one that does not, naming ``path`` (the file the items were read from).
        """
        if self._table.column("id").null_count or self._table.column("key").null_count:
            raise GalleryIndexError(f"{path}: not valid gallery items (an id or a key is null)")
        ids, keys = self.id_array, self.keys.numpy()
        if len(np.unique(ids)) != len(ids):
            raise GalleryIndexError(f"{path}: not valid gallery items (ids must be distinct)")
        if len(keys) > 1 and not bool((keys[1:] > keys[:-1]).all()):
            raise GalleryIndexError(f"{path}: not valid gallery items (keys must be increasing integers)")


class RowsById:
    """The row of every item by id, looked up in the ids sorted once (no dict of the whole gallery): what
    :func:`~oml_core.index.changes.net_change` and the index's changes read.

    Args:
        ids: ``[n]`` int64 distinct ids, in row order.
    """

    def __init__(self, ids: np.ndarray) -> None:
        self._order = np.argsort(ids, kind="stable")
        self._sorted = ids[self._order]

    def get(self, value: Any) -> int | None:
        """The row of the id ``value`` (None: no item has it)."""
        if not isinstance(value, int | np.integer) or isinstance(value, bool):
            return None
        place = int(np.searchsorted(self._sorted, value))
        if place < len(self._sorted) and self._sorted[place] == value:
            return int(self._order[place])
        return None

    def __contains__(self, value: object) -> bool:
        return self.get(value) is not None

    def __getitem__(self, value: int) -> int:
        row = self.get(value)
        if row is None:
            raise KeyError(value)
        return row


def _int64s(column: pa.ChunkedArray) -> np.ndarray:
    """A column of int64 without nulls as a read-only numpy array (a view of its one chunk, else a copy)."""
    if column.num_chunks == 1:
        return column.chunk(0).to_numpy(zero_copy_only=True)
    return column.to_numpy() if column.num_chunks else np.zeros(0, dtype=np.int64)


__all__ = [
    "BATCH_ROWS",
    "ITEMS_FORMAT",
    "ITEMS_TABLE_FILE",
    "SCHEMA",
    "ItemTable",
    "RowsById",
]
