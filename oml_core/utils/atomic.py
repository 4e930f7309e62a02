"""Writing files atomically: a crash, a kill or a full disk never leaves a truncated file under its real name.

The bytes go to a temporary file in the destination's own directory (so that the final rename stays on one
filesystem), which is flushed and ``fsync``-ed and then renamed over the destination with ``os.replace``
(atomic on POSIX and Windows); the directory is ``fsync``-ed too, so that the rename survives a power loss.
Until the rename, the previous file (if any) is untouched; on any error the temporary file is removed.

A process killed in the middle of a write cannot remove its temporary file: :func:`remove_stale_temporaries`
removes those whose process no longer runs, and every write removes the ones of its own destination first.
The torch files of :func:`atomic_torch_save` carry the sha256 of their bytes (:mod:`oml_core.utils.digest`),
written in the same atomic write, so that a damaged file is told from a good one before it is used.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO, cast

from oml_core.utils.digest import SealingWriter

#: The prefix of the temporary files, so that a file left by a process killed mid-write is recognisable.
TEMPORARY_PREFIX = ".tmp-"
#: The name of a temporary file: the prefix, the destination's name and the id of the writing process.
_TEMPORARY_NAME = re.compile(re.escape(TEMPORARY_PREFIX) + r"(?P<name>.+)\.(?P<pid>[0-9]+)")

logger = logging.getLogger(__name__)


class AtomicWriteError(OSError):
    """Writing a file failed; the destination is as it was before (the message says whether it exists)."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


def temporary_path_for(path: Path) -> Path:
    """The temporary file that :func:`atomic_write` writes before it renames it to ``path``:
    ``<dir>/.tmp-<name>.<pid>`` (one per process, so that two processes never write the same file)."""
    return path.with_name(f"{TEMPORARY_PREFIX}{path.name}.{os.getpid()}")


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Open a binary file to write ``path`` atomically: the block writes into it; when the block ends without
    an error the file replaces ``path`` at once, whole. First the temporary files of ``path``'s name that killed
    writes left beside it are removed (:func:`remove_stale_temporaries`).

    Example::

        with atomic_write("checkpoints/last.ckpt") as f:
            torch.save(state, f)

    Raises:
        AtomicWriteError: an ``OSError`` while writing, flushing or renaming (a full disk, a read-only or
            missing directory): the message names ``path``, the cause and whether the previous file is intact.
            Any other error of the block propagates unchanged. In both cases the temporary file is removed
            and ``path`` is unchanged.
    """
    path = Path(path)
    temporary = temporary_path_for(path)
    remove_stale_temporaries(path.parent, path.name)
    try:
        with open(temporary, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
        fsync_directory(path.parent)
    except BaseException as error:
        with contextlib.suppress(OSError):
            temporary.unlink()
        if isinstance(error, OSError) and not isinstance(error, AtomicWriteError):
            previous = "the previous file is intact" if path.exists() else "no file was written"
            reason = error.strerror or str(error)
            raise AtomicWriteError(
                error.errno, f"cannot write {str(path)!r}: {reason} ({previous})"
            ) from error
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes | memoryview) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write`)."""
    with atomic_write(path) as file:
        file.write(data)


def atomic_torch_save(obj: Any, path: str | os.PathLike[str]) -> None:
    """``torch.save(obj, path)``, atomically (see :func:`atomic_write`), with the sha256 of the file's bytes in
    it (:class:`~oml_core.utils.digest.SealingWriter`, hashed as they are written;
    :func:`~oml_core.utils.digest.verify_checkpoint` checks it). The file loads with plain
    ``torch.load(path, weights_only=True)``.

    An ``OSError`` of a write (a full disk), which ``torch.save`` reports as a ``RuntimeError`` of its zip
    writer, is raised as the :class:`AtomicWriteError` that names the file.
    """
    import torch

    with atomic_write(path) as file:
        writer = SealingWriter(file)
        try:
            torch.save(obj, cast(IO[bytes], writer))  # torch calls its write and flush only
        except RuntimeError as error:
            if writer.error is None:
                raise
            raise writer.error from error
        writer.finish()


def remove_stale_temporaries(directory: str | os.PathLike[str], name: str | None = None) -> list[Path]:
    """Remove from ``directory`` the temporary files of writes that were killed mid-way: the files
    ``.tmp-<name>.<pid>`` (:func:`temporary_path_for`) whose process ``<pid>`` no longer runs on this machine.

    A file of a process that runs is kept, whatever it is (another process of a DDP run writing, or a process
    that reuses a dead writer's id): nothing that may still be renamed into place is removed. Where processes
    cannot be probed (not POSIX), nothing is removed. A file that cannot be removed is logged and kept. The
    process ids are this machine's, as the temporary names are: a folder on a network filesystem that processes
    of several machines write into at once is beyond them (two writers of one name on two machines could even
    share a temporary file).

    Args:
        directory: The folder to clean (a missing or unreadable folder has nothing to remove).
        name: Only the temporary files of this destination name (``last.ckpt``); None: of every name.

    Returns:
        The files removed (each is logged).
    """
    try:
        entries = list(os.scandir(directory))
    except OSError:  # a write into it fails on its own, naming the cause
        return []
    removed: list[Path] = []
    for entry in entries:
        match = _TEMPORARY_NAME.fullmatch(entry.name)
        if match is None or (name is not None and match["name"] != name):
            continue
        pid = int(match["pid"])
        if not entry.is_file(follow_symlinks=False) or _process_may_run(pid):
            continue
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            continue  # renamed or removed meanwhile
        except OSError as error:
            logger.warning(
                "cannot remove %s, left by a killed write: %s", entry.path, error.strerror or error
            )
            continue
        logger.info(
            "removed %s: the temporary file of a write killed mid-way (process %d is gone)", entry.path, pid
        )
        removed.append(Path(entry.path))
    return removed


def _process_may_run(pid: int) -> bool:
    """Whether the process ``pid`` runs on this machine, or may (it cannot be told): False only when it is gone."""
    if os.name != "posix" or pid <= 0:
        return True  # os.kill would end a process on Windows; pid 0 would signal this process group
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it runs, as another user
        pass
    return True


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make a rename (or a new entry) in ``directory`` durable (a no-op where directories cannot be opened, e.g.
    Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory; the rename itself is already atomic
    finally:
        os.close(fd)


__all__ = [
    "TEMPORARY_PREFIX",
    "AtomicWriteError",
    "atomic_torch_save",
    "atomic_write",
    "atomic_write_bytes",
    "fsync_directory",
    "remove_stale_temporaries",
    "temporary_path_for",
]
