"""Why a path given as a file is not one, in words that follow the path in a one-line error: a symbolic link
loop, a link to nothing, a directory or a device are each told as what they are, not as a missing file."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def not_a_file(path: str | Path) -> str | None:
    """None when ``path`` is a regular file (through its links), else why not, to follow the path in a message:
    ``"is a symbolic link loop"`` (it, or a folder on its way, links back to itself), ``"is a symbolic link to
    '<target>', which does not exist"``, ``"is a directory, not a file"``, ``"is not a regular file (a fifo,
    socket or device)"``, ``"cannot be reached: <why>"`` (a permission on a folder on its way, ...) or ``"does not
    exist"``."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "is a symbolic link loop"
        if path.is_symlink():
            return f"is a symbolic link to {os.readlink(path)!r}, which does not exist"
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return "does not exist"
        return f"cannot be reached: {e.strerror}"
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if not stat.S_ISREG(mode):
        return "is not a regular file (a fifo, socket or device)"
    return None


__all__ = ["not_a_file"]
