"""Cache files of embeddings (of :func:`~oml_core.inference.flat.inference_on_dataframe` and of the
post-processing pipelines): the embeddings stored with the key of everything they were computed from, so that a
stale file is never read."""

from __future__ import annotations

import hashlib
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

#: Bump when the content of the cache files changes meaning, so that older files are computed again.
CACHE_FORMAT = 1


def _update(digest: Any, part: bytes) -> None:
    """Feed ``part`` to ``digest`` after its length, so that the concatenation of the parts is unambiguous."""
    digest.update(len(part).to_bytes(8, "little"))
    digest.update(part)


def _tensor_bytes(tensor: Tensor) -> bytes:
    """The raw bytes of ``tensor``'s values (any dtype), in row-major order."""
    return tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def embeddings_cache_key(dataframe_path: Path, extractor: nn.Module, transforms: Any) -> str:
    """The SHA-256 hex digest of what the embeddings of a dataframe depend on.

    It covers :data:`CACHE_FORMAT`, the absolute path and the bytes of the dataframe file (its rows' images
    are found relative to its folder), the extractor's class name, every entry of its ``state_dict`` (name,
    dtype, shape and the tensor's bytes) and ``repr(transforms)``. Not covered: the image files' content, the
    batch size, the device and the precision.

    Args:
        dataframe_path: The dataframe file.
        extractor: The model that computes the embeddings.
        transforms: The transforms applied to the images (their ``repr`` is hashed).

    Returns:
        64 hex digits.

    Raises:
        OSError: the dataframe file cannot be read.
    """
    digest = hashlib.sha256()
    _update(digest, str(CACHE_FORMAT).encode())
    _update(digest, str(Path(dataframe_path).absolute()).encode())
    _update(digest, Path(dataframe_path).read_bytes())
    _update(digest, type(extractor).__qualname__.encode())
    for name, tensor in extractor.state_dict().items():
        _update(digest, f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        _update(digest, _tensor_bytes(tensor))
    _update(digest, repr(transforms).encode())
    return digest.hexdigest()


def _read(path: Path, key: str, n_rows: int) -> Tensor | None:
    """The ``[n_rows, dim]`` embeddings stored in ``path`` for ``key``; ``None`` (with a warning naming the file)
    when it cannot be read, was written for another key or holds another number of embeddings."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated, corrupt or foreign file: computed again
        warnings.warn(
            f"{path}: unreadable embeddings cache ({type(e).__name__}: {e}); computing the embeddings again",
            stacklevel=4,
        )
        return None
    embeddings = payload.get("embeddings") if isinstance(payload, dict) else None
    fits = isinstance(embeddings, Tensor) and embeddings.ndim == 2 and len(embeddings) == n_rows
    if not fits or payload.get("key") != key:
        warnings.warn(
            f"{path}: the embeddings cache was written for other data, another extractor or other transforms "
            "(another key); computing the embeddings again",
            stacklevel=4,
        )
        return None
    return embeddings


def _write(path: Path, key: str, embeddings: Tensor) -> None:
    """Write ``embeddings`` and ``key`` to ``path`` atomically (a partial file, renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        torch.save({"key": key, "embeddings": embeddings.detach().cpu().contiguous()}, partial)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def cached_embeddings(path: Path, key: str, n_rows: int, compute: Callable[[], Tensor]) -> Tensor:
    """The embeddings of the cache file ``path`` when it exists and was written for ``key``; else ``compute()``,
    written to ``path`` (atomically: into a partial file next to it, then renamed into place; missing parent
    folders are created).

    Args:
        path: The cache file.
        key: The key of the embeddings (:func:`embeddings_cache_key`), stored in the file with them.
        n_rows: The number of embeddings expected.
        compute: Computes the ``[n_rows, dim]`` embeddings.

    Returns:
        The embeddings, on the CPU when read back.

    Warns:
        UserWarning: naming ``path``, when it exists but cannot be read (``torch.load(weights_only=True)``),
        was written for another key or does not hold ``n_rows`` embeddings: they are computed again.

    Raises:
        OSError: the file cannot be written.
    """
    embeddings = _read(path, key, n_rows) if path.is_file() else None
    if embeddings is None:
        embeddings = compute()
        _write(path, key, embeddings)
    return embeddings


__all__ = ["CACHE_FORMAT", "cached_embeddings", "embeddings_cache_key"]
