"""The digests of files, hashed once: :func:`file_digests` reads a file once for its md5 and sha256, and
:func:`cached_file_digests` remembers them in a sidecar file next to it, ``<file>.digests.json``
(:func:`digests_sidecar`), with the file's size, modification and change times and inode. As long as these are
unchanged the remembered digests are used; when any differs (the file was replaced or modified) the file is
hashed again. The zoo checks its cached checkpoints this way (:func:`oml_core.zoo.store.check_cached_checkpoint`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from oml_core.utils.atomic import atomic_write_bytes

#: Suffix of the sidecar file that remembers the digests of a file (:func:`digests_sidecar`).
DIGESTS_SUFFIX = ".digests.json"
_SIDECAR_FORMAT = 1
_CHUNK = 1 << 20

logger = logging.getLogger(__name__)


def file_digests(path: Path, names: tuple[str, ...] = ("md5", "sha256")) -> dict[str, str]:
    """``{name: hex digest}`` of the file ``path`` for every hashlib algorithm of ``names`` (md5 and sha256 by
    default), read once in chunks."""
    digests = {name: hashlib.new(name) for name in names}
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            for digest in digests.values():
                digest.update(chunk)
    return {name: digest.hexdigest() for name, digest in digests.items()}


def file_sha256(path: Path) -> str:
    """The sha256 hex digest of the content of the file ``path`` (:func:`file_digests`)."""
    return file_digests(path, ("sha256",))["sha256"]


def with_file_digests(value: Any) -> Any:
    """``value`` (a spec: mappings, lists, strings) with every string that names an existing file replaced by
    ``{"sha256": digest}`` of its content, for the key of a cache: a file rewritten in place is a new key, the
    same file under another path is not."""
    if isinstance(value, Mapping):
        return {key: with_file_digests(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [with_file_digests(item) for item in value]
    if isinstance(value, str) and value and Path(value).expanduser().is_file():
        return {"sha256": file_sha256(Path(value).expanduser())}
    return value


def digests_sidecar(path: Path) -> Path:
    """The sidecar file that remembers the digests of ``path``: ``<path>.digests.json`` next to it."""
    return path.with_name(path.name + DIGESTS_SUFFIX)


def _file_state(path: Path) -> dict[str, int]:
    """What tells whether the file changed: its size, modification and change times (ns) and inode."""
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "inode": st.st_ino}


def _remembered_digests(path: Path, state: dict[str, int]) -> dict[str, str] | None:
    """The digests of the sidecar of ``path`` when it describes the file in ``state``, else ``None`` (no
    sidecar, an unreadable one, or the file changed since it was written)."""
    try:
        record = json.loads(digests_sidecar(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("format") != _SIDECAR_FORMAT:
        return None
    if record.get("file") != path.name or any(record.get(key) != value for key, value in state.items()):
        return None
    digests = {name: record.get(name) for name in ("md5", "sha256")}
    if not all(isinstance(digest, str) and digest for digest in digests.values()):
        return None
    return digests  # type: ignore[return-value]


def remember_digests(path: Path, digests: dict[str, str], state: dict[str, int] | None = None) -> None:
    """Write the sidecar of ``path`` (:func:`digests_sidecar`) atomically: ``digests`` (``md5`` and
    ``sha256``) and the file's ``state`` (its current one when ``None``). A sidecar that cannot be written (a
    read-only cache) is logged and skipped: the file is then hashed again on its next use."""
    sidecar = digests_sidecar(path)
    try:
        record = {
            "format": _SIDECAR_FORMAT,
            "file": path.name,
            **(state if state is not None else _file_state(path)),
            "md5": digests["md5"],
            "sha256": digests["sha256"],
        }
        atomic_write_bytes(sidecar, (json.dumps(record, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    except OSError as error:
        logger.warning(
            "cannot remember the digests of %s in %s (%s): it will be hashed again", path, sidecar, error
        )


def cached_file_digests(path: Path) -> dict[str, str]:
    """``{"md5": ..., "sha256": ...}`` of the file ``path``, hashed once: taken from its sidecar
    (:func:`digests_sidecar`) while the file's size, modification and change times and inode are those the
    sidecar records, else computed by :func:`file_digests` and remembered in the sidecar (unless the file
    changed while it was read)."""
    state = _file_state(path)
    remembered = _remembered_digests(path, state)
    if remembered is not None:
        return remembered
    digests = file_digests(path)
    if _file_state(path) == state:
        remember_digests(path, digests, state)
    return digests


__all__ = [
    "DIGESTS_SUFFIX",
    "cached_file_digests",
    "digests_sidecar",
    "file_digests",
    "file_sha256",
    "remember_digests",
    "with_file_digests",
]
