"""The files of a saved gallery index: their names, and how they are written (atomically, into a folder that
appears whole) and read back (with one-line errors that name the file).

A saved index is a folder (the files of its base generation in ``gen-B/``, with the segments of its log of
changes, see :mod:`oml_core.index.generations`; version 2 kept them at the top, with ``n_items`` and ``dim`` in
``index.json``)::

    index.json        format tag, version, the config that built the index (its dataset component and data keys
                      among it), the sha256 of weights.pt, the current generation, its base and log, and the
                      manifest (since version 4, :mod:`oml_core.index.manifest`): the uid of the base generation's
                      data and the digest of every other file of the index, checked at load
    items.arrow       (version 5) ids, paths (the items' names), labels and knn backend keys of the items, in the
                      order of the embeddings, as the columns of an Arrow IPC file read memory-mapped, with the uid
                      of the generation's data (:mod:`oml_core.index.item_table`); up to version 4,
                      ``items.json`` held the same as JSON lists, read whole
    embeddings.npy    (version 5) the ``[n, dim]`` float32 embeddings, a raw ``.npy`` read memory-mapped and sealed
                      with its sha256 (:mod:`oml_core.utils.mapped_rows`)
    embeddings.pt     {format, version, embeddings_sha256: that of embeddings.npy (up to version 4: embeddings,
                      the tensor itself), model: the canonical JSON of what defines the embeddings, probe: the
                      embedding [dim] of the probe, probe_query: the probe's file name, or probe_input: the probe's
                      input tensor, uid: that of the items}: torch.load(weights_only=True)
    weights.pt        {format, state_dict}: the extractor's weights as it embedded the gallery (only when the
                      index has an extractor spec)
    probe.png         the probe query that the dataset component wrote (images: a fixed picture), whose embedding
                      at build time is kept (only when the index has an extractor; a component that writes no
                      probe query leaves the input tensor of the index's first gallery item in embeddings.pt)
    backend/          the knn backend's own save (IKnnIndex.save)
    calibration.json  the calibration (only when calibrated)
    calibration.png   its precision / recall curve (only when calibrated)

So an index of version 5 opens without reading its items or embeddings into memory: a gallery larger than the
machine's memory opens and searches (with a backend that maps its own save too, as ``exact`` and a flat faiss
index do). A change keeps the mapped rows and appends the new ones in memory; a removal copies the rows kept.

A file, or a set of files, of another index (``embeddings.pt`` and ``backend/``, with or without ``weights.pt``
and its digest) is refused at load in one line that names them: their digests differ from the manifest's, or,
copied together with their digests, they carry another uid.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from oml_core.index.errors import GalleryIndexError
from oml_core.index.item_table import ITEMS_TABLE_FILE
from oml_core.index.items import ItemInput, is_item_input
from oml_core.knn.backend_checks import load_index_state
from oml_core.utils.atomic import TEMPORARY_PREFIX, atomic_torch_save, atomic_write_bytes
from oml_core.utils.mapped_rows import all_finite, open_rows, write_rows

INDEX_FILE = "index.json"
#: The items of versions 2 to 4 (version 5: :data:`~oml_core.index.item_table.ITEMS_TABLE_FILE`).
ITEMS_FILE = "items.json"
EMBEDDINGS_FILE = "embeddings.pt"
#: The embeddings of version 5, beside ``embeddings.pt`` (which held them up to version 4).
EMBEDDINGS_ROWS_FILE = "embeddings.npy"
WEIGHTS_FILE = "weights.pt"
#: The probe query of an index written before the probe's file was recorded (the probe picture of images).
LEGACY_PROBE_FILE = "probe.png"
BACKEND_FOLDER = "backend"
CALIBRATION_FILE = "calibration.json"
CALIBRATION_PLOT = "calibration.png"
#: The index's own files and folders (a probe query is another file).
OWN_FILES = frozenset(
    {
        INDEX_FILE,
        ITEMS_FILE,
        ITEMS_TABLE_FILE,
        EMBEDDINGS_FILE,
        EMBEDDINGS_ROWS_FILE,
        WEIGHTS_FILE,
        BACKEND_FOLDER,
        CALIBRATION_FILE,
        CALIBRATION_PLOT,
    }
)
#: The format tags of ``index.json`` and ``embeddings.pt``.
INDEX_FORMAT = "oml-gallery-index"
EMBEDDINGS_FORMAT = "oml-gallery-embeddings"
WEIGHTS_FORMAT = "oml-gallery-weights"
#: The version of the layout this code writes (1: no weights.pt, probe.png nor model in embeddings.pt; 2: no
#: generations, see :mod:`oml_core.index.generations`; 3: no manifest, see :mod:`oml_core.index.manifest`; 4: items
#: and embeddings read whole from ``items.json`` and ``embeddings.pt``).
INDEX_VERSION = 5
#: The last version whose items and embeddings are ``items.json`` and the tensor of ``embeddings.pt``.
WHOLE_FILES_VERSION = 4


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


@dataclass(frozen=True)
class StoredEmbeddings:
    """What ``embeddings.pt`` holds (with, since version 5, the embeddings of ``embeddings.npy`` beside it).

    Attributes:
        embeddings: ``[n, dim]`` float32 embeddings of the items (read: mapped from ``embeddings.npy``; up to
            version 4, the tensor of ``embeddings.pt``); or, to write, their parts in order.
        model: The canonical JSON of what defined them (:func:`oml_core.index.integrity.model_json`).
        probe: ``[dim]`` embedding of the probe at build time (None: the index had no extractor).
        probe_query: The file name, in the index's folder, of the probe query (None: no probe, or a probe input).
        probe_input: The extractor's input of the probe, a gallery item's (None: no probe, or a probe query).
        uid: The uid of the generation's data (:func:`oml_core.index.manifest.content_uid`; None: written before
            the manifest, version 3 or 2).
    """

    embeddings: Tensor | Sequence[Tensor]
    model: str
    probe: Tensor | None = None
    probe_query: str | None = None
    probe_input: ItemInput | None = None
    uid: str | None = None


def write_embeddings(path: Path, stored: StoredEmbeddings) -> None:
    """``stored``: its embeddings into :data:`EMBEDDINGS_ROWS_FILE` beside ``path`` (streamed, a chunk of rows at
    a time), then the rest, with their sha256, into ``path`` for ``torch.load(weights_only=True)``; each written
    atomically."""
    sha256 = write_rows(path.with_name(EMBEDDINGS_ROWS_FILE), stored.embeddings)
    atomic_torch_save(
        {
            "format": EMBEDDINGS_FORMAT,
            "version": INDEX_VERSION,
            "embeddings_sha256": sha256,
            "model": stored.model,
            "probe": stored.probe,
            "probe_query": stored.probe_query,
            "probe_input": stored.probe_input,
            "uid": stored.uid,
        },
        path,
    )


def read_embeddings(path: Path, n_items: int, dim: int) -> StoredEmbeddings:
    """The embeddings of ``path`` (version 5: those of :data:`EMBEDDINGS_ROWS_FILE` beside it, memory-mapped and
    checked against the sha256 that ``path`` records; up to version 4: the tensor of ``path``), checked to be
    ``[n_items, dim]`` finite floats (a chunk of rows at a time), with the model JSON, the uid (None when absent:
    an older version) and the probe they were saved with: its embedding (``[dim]`` finite floats (any length in
    an empty index), or None) and either the file name of its query (a plain name; :data:`LEGACY_PROBE_FILE` in
    a file written before it was recorded) or its input tensor.

    Raises:
        GalleryIndexError: no such file, not a torch file, another format, another shape, no model JSON, a probe
            embedding without its query or input, embeddings.npy missing or not the one recorded (naming the
            file).
    """
    try:
        state = load_index_state(path, EMBEDDINGS_FORMAT)
    except (FileNotFoundError, ValueError) as e:
        raise GalleryIndexError(str(e)) from e
    embeddings = _stored_rows(path, state, n_items, dim)
    if not isinstance(embeddings, Tensor) or not embeddings.dtype.is_floating_point:
        raise GalleryIndexError(f"{path}: holds no embeddings tensor")
    if tuple(embeddings.shape) != (n_items, dim):
        raise GalleryIndexError(
            f"{path}: embeddings of shape {tuple(embeddings.shape)}, the index has {n_items} items of dimension {dim}"
        )
    if not all_finite(embeddings):
        raise GalleryIndexError(f"{path}: the embeddings are not all finite")
    model, probe, uid = state.get("model"), state.get("probe"), state.get("uid")
    if not isinstance(model, str):
        raise GalleryIndexError(f"{path}: holds no model JSON (what defined the embeddings)")
    if probe is not None and not (
        isinstance(probe, Tensor)
        and probe.dtype.is_floating_point
        and probe.ndim == 1
        and (n_items == 0 or len(probe) == dim)
        and bool(torch.isfinite(probe).all())
    ):
        raise GalleryIndexError(f"{path}: its probe embedding is not a vector of {dim} finite floats")
    if uid is not None and not isinstance(uid, str):
        raise GalleryIndexError(f"{path}: its uid must be a string, got {type(uid).__name__}")
    embeddings = embeddings if embeddings.dtype == torch.float32 else embeddings.float()
    if probe is None:
        return StoredEmbeddings(embeddings, model, uid=uid)
    query = state.get("probe_query") if "probe_query" in state else LEGACY_PROBE_FILE
    probe_input = state.get("probe_input")
    plain_name = isinstance(query, str) and query not in ("", ".", "..") and Path(query).name == query
    if not ((query is None and is_item_input(probe_input)) or (probe_input is None and plain_name)):
        raise GalleryIndexError(
            f"{path}: its probe needs either the file name of its query in the folder or its input tensor"
        )
    return StoredEmbeddings(embeddings, model, probe.float(), query, probe_input, uid)


def _stored_rows(path: Path, state: Mapping[str, Any], n_items: int, dim: int) -> Any:
    """The embeddings that the state of ``path`` holds (up to version 4) or names by their sha256 (version 5:
    :data:`EMBEDDINGS_ROWS_FILE` beside it, mapped; an empty index's are not mapped, an empty mapping cannot be).

    Raises:
        GalleryIndexError: embeddings.npy missing, foreign, or of another shape (naming it).
    """
    if "embeddings" in state:
        return state["embeddings"]
    sha256 = state.get("embeddings_sha256")
    if not isinstance(sha256, str):
        raise GalleryIndexError(
            f"{path}: holds no embeddings tensor nor the sha256 of {EMBEDDINGS_ROWS_FILE}"
        )
    try:
        if n_items == 0:
            return torch.zeros(0, dim)
        return open_rows(path.with_name(EMBEDDINGS_ROWS_FILE), sha256, (n_items, dim))
    except ValueError as e:
        raise GalleryIndexError(str(e)) from e


def write_weights(path: Path, state_dict: Mapping[str, Tensor]) -> str:
    """The extractor's ``state_dict`` (on the CPU), written atomically for ``torch.load(weights_only=True)``.

    Returns:
        The sha256 hex digest of the file's bytes.
    """
    buffer = io.BytesIO()
    tensors = {name: tensor.detach().cpu() for name, tensor in state_dict.items()}
    torch.save({"format": WEIGHTS_FORMAT, "version": INDEX_VERSION, "state_dict": tensors}, buffer)
    atomic_write_bytes(path, buffer.getbuffer())
    return hashlib.sha256(buffer.getbuffer()).hexdigest()


def read_weights(path: Path, sha256: str) -> dict[str, Tensor]:
    """The state dict of the weights file ``path``, whose bytes must have the sha256 digest ``sha256`` (the file
    is read once: hashed, then loaded with ``weights_only=True``).

    Raises:
        GalleryIndexError: no such file, another digest ("the weights of the index ... have sha256 X, the index
            was built with Y"), or not a weights file of an index (naming the file).
    """
    try:
        data = path.read_bytes()
    except OSError as e:
        raise GalleryIndexError(f"{path}: the index's weights cannot be read ({e.strerror or e})") from e
    found = hashlib.sha256(data).hexdigest()
    if found != sha256:
        raise GalleryIndexError(
            f"the weights of the index {path} have sha256 {found}, the index was built with {sha256}: the file "
            f"was changed; rebuild the index (oml index build)"
        )
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as e:  # a file of the right digest that torch cannot read: written by something else
        raise GalleryIndexError(f"{path}: not a readable weights file ({type(e).__name__}: {e})") from e
    tensors = state.get("state_dict") if isinstance(state, dict) else None
    if (
        not isinstance(tensors, dict)
        or state.get("format") != WEIGHTS_FORMAT
        or not all(isinstance(v, Tensor) for v in tensors.values())
    ):
        raise GalleryIndexError(f"{path}: not a weights file of a gallery index (format {WEIGHTS_FORMAT!r})")
    return tensors


__all__ = [
    "BACKEND_FOLDER",
    "CALIBRATION_FILE",
    "CALIBRATION_PLOT",
    "EMBEDDINGS_FILE",
    "EMBEDDINGS_FORMAT",
    "EMBEDDINGS_ROWS_FILE",
    "INDEX_FILE",
    "INDEX_FORMAT",
    "INDEX_VERSION",
    "ITEMS_FILE",
    "LEGACY_PROBE_FILE",
    "OWN_FILES",
    "WEIGHTS_FILE",
    "WEIGHTS_FORMAT",
    "WHOLE_FILES_VERSION",
    "StoredEmbeddings",
    "new_folder",
    "read_embeddings",
    "read_json",
    "read_weights",
    "write_embeddings",
    "write_json",
    "write_weights",
]
