"""Writing files atomically: a crash, a kill or a full disk never leaves a truncated file under its real name.

The bytes go to a temporary file in the destination's own directory (so that the final rename stays on one
filesystem), which is flushed and ``fsync``-ed and then renamed over the destination with ``os.replace``
(atomic on POSIX and Windows); the directory is ``fsync``-ed too, so that the rename survives a power loss.
Until the rename, the previous file (if any) is untouched; on any error the temporary file is removed.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

#: The prefix of the temporary files, so that a file left by a process killed mid-write is recognisable.
TEMPORARY_PREFIX = ".tmp-"


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
    an error the file replaces ``path`` at once, whole.

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
    try:
        with open(temporary, "wb") as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
        _fsync_directory(path.parent)
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
    """``torch.save(obj, path)``, atomically (see :func:`atomic_write`).

    ``obj`` is serialised in memory first: ``torch.save`` straight into a full disk hides the write's
    ``OSError`` behind a ``RuntimeError`` of its zip writer, while here it is the :class:`AtomicWriteError`
    that names the file.
    """
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write_bytes(path, buffer.getbuffer())


def _fsync_directory(directory: Path) -> None:
    """Make a rename in ``directory`` durable (a no-op where directories cannot be opened, e.g. Windows)."""
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
    "temporary_path_for",
]
