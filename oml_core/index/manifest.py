"""The manifest of a saved gallery index (format versions 4 and 5): what binds the files of an index to each
other, so that a file, or a set of files, from another index is named at load, in one line, before any of it is
used.

``index.json`` keeps it under :data:`MANIFEST_KEY`::

    "manifest": {"uid": "<32 hex digits>", "files": {"<path relative to the folder>": "<sha256>", ...}}

- ``files``: every file of the index but ``index.json`` itself and the two it already names by digest
  (``weights.pt`` by ``weights_sha256``, which the export and the serving plugin read and the model JSON of
  ``embeddings.pt`` records, checked when the extractor is built; each segment of the log by its ``sha256``,
  checked when it is read): the probe query (e.g. ``probe.png``) and the base generation's ``generation.json``,
  ``items.arrow`` (version 4: ``items.json``), ``embeddings.npy``, ``embeddings.pt``, ``calibration.json``,
  ``calibration.png`` and every file under ``backend/``
  (the knn backend's own save, digested as a tree: each file by its relative name and digest, so that a file
  changed, missing or added there is named).
- A file's digest (:func:`file_digest`): the sha256 that oml sealed it with when it is one of oml's torch files
  (:func:`~oml_core.utils.digest.sealed_digest`, read from its last bytes; its loader verifies its bytes against
  it: ``embeddings.pt``, ``embeddings.npy``, the exact and faiss backends' states), else the sha256 of its bytes.
  A load so hashes the JSON, Arrow and PNG files and a backend's unsealed files (faiss's ``faiss.index``), never
  ``embeddings.pt`` or ``embeddings.npy`` a second time; nothing is remembered beside the files, so the folder
  stays as it was written (read-only folders too).
- ``uid``: the identity of the base generation's data (:func:`content_uid`: the sha256 of its items and
  embeddings), written in ``index.json``'s manifest, in ``items.arrow`` (its schema's metadata; version 4:
  ``items.json``) and in ``embeddings.pt`` (which binds ``embeddings.npy`` by its sha256), so that the
  files are bound to each other and not only to ``index.json``: a file copied together with its digest into the
  manifest still carries another index's uid. It is derived from the content, not drawn at random, so that the
  same index built twice is the same bytes.

Checked at every read of a generation (:func:`check_files`, then :func:`check_uid` once its files are read);
written by a save and by every commit of a whole generation; a commit of a segment leaves the base's files, and
so the manifest, as they are. An index of version 3 or 2, written before the manifest, is read as before (bound
by ``weights_sha256`` and the model JSON only); its first commit writes a whole generation with its manifest
(version 5).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from oml_core.caches.digests import file_sha256
from oml_core.index.errors import GalleryIndexError
from oml_core.index.item_table import ItemTable
from oml_core.utils.digest import sealed_digest
from oml_core.utils.mapped_rows import float32_chunks

#: The key of ``index.json`` that holds the manifest.
MANIFEST_KEY = "manifest"
#: The key of ``items.json`` (and of ``embeddings.pt``) that holds the uid of the generation's data.
UID_KEY = "uid"
#: How many hex digits of the sha256 of the content make a uid.
UID_LENGTH = 32
#: What ends every message of files that are not the index's.
_REBUILD = "rebuild the index (oml index build)"


@dataclass(frozen=True)
class Manifest:
    """The manifest of an index (see the module's docstring).

    Attributes:
        uid: The identity of the base generation's data, which its ``items.json`` and ``embeddings.pt`` carry.
        files: The digest of every file of the index it names, by its path relative to the folder (``/``-separated).
    """

    uid: str
    files: Mapping[str, str]

    def to_dict(self) -> dict[str, Any]:
        """The manifest as ``index.json`` keeps it (the files sorted by path)."""
        return {UID_KEY: self.uid, "files": dict(sorted(self.files.items()))}


def file_digest(path: Path) -> str:
    """The digest of the file ``path`` in a manifest: the sha256 oml sealed it with, if it is sealed, else the
    sha256 of its bytes.

    Raises:
        OSError: the file cannot be read.
    """
    sealed = sealed_digest(path)
    return sealed if sealed is not None else file_sha256(path)


def files_under(folder: Path, names: Iterable[str]) -> list[str]:
    """The paths, relative to ``folder``, of the files that the relative ``names`` give: a file that exists
    itself, a folder every file under it; a name that does not exist gives none."""
    found: list[str] = []
    for name in names:
        path = folder / name
        if path.is_file():
            found.append(Path(name).as_posix())
        elif path.is_dir():
            found.extend(p.relative_to(folder).as_posix() for p in sorted(path.rglob("*")) if p.is_file())
    return found


def manifest_of(folder: Path, names: Iterable[str], uid: str) -> Manifest:
    """The manifest of the files that ``names`` give under ``folder`` (:func:`files_under`), each digested by
    :func:`file_digest`, with the uid ``uid``."""
    return Manifest(uid, {name: file_digest(folder / name) for name in files_under(folder, names)})


def content_uid(items: ItemTable, embeddings: Sequence[Tensor]) -> str:
    """The uid of a generation's data: the first :data:`UID_LENGTH` hex digits of the sha256 of its items (their
    columns ``ids``, ``paths``, ``labels``, ``keys`` as canonical JSON, :data:`~oml_core.index.item_table.BATCH_ROWS`
    rows at a time) and of the bytes of its float32 ``embeddings`` (their parts, in order), computed a chunk at a
    time, so that it never holds a copy of the whole gallery."""
    digest = hashlib.sha256()
    for record in items.records():
        digest.update(json.dumps(record, sort_keys=True, separators=(",", ":")).encode("utf-8"))
    for chunk in float32_chunks(embeddings):
        digest.update(chunk)
    return digest.hexdigest()[:UID_LENGTH]


def read_manifest(meta: Mapping[str, Any], meta_path: Path) -> Manifest:
    """The manifest of ``index.json`` (``meta``, read from ``meta_path``).

    Raises:
        GalleryIndexError: no manifest, or one that is not a uid and a mapping of relative paths to sha256 hex
            digests (naming ``meta_path``).
    """
    record = meta.get(MANIFEST_KEY)
    uid = record.get(UID_KEY) if isinstance(record, dict) else None
    files = record.get("files") if isinstance(record, dict) else None
    if not (
        _is_hex(uid, UID_LENGTH)
        and isinstance(files, dict)
        and all(_is_relative(name) and _is_hex(digest, 64) for name, digest in files.items())
    ):
        raise GalleryIndexError(
            f"{meta_path}: its {MANIFEST_KEY} must be {{{UID_KEY}: {UID_LENGTH} hex digits, files: {{relative path: "
            f"sha256}}}}, got {_shown(record)}; {_REBUILD}"
        )
    return Manifest(str(uid), dict(files))


def check_files(folder: Path, manifest: Manifest, own: Iterable[str], meta_path: Path) -> None:
    """Check the files of the index ``folder`` against its manifest: each file it names must exist and have its
    digest, and the files that the relative names ``own`` give (the base generation's own files and folders)
    must all be named by it.

    Raises:
        GalleryIndexError: one line naming every file that differs, is missing or is not named, and what it
            disagrees with: ``<folder>/gen-1/embeddings.pt: not this index's (its digest differs from
            <folder>/index.json's manifest); rebuild the index (oml index build)``.
    """
    differ: list[str] = []
    missing: list[str] = []
    for name, digest in manifest.files.items():
        path = folder / name
        if not path.is_file():
            missing.append(name)
            continue
        try:
            found = file_digest(path)
        except OSError as e:
            raise GalleryIndexError(f"{path}: cannot be read ({e.strerror or e})") from e
        if found != digest:
            differ.append(name)
    unlisted = [name for name in files_under(folder, own) if name not in manifest.files]
    parts = []
    if differ:
        digests = "its digest differs" if len(differ) == 1 else "their digests differ"
        parts.append(f"{_paths(folder, differ)}: not this index's ({digests} from {meta_path}'s manifest)")
    if unlisted:
        parts.append(f"{_paths(folder, unlisted)}: not this index's (not in {meta_path}'s manifest)")
    if missing:
        parts.append(
            f"{_paths(folder, missing)}: no such file (named by {meta_path}'s manifest): the index folder is "
            f"incomplete"
        )
    if parts:
        raise GalleryIndexError(f"{'; '.join(parts)}; {_REBUILD}")


def check_uid(manifest: Manifest, carried: Mapping[Path, Any], meta_path: Path) -> None:
    """Check that the files of ``carried`` (a file and the uid it carries: ``items.json``, ``embeddings.pt``)
    carry the manifest's uid.

    Raises:
        GalleryIndexError: one line naming every file of another uid (or of none) and the manifest's.
    """
    others = [f"{path} (uid {uid!r})" for path, uid in carried.items() if uid != manifest.uid]
    if others:
        noun = "its data is" if len(others) == 1 else "their data are"
        raise GalleryIndexError(
            f"{', '.join(others)}: not this index's ({noun} not the uid {manifest.uid} of {meta_path}'s manifest); "
            f"{_REBUILD}"
        )


def _paths(folder: Path, names: Iterable[str]) -> str:
    return ", ".join(str(folder / name) for name in names)


def _is_hex(value: Any, length: int) -> bool:
    return isinstance(value, str) and len(value) == length and all(c in "0123456789abcdef" for c in value)


def _is_relative(name: Any) -> bool:
    """Whether ``name`` is a relative path inside the folder (no absolute path, no ``..``)."""
    if not isinstance(name, str) or not name or name.startswith("/") or "\\" in name:
        return False
    return all(part not in ("", ".", "..") for part in name.split("/"))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = [
    "MANIFEST_KEY",
    "UID_KEY",
    "UID_LENGTH",
    "Manifest",
    "check_files",
    "check_uid",
    "content_uid",
    "file_digest",
    "files_under",
    "manifest_of",
    "read_manifest",
]
