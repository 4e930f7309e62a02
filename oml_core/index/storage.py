"""The files of a saved gallery index: their names, and how they are written (atomically, into a folder that
appears whole) and read back (with one-line errors that name the file).

A saved index is a folder::

    index.json        format tag, version, the config that built the index, number of items, dimension
    items.json        ids, paths and labels of the items, in the order of the embeddings
    embeddings.pt     {format, embeddings [n, dim] float32}: torch.load(weights_only=True)
    backend/          the knn backend's own save (IKnnIndex.save)
    calibration.json  the calibration (only when calibrated)
    calibration.png   its precision / recall curve (only when calibrated)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from oml_core.index.errors import GalleryIndexError
from oml_core.retrieval.knn_backends import load_index_state
from oml_core.utils.atomic import TEMPORARY_PREFIX, atomic_torch_save, atomic_write_bytes

INDEX_FILE = "index.json"
ITEMS_FILE = "items.json"
EMBEDDINGS_FILE = "embeddings.pt"
BACKEND_FOLDER = "backend"
CALIBRATION_FILE = "calibration.json"
CALIBRATION_PLOT = "calibration.png"
#: The format tags of ``index.json`` and ``embeddings.pt``.
INDEX_FORMAT = "oml-gallery-index"
EMBEDDINGS_FORMAT = "oml-gallery-embeddings"
#: The version of the layout this code writes and reads.
INDEX_VERSION = 1


@contextlib.contextmanager
def new_folder(folder: Path) -> Iterator[Path]:
    """A temporary folder beside ``folder`` to write into; when the block ends without an error it is renamed
    to ``folder`` at once, whole (on any error it is removed and ``folder`` is untouched).

    Raises:
        FileExistsError: ``folder`` exists and is not an empty folder (it is never written over); checked
            before the block and again by the rename.
    """
    folder = Path(folder)
    _check_free(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    temporary = folder.with_name(f"{TEMPORARY_PREFIX}{folder.name}.{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)  # left by a killed process of the same pid
    temporary.mkdir()
    try:
        yield temporary
        _check_free(folder)
        os.replace(temporary, folder)  # onto a missing or empty folder only
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def _check_free(folder: Path) -> None:
    if folder.exists() and not (folder.is_dir() and not any(folder.iterdir())):
        raise FileExistsError(
            f"{folder} exists and is not an empty folder; a gallery index is never written over it: choose a new "
            f"folder"
        )


def write_json(path: Path, data: Any) -> None:
    """``data`` as JSON (no NaN or infinity), written atomically."""
    atomic_write_bytes(path, json.dumps(data, indent=1, allow_nan=False).encode("utf-8"))


def read_json(path: Path) -> Any:
    """The JSON of ``path``.

    Raises:
        GalleryIndexError: no such file, or not JSON (the message names the file).
    """
    if not path.is_file():
        raise GalleryIndexError(f"{path}: no such file; {path.parent} is not a saved gallery index")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise GalleryIndexError(f"{path}: not a readable gallery index file ({type(e).__name__}: {e})") from e


def write_embeddings(path: Path, embeddings: Tensor) -> None:
    """The ``[n, dim]`` embeddings, written atomically for ``torch.load(weights_only=True)``."""
    atomic_torch_save({"format": EMBEDDINGS_FORMAT, "version": INDEX_VERSION, "embeddings": embeddings}, path)


def read_embeddings(path: Path, n_items: int, dim: int) -> Tensor:
    """The embeddings of ``path``, checked to be ``[n_items, dim]`` finite floats.

    Raises:
        GalleryIndexError: no such file, not a torch file, another format, or another shape (naming the file).
    """
    try:
        state = load_index_state(path, EMBEDDINGS_FORMAT)
    except (FileNotFoundError, ValueError) as e:
        raise GalleryIndexError(str(e)) from e
    embeddings = state.get("embeddings")
    if not isinstance(embeddings, Tensor) or not embeddings.dtype.is_floating_point:
        raise GalleryIndexError(f"{path}: holds no embeddings tensor")
    if tuple(embeddings.shape) != (n_items, dim):
        raise GalleryIndexError(
            f"{path}: embeddings of shape {tuple(embeddings.shape)}, the index has {n_items} items of dimension {dim}"
        )
    if not bool(torch.isfinite(embeddings).all()):
        raise GalleryIndexError(f"{path}: the embeddings are not all finite")
    return embeddings.float()


__all__ = [
    "BACKEND_FOLDER",
    "CALIBRATION_FILE",
    "CALIBRATION_PLOT",
    "EMBEDDINGS_FILE",
    "EMBEDDINGS_FORMAT",
    "INDEX_FILE",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "ITEMS_FILE",
    "new_folder",
    "read_embeddings",
    "read_json",
    "write_embeddings",
    "write_json",
]
