"""The sidecar of an ``.npy`` or ``.json`` embeddings file, ``<file>.meta.json``: the items' ids, paths and labels
and the provenance of the embeddings, which the matrix (or OML's ``{path: [feature, ...]}``) cannot hold::

    {"format": "oml-embeddings", "version": 1, "n_items": n, "dim": d,
     "ids": [...], "paths": [...], "labels": [...], "provenance": {extractor, weights_sha256, transforms} | null}
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from oml_core.io.embeddings_data import (
    EMBEDDINGS_FORMAT,
    EMBEDDINGS_VERSION,
    EmbeddingsFileError,
    ItemsBatch,
    checked_items,
)
from oml_core.io.provenance import EmbeddingsProvenance
from oml_core.utils.atomic import temporary_path_for
from oml_core.utils.documents import checked_header

#: What is appended to the name of the file to name its sidecar.
SIDECAR_SUFFIX = ".meta.json"


def sidecar_of(path: Path) -> Path:
    """``<path>.meta.json``."""
    return path.with_name(path.name + SIDECAR_SUFFIX)


@dataclass(frozen=True)
class Sidecar:
    """What a sidecar says of its file's items.

    Attributes:
        ids: The items' ids.
        paths: Their names (None: unnamed).
        labels: Their labels (None: unknown).
        dim: The size of every vector.
        provenance: What made them (None: not recorded).
    """

    ids: list[int]
    paths: list[str | None]
    labels: list[int | None]
    dim: int
    provenance: EmbeddingsProvenance | None

    def to_bytes(self) -> bytes:
        """The sidecar's JSON."""
        data = {
            "format": EMBEDDINGS_FORMAT,
            "version": EMBEDDINGS_VERSION,
            "n_items": len(self.ids),
            "dim": self.dim,
            "ids": self.ids,
            "paths": self.paths,
            "labels": self.labels,
            "provenance": None if self.provenance is None else self.provenance.to_json(),
        }
        return json.dumps(data, allow_nan=False).encode("utf-8")


class SidecarFileWriter:
    """The part of a writer of a data file with a sidecar (``.npy``, OML's JSON) that both share: the data file
    and the sidecar written through temporary files beside them (published by the caller, the sidecar first), the
    items' ids, paths and labels kept for the sidecar.

    Args:
        path: The data file.
        provenance: What made the embeddings (None: not recorded).
    """

    def __init__(self, path: Path, provenance: EmbeddingsProvenance | None) -> None:
        self.path, self.provenance = path, provenance
        self.temporary = temporary_path_for(path)
        self.sidecar_temporary = temporary_path_for(sidecar_of(path))
        self._file: BinaryIO = open(self.temporary, "wb")  # closed by finish or abort
        self._ids: list[int] = []
        self._paths: list[str | None] = []
        self._labels: list[int | None] = []

    def _keep_items(self, batch: ItemsBatch) -> None:
        """Keep ``batch``'s ids, paths and labels for the sidecar."""
        self._ids += batch.ids
        self._paths += batch.paths
        self._labels += batch.labels

    def _finish_with_sidecar(self, dim: int) -> list[tuple[Path, Path]]:
        """Flush the data file to disk and close it, then write the sidecar of its items (of dimension ``dim``).

        Returns:
            ``(temporary, final)`` pairs in the order to publish them: the sidecar first, so that the data file
            never appears without it.
        """
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        sidecar = Sidecar(self._ids, self._paths, self._labels, dim, self.provenance)
        with open(self.sidecar_temporary, "wb") as file:
            file.write(sidecar.to_bytes())
            file.flush()
            os.fsync(file.fileno())
        return [(self.sidecar_temporary, sidecar_of(self.path)), (self.temporary, self.path)]

    def abort(self) -> None:
        """Close and remove the temporary files. Closing flushes what the file still buffers: those bytes are
        being thrown away, so failing to write them (a full disk, the usual reason to abort) is not an error
        of its own; the temporaries are removed in any case."""
        try:
            with contextlib.suppress(OSError):
                self._file.close()
        finally:
            for temporary in (self.temporary, self.sidecar_temporary):
                temporary.unlink(missing_ok=True)


def read_sidecar(path: Path, data_file: Path) -> Sidecar:
    """The sidecar ``path`` of ``data_file``, checked (format, version, items, provenance).

    Raises:
        EmbeddingsFileError: no such file, not JSON, another format or version, bad items or provenance (the
            message names the sidecar).
    """
    if not path.is_file():
        raise EmbeddingsFileError(
            f"{data_file}: its sidecar {path.name} (ids, paths, labels, provenance) is missing beside it"
        )
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise EmbeddingsFileError(f"{path}: not a readable sidecar ({type(e).__name__}: {e})") from e
    data = checked_header(
        data,
        path,
        EMBEDDINGS_FORMAT,
        EMBEDDINGS_VERSION,
        "a sidecar of oml embeddings",
        "a sidecar",
        EmbeddingsFileError,
    )
    n, dim = data.get("n_items"), data.get("dim")
    if not isinstance(n, int) or n < 0 or not isinstance(dim, int) or dim < 0:
        raise EmbeddingsFileError(f"{path}: n_items and dim must be integers >= 0, got {n!r} and {dim!r}")
    ids, paths, labels = checked_items(path, data.get("ids"), data.get("paths"), data.get("labels"), n)
    try:
        provenance = (
            None if data.get("provenance") is None else EmbeddingsProvenance.from_json(data["provenance"])
        )
    except ValueError as e:
        raise EmbeddingsFileError(f"{path}: {e}") from e
    return Sidecar(ids, paths, labels, dim, provenance)


__all__ = ["SIDECAR_SUFFIX", "Sidecar", "read_sidecar", "sidecar_of"]
