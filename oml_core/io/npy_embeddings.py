"""Embeddings as ``.npy``: a float32 ``[n, dim]`` matrix written batch by batch (its header, whose shape is known
only at the end, is rewritten in place: numpy pads it so that the row count may grow), and the sidecar
``<file>.meta.json`` (:mod:`oml_core.io.sidecar`) with the items and the provenance. Read back memory-mapped."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from oml_core.io.embeddings_data import EmbeddingsFile, EmbeddingsFileError, ItemsBatch, check_finite
from oml_core.io.provenance import EmbeddingsProvenance
from oml_core.io.sidecar import SidecarFileWriter, read_sidecar, sidecar_of

#: The dtype of the matrix: little-endian float32.
DTYPE = np.dtype("<f4")


def _header(rows: int, dim: int) -> bytes:
    """The ``.npy`` (version 1.0) header of a C-ordered float32 ``[rows, dim]`` matrix."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": np.lib.format.dtype_to_descr(DTYPE), "fortran_order": False, "shape": (rows, dim)}
    )
    return buffer.getvalue()


class NpyEmbeddingsWriter(SidecarFileWriter):
    """Writes ``path`` and its sidecar through temporary files beside them (published by the caller).

    Args:
        path: The ``.npy`` file.
        provenance: What made the embeddings (None: not recorded).
    """

    def __init__(self, path: Path, provenance: EmbeddingsProvenance | None) -> None:
        super().__init__(path, provenance)
        self._dim: int | None = None
        self._header_size = 0

    def write(self, batch: ItemsBatch) -> None:
        """Append ``batch``'s vectors to the matrix and its items to the sidecar's lists.

        Raises:
            EmbeddingsFileError: vectors of another dimension than the first batch's.
        """
        dim = batch.vectors.shape[1]
        if self._dim is None:
            self._dim = dim
            header = _header(0, dim)
            self._header_size = len(header)
            self._file.write(header)
        elif dim != self._dim:
            raise EmbeddingsFileError(
                f"{self.path}: vectors of dimension {dim} after vectors of dimension {self._dim}"
            )
        self._file.write(np.ascontiguousarray(batch.vectors, dtype=DTYPE).tobytes())
        self._keep_items(batch)

    def finish(self) -> list[tuple[Path, Path]]:
        """Write the final header and the sidecar, flushed to disk.

        Returns:
            ``(temporary, final)`` pairs, in the order to publish them: the sidecar first, so that the matrix
            never appears without it.
        """
        dim = 0 if self._dim is None else self._dim
        header = _header(len(self._ids), dim)
        if self._dim is None:
            self._file.write(header)
        elif len(header) != self._header_size:  # numpy pads the header for growth; never seen otherwise
            raise EmbeddingsFileError(
                f"{self.path}: the header of {len(self._ids)} rows does not fit in place"
            )
        else:
            self._file.seek(0)
            self._file.write(header)
        return self._finish_with_sidecar(dim)


def read_npy_embeddings(path: Path) -> EmbeddingsFile:
    """The ``.npy`` embeddings file ``path`` (memory-mapped) with its sidecar's items and provenance.

    Raises:
        EmbeddingsFileError: not a ``.npy`` file, not a float32 ``[n, dim]`` matrix, a sidecar missing or
            disagreeing in count or dimension, a row with NaN (named).
    """
    sidecar = read_sidecar(sidecar_of(path), path)
    try:
        matrix = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise EmbeddingsFileError(f"{path}: not a readable .npy file ({type(e).__name__}: {e})") from e
    if matrix.ndim != 2 or matrix.dtype != DTYPE:
        raise EmbeddingsFileError(
            f"{path}: holds a {matrix.dtype} array of shape {matrix.shape}, not a float32 [n, dim] matrix"
        )
    if len(matrix) != len(sidecar.ids) or matrix.shape[1] != sidecar.dim:
        raise EmbeddingsFileError(
            f"{path}: its matrix has {len(matrix)} rows of dimension {matrix.shape[1]}, its sidecar "
            f"{sidecar_of(path).name} lists {len(sidecar.ids)} items of dimension {sidecar.dim}"
        )
    check_finite(path, matrix, sidecar.paths)
    return EmbeddingsFile(path, "npy", sidecar.ids, sidecar.paths, sidecar.labels, matrix, sidecar.provenance)


__all__ = ["NpyEmbeddingsWriter", "read_npy_embeddings"]
