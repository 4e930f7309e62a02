"""Rows of float32 kept in a raw ``.npy`` file beside a saved index and read back memory-mapped: an index's
embeddings then open without being read into memory, so that one larger than the machine's memory opens and
searches (the pages of the file are read as a search touches them, and the kernel can drop them again).

The file is written a chunk of rows at a time and read back read-only (``mmap_mode="r"``: a shared, read-only
mapping, which neither ``ulimit -d`` nor the process's anonymous memory counts). It is sealed as oml's torch files
are (:mod:`oml_core.utils.digest`): the sha256 of its bytes, computed while they are written, follows them as a
digest record (numpy reads the array by the shape of its header and ignores what follows), so that a manifest
reads its digest without hashing it (:func:`~oml_core.utils.digest.sealed_digest`) and its opening checks it,
streaming (:func:`~oml_core.utils.digest.verify_checkpoint`).
"""

from __future__ import annotations

import hashlib
import io
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from oml_core.utils.atomic import atomic_write
from oml_core.utils.digest import DIGEST_MAGIC, DigestStatus, sealed_digest, verify_checkpoint

#: Rows written at a time.
WRITE_ROWS = 65536
#: Rows checked at a time (:func:`all_finite`): a few MiB of temporaries for any gallery.
CHECK_ROWS = 8192


def write_rows(path: Path, rows: Tensor | Sequence[Tensor], chunk_rows: int = WRITE_ROWS) -> str:
    """Write the ``[n, dim]`` rows ``rows`` (a tensor, or parts of one dimension written one after the other) as
    float32 into the ``.npy`` file ``path`` atomically, ``chunk_rows`` rows at a time (no whole copy of ``rows``
    is made), sealed with its digest record.

    Returns:
        The sha256 hex digest it is sealed with (that of its bytes before the record).
    """
    parts = [rows] if isinstance(rows, Tensor) else list(rows)
    n = sum(len(part) for part in parts)
    dim = int(parts[0].shape[1]) if parts else 0
    if any(part.ndim != 2 or part.shape[1] != dim for part in parts):
        raise ValueError(f"{path}: the parts of rows to write must all be [n, {dim}]")
    digest = hashlib.sha256()
    with atomic_write(path) as file:

        def write(data: bytes | memoryview) -> None:
            digest.update(data)
            file.write(data)

        header = {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False}
        write(_header_bytes({**header, "shape": (n, dim)}))
        for chunk in float32_chunks(parts, chunk_rows):
            write(chunk)
        sealed = digest.hexdigest()
        file.write(DIGEST_MAGIC + sealed.encode("ascii"))
    return sealed


def float32_chunks(parts: Sequence[Tensor], chunk_rows: int = WRITE_ROWS) -> Iterator[memoryview]:
    """The bytes of the rows of ``parts`` (in order) as little-endian float32, ``chunk_rows`` rows at a time: what
    :func:`write_rows` writes and a digest of the rows reads, never a copy of the whole."""
    for part in parts:
        for start in range(0, len(part), chunk_rows):
            chunk = part[start : start + chunk_rows].detach().cpu().to(torch.float32).contiguous()
            yield chunk.numpy().astype("<f4", copy=False).data.cast("B")


def _header_bytes(header: dict[str, object]) -> bytes:
    """The ``.npy`` header of version 1.0 (its magic string, ``header``, padded as numpy pads it)."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


def open_rows(path: Path, sha256: str, shape: tuple[int, int]) -> Tensor:
    """The rows of the ``.npy`` file ``path``, memory-mapped read-only, as a float32 ``[n, dim]`` tensor that
    shares the mapping (never write into it: a change is made on a copy); the file is first checked, streaming,
    to be sealed with the digest ``sha256`` and to have it.

    Raises:
        ValueError: no such file, sealed with another digest or none (a foreign file), not a float32 array of
            ``shape``; a :class:`~oml_core.utils.digest.CorruptCheckpointError` (a ``ValueError``): its bytes
            are not the ones written. The message names the file.
    """
    if not path.is_file():
        raise ValueError(f"{path}: no such file, although the index's state beside it names it")
    if verify_checkpoint(path) is DigestStatus.UNVERIFIED or sealed_digest(path) != sha256:
        raise ValueError(
            f"{path}: not the embeddings saved with the index (its digest is not the one recorded)"
        )
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not a readable .npy file ({e})") from e
    if array.dtype != np.dtype("<f4") or array.shape != tuple(shape):
        raise ValueError(
            f"{path}: a {array.dtype} array of shape {array.shape}, the index has float32 {shape}"
        )
    with warnings.catch_warnings():  # read-only on purpose: the tensor shares the read-only mapping
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def all_finite(rows: Tensor, chunk_rows: int = CHECK_ROWS) -> bool:
    """Whether every value of ``rows`` is finite, checked ``chunk_rows`` rows at a time (a mapped gallery is read
    page by page, and the temporaries stay a few MiB whatever its size)."""
    return all(
        bool(torch.isfinite(rows[start : start + chunk_rows]).all())
        for start in range(0, len(rows), chunk_rows)
    )


__all__ = ["CHECK_ROWS", "WRITE_ROWS", "all_finite", "float32_chunks", "open_rows", "write_rows"]
