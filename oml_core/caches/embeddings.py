"""Cache files of embeddings (of :func:`~oml_core.inference.flat.inference_on_dataframe`, of OML's
:func:`~oml_core.inference.cached.inference_cached` and of the post-processing pipelines): the embeddings stored
with the key of everything they were computed from, so that a stale file is never read.

A cache file is a ``torch.save`` of ``{"format": CACHE_MARKER, "version": CACHE_FORMAT, "key": key,
"embeddings": tensor}``. A file at the cache path that is not one (a checkpoint, a text file, anything that
cannot be read as a cache) is never overwritten: :class:`NotAnEmbeddingsCacheError`. A cache written for
another key is replaced, atomically (a temporary file in the same folder, flushed to disk, renamed into place),
so that a crash never leaves a truncated cache. The file carries the sha256 of its bytes, checked before it is
read (:mod:`oml_core.utils.digest`): a damaged cache is never read as embeddings.
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Callable, Sized
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

from oml_core.utils.atomic import atomic_torch_save
from oml_core.utils.digest import CorruptCheckpointError, verify_checkpoint

#: Bump when the content of the cache files changes meaning, so that older files are computed again.
CACHE_FORMAT = 1
#: The value under ``"format"`` that marks a file as an oml embeddings cache.
CACHE_MARKER = "oml-core embeddings cache"
#: The entries of the cache files written before :data:`CACHE_MARKER` (still recognised as caches).
_LEGACY_ENTRIES = frozenset({"key", "embeddings"})


class NotAnEmbeddingsCacheError(FileExistsError):
    """The cache path holds something that is not an oml embeddings cache; it is left untouched."""


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
    are found relative to its folder; a folder of Parquet files: the name and bytes of each of its files), the
    extractor's class name, every entry of its ``state_dict`` (name, dtype, shape and the tensor's bytes) and
    ``repr(transforms)``. Not covered: the image files' content, the batch size, the device and the precision.

    Args:
        dataframe_path: The dataframe file, or folder of Parquet files.
        extractor: The model that computes the embeddings.
        transforms: The transforms applied to the images (their ``repr`` is hashed).

    Returns:
        64 hex digits.

    Raises:
        OSError: the dataframe file, or a file of the folder, cannot be read.
    """
    path = Path(dataframe_path)
    digest = hashlib.sha256()
    _update(digest, str(CACHE_FORMAT).encode())
    _update(digest, str(path.absolute()).encode())
    if path.is_dir():
        # its Parquet files, and any beside them
        for file in sorted(f for f in path.iterdir() if f.is_file()):
            _update(digest, file.name.encode())
            _update(digest, file.read_bytes())
    else:
        _update(digest, path.read_bytes())
    _update_model(digest, extractor)
    _update(digest, repr(transforms).encode())
    return digest.hexdigest()


def _update_model(digest: Any, model: nn.Module) -> None:
    """Feed ``model``'s class name and every entry of its ``state_dict`` (name, dtype, shape, bytes)."""
    _update(digest, type(model).__qualname__.encode())
    for name, tensor in model.state_dict().items():
        _update(digest, f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        _update(digest, _tensor_bytes(tensor))


def dataset_cache_key(dataset: Sized, model: nn.Module) -> str:
    """The SHA-256 hex digest of what the outputs of ``model`` over a dataset depend on, as far as the dataset
    shows it (:func:`~oml_core.inference.cached.inference_cached`).

    It covers :data:`CACHE_FORMAT`, the model (as :func:`embeddings_cache_key`), the dataset's class name and
    length, and, when the dataset has them, its dataframe ``df`` (every value), ``dataset_root`` and
    ``repr(transform)``. Not covered: the content of the files the dataset reads, the batch size, the device
    and the precision.

    Returns:
        64 hex digits.
    """
    digest = hashlib.sha256()
    _update(digest, str(CACHE_FORMAT).encode())
    _update_model(digest, model)
    _update(digest, f"{type(dataset).__qualname__}|{len(dataset)}".encode())
    df = getattr(dataset, "df", None)
    if isinstance(df, pd.DataFrame):
        _update(digest, "|".join(map(str, df.columns)).encode())
        _update(digest, pd.util.hash_pandas_object(df.astype(str), index=True).to_numpy().tobytes())
    for attribute in ("dataset_root", "transform"):
        _update(digest, repr(getattr(dataset, attribute, None)).encode())
    return digest.hexdigest()


def _is_cache(payload: Any) -> bool:
    """Whether what a file holds is an embeddings cache: marked with :data:`CACHE_MARKER`, or a dict of exactly
    a string ``key`` and a tensor of ``embeddings`` (the format before the marker)."""
    if not isinstance(payload, dict):
        return False
    if payload.get("format") == CACHE_MARKER:
        return True
    return (
        set(payload) == _LEGACY_ENTRIES
        and isinstance(payload["key"], str)
        and isinstance(payload["embeddings"], Tensor)
    )


def _describe(payload: Any) -> str:
    """What a file that is not a cache holds, in a few words."""
    if isinstance(payload, dict):
        keys = sorted(map(str, payload))
        more = ", ..." if len(keys) > 5 else ""
        return f"a dict of {len(keys)} entries: {', '.join(keys[:5])}{more}"
    return f"a {type(payload).__name__}"


def _read(path: Path, key: str, n_rows: int, replace_foreign: bool) -> Tensor | None:
    """The ``[n_rows, dim]`` embeddings stored in ``path`` for ``key``; ``None`` (with a warning naming the file)
    when it is a cache written for another key, another format version or another number of embeddings (or,
    with ``replace_foreign``, when it is not a readable cache at all: a corrupt one too).

    Raises:
        NotAnEmbeddingsCacheError: without ``replace_foreign``, ``path`` is corrupt (its digest, see
            :func:`~oml_core.utils.digest.verify_checkpoint`), cannot be read as a cache or holds something else.
    """
    error: Exception | None = None
    try:
        verify_checkpoint(path)
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated, corrupt or foreign file
        error, payload = e, None
    if error is not None or not _is_cache(payload):
        problem = (
            f"{type(error).__name__}: {error}" if error is not None else f"it holds {_describe(payload)}"
        )
        if isinstance(error, CorruptCheckpointError) and not replace_foreign:
            raise NotAnEmbeddingsCacheError(
                f"{error}; it was left untouched: delete it if it is a damaged cache, or choose another cache path"
            ) from error
        if not replace_foreign:
            why = f"cannot be read as one: {problem}" if error is not None else problem
            raise NotAnEmbeddingsCacheError(
                f"{path} exists and is not an oml embeddings cache ({why}); it was left untouched: choose "
                "another cache path, or delete the file if it is a damaged cache"
            ) from error
        warnings.warn(
            f"{path}: unreadable embeddings cache ({problem}); computing the embeddings again", stacklevel=4
        )
        return None
    embeddings = payload.get("embeddings")
    fits = isinstance(embeddings, Tensor) and embeddings.ndim == 2 and len(embeddings) == n_rows
    if not fits or payload.get("key") != key or payload.get("version", CACHE_FORMAT) != CACHE_FORMAT:
        warnings.warn(
            f"{path}: the embeddings cache was written for other data, another extractor or other transforms "
            "(another key); computing the embeddings again",
            stacklevel=4,
        )
        return None
    return embeddings


def _write(path: Path, key: str, embeddings: Tensor) -> None:
    """Write ``embeddings`` and ``key`` to ``path`` atomically: into a temporary file of the same folder,
    flushed to disk, then renamed into place (a crash leaves the old file or the new one, never a part)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": CACHE_MARKER,
        "version": CACHE_FORMAT,
        "key": key,
        "embeddings": embeddings.detach().cpu().contiguous(),
    }
    atomic_torch_save(payload, path)


def cached_embeddings(
    path: Path, key: str, n_rows: int, compute: Callable[[], Tensor], replace_foreign: bool = False
) -> Tensor:
    """The embeddings of the cache file ``path`` when it exists and was written for ``key``; else ``compute()``,
    written to ``path`` (atomically: into a temporary file next to it, flushed to disk, then renamed into place;
    missing parent folders are created).

    A file at ``path`` that is not an embeddings cache (see the module's docstring) is refused before anything
    is computed, and left untouched; a cache written for another key is replaced.

    Args:
        path: The cache file.
        key: The key of the embeddings (:func:`embeddings_cache_key`), stored in the file with them.
        n_rows: The number of embeddings expected.
        compute: Computes the ``[n_rows, dim]`` embeddings.
        replace_foreign: Also replace (with a warning) a file that is not a readable cache: for a cache folder
            whose file names only oml chooses, where such a file can only be a damaged cache.

    Returns:
        The embeddings, on the CPU when read back.

    Warns:
        UserWarning: naming ``path``, when it is a cache written for another key (or format version) or that
        does not hold ``n_rows`` embeddings (or, with ``replace_foreign``, not a readable cache): they are
        computed again.

    Raises:
        NotAnEmbeddingsCacheError: (a ``FileExistsError``) ``path`` exists and is not an oml embeddings cache:
            a folder, or a file that cannot be read as a cache (``torch.load(weights_only=True)``) or that holds
            something else (a model's state dict...); unless ``replace_foreign``, for a file.
        OSError: the file cannot be written.
    """
    if path.exists() and not path.is_file():
        raise NotAnEmbeddingsCacheError(
            f"{path} exists and is not an oml embeddings cache (it is not a file); choose another cache path"
        )
    embeddings = _read(path, key, n_rows, replace_foreign) if path.is_file() else None
    if embeddings is None:
        embeddings = compute()
        _write(path, key, embeddings)
    return embeddings


__all__ = [
    "CACHE_FORMAT",
    "CACHE_MARKER",
    "NotAnEmbeddingsCacheError",
    "cached_embeddings",
    "dataset_cache_key",
    "embeddings_cache_key",
]
