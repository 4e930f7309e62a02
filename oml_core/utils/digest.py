"""A sha256 digest inside every torch file that oml writes, checked before the file is used.

Why: ``torch.load`` checks no checksum of what it reads (not even the zip's CRC-32 of a tensor's record): 4 KiB
of random bytes written into the middle of a checkpoint load silently, as weights that turn the loss to NaN.

Where the digest lives: in the zip archive comment of the file. ``torch.save`` writes a zip archive that ends
with its "end of central directory" record (22 bytes, the last two the length of the archive comment, 0).
:class:`SealingWriter` sets that length to :data:`DIGEST_RECORD_SIZE` and appends the digest record as the
comment::

    <torch's zip up to its comment length> <comment length = 96> "oml-checkpoint-digest v1 sha256:" <64 hex digits>

The 64 hex digits are the sha256 of every byte before the record (so the comment length too). The file is a
valid zip by the standard: plain ``torch.load(path, weights_only=True)`` (miniz), with ``mmap=True`` too, and
Python's ``zipfile`` read it as before (tests/test_checkpoint_digest.py, torch 2.14.1; ``unzip -t`` too).

Why there, and not elsewhere (the options weighed):

- A sidecar file (``last.ckpt.sha256``) would be a second file to rename: a kill between the two renames leaves
  a new checkpoint beside the old digest, a good file that looks corrupt; and a copy of the checkpoint alone
  loses its digest. In the file itself, the digest is written in the same atomic write
  (:func:`oml_core.utils.atomic.atomic_torch_save`: temporary file, fsync, rename): a kill at any instant leaves
  the previous file with its own digest, or the new one with its own.
- A record inside the zip (a member ``archive/oml_sha256``) cannot hold the digest of the whole file it is part
  of, and needs the zip rewritten after ``torch.save``.
- Bytes appended after the zip's end (a trailer) load too (miniz looks for the end record backwards), but make
  the file a zip followed by junk to other zip tools; the comment is the place the format gives to such data.

What a check finds (:func:`verify_checkpoint`):

- The file ends with a digest record: the sha256 of the bytes before it must be the recorded one, else
  :class:`CorruptCheckpointError` (4 KiB overwritten in the middle of ``last.ckpt``, any changed byte, a changed
  digit of the record).
- The file's last bytes hold the zip end record of a 96-byte comment, but no digest record ends the file: the
  record itself is damaged or cut short, :class:`CorruptCheckpointError`.
- Anything else carries no digest of oml's (``torch.save`` of another tool, OML's zoo weights, safetensors, or a
  file cut short by more than its record, whose zip end record is gone): :attr:`DigestStatus.UNVERIFIED`, read
  as before by its loader (torch refuses a zip without its end record on its own), and never called verified.

So a good file never looks corrupt (its record is computed before the write and renamed into place with it) and
a damaged file never looks good (it fails the digest, or the form of the record, or cannot be read at all).
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
import struct
from pathlib import Path
from typing import BinaryIO

#: What starts the digest record (the zip comment of a sealed file); it holds no ``PK`` (no zip signature).
DIGEST_MAGIC = b"oml-checkpoint-digest v1 sha256:"
#: The bytes of the digest record: :data:`DIGEST_MAGIC` and 64 lowercase hex digits.
DIGEST_RECORD_SIZE = len(DIGEST_MAGIC) + 64
#: The signature and the size of a zip's "end of central directory" record (without its comment).
_END_RECORD_SIGNATURE = b"PK\x05\x06"
_END_RECORD_SIZE = 22
_DIGEST_RECORD = re.compile(re.escape(DIGEST_MAGIC) + rb"([0-9a-f]{64})")
#: How many bytes :func:`verify_checkpoint` hashes at a time.
_CHUNK = 1 << 22


class DigestStatus(enum.Enum):
    """What :func:`verify_checkpoint` found in a file that is not corrupt."""

    #: The file carries oml's digest record and its bytes have that digest.
    VERIFIED = "verified"
    #: The file carries no digest of oml's (a foreign file): nothing was checked.
    UNVERIFIED = "unverified"


class CorruptCheckpointError(ValueError):
    """A file written by oml whose bytes are not the ones written: the message names the file and what differs.

    Attributes:
        path: The file.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{path} is corrupt: {reason}; it was changed or damaged after it was written")
        self.path = Path(path)


class SealingWriter:
    """A write-only file object that passes ``torch.save``'s output on to ``file`` sealed: with the digest record
    as the zip comment (see the module's docstring), hashed on the way, with no copy of the whole in memory.

    ``torch.save(obj, writer)`` then :meth:`finish`. The writer holds back the last 22 bytes it was given (the
    zip end record, once ``torch.save`` is done), so that :meth:`finish` can write the record's comment length
    :data:`DIGEST_RECORD_SIZE` in place of 0, and the digest record after it. The file so written holds exactly
    what sealing the whole output at once would give.

    Attributes:
        error: The ``OSError`` that a write into ``file`` raised (a full disk), None if none did: ``torch.save``
            reports it as a ``RuntimeError`` of its zip writer, which hides the cause.
    """

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._digest = hashlib.sha256()
        self._held = b""
        self.error: OSError | None = None

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Hash and write ``data`` but the last :data:`_END_RECORD_SIZE` bytes written so far; returns its length."""
        view = memoryview(data).cast("B")
        size = len(view)
        if size >= _END_RECORD_SIZE:
            self._emit(self._held)
            self._emit(view[:-_END_RECORD_SIZE])
            self._held = bytes(view[-_END_RECORD_SIZE:])
        else:
            joined = self._held + bytes(view)
            self._emit(joined[:-_END_RECORD_SIZE])
            self._held = joined[-_END_RECORD_SIZE:]
        return size

    def flush(self) -> None:
        """Flush ``file`` (the held bytes stay held until :meth:`finish`)."""
        self._file.flush()

    def finish(self) -> None:
        """Write the held end record with the digest record's length as its comment length, then the record.

        Raises:
            ValueError: What was written does not end with the zip end record of an empty comment (not the
                output of ``torch.save``).
        """
        end_record = self._held
        if not (
            len(end_record) == _END_RECORD_SIZE
            and end_record.startswith(_END_RECORD_SIGNATURE)
            and end_record.endswith(b"\0\0")
        ):
            raise ValueError("cannot seal: the data does not end with the zip end record of torch.save")
        comment_length = struct.pack("<H", DIGEST_RECORD_SIZE)
        self._emit(end_record[:-2] + comment_length)
        self._held = b""
        self._file.write(DIGEST_MAGIC + self._digest.hexdigest().encode("ascii"))

    def _emit(self, chunk: bytes | memoryview) -> None:
        if not chunk:
            return
        self._digest.update(chunk)
        try:
            self._file.write(chunk)
        except OSError as error:
            self.error = error
            raise


def verify_checkpoint(path: str | os.PathLike[str]) -> DigestStatus:
    """Check the digest that oml wrote into the file ``path`` (see the module's docstring); reads it once.

    Returns:
        :attr:`DigestStatus.VERIFIED`: its bytes are the ones written; :attr:`DigestStatus.UNVERIFIED`: it has no
        digest of oml's (a foreign file, to be read as before).

    Raises:
        CorruptCheckpointError: the file's sha256 is not the one written with it ("checkpoints/last.ckpt is
            corrupt: its sha256 1a2b... differs from the one written with it (3c4d...)"), or its digest record
            is damaged.
        FileNotFoundError: no such file (an ``OSError`` when it cannot be read).
    """
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        tail_size = min(size, _END_RECORD_SIZE + DIGEST_RECORD_SIZE)
        file.seek(size - tail_size)
        tail = file.read(tail_size)
        found = _DIGEST_RECORD.fullmatch(tail[-DIGEST_RECORD_SIZE:])
        if found is None:
            if _ends_with_a_record_sized_comment(tail):
                raise CorruptCheckpointError(
                    path, f"its digest record (the last {DIGEST_RECORD_SIZE} bytes) is damaged or cut short"
                )
            return DigestStatus.UNVERIFIED
        expected = found.group(1).decode("ascii")
        digest = hashlib.sha256()
        file.seek(0)
        remaining = size - DIGEST_RECORD_SIZE
        while remaining > 0:
            chunk = file.read(min(_CHUNK, remaining))
            if not chunk:
                break
            digest.update(chunk)
            remaining -= len(chunk)
    actual = digest.hexdigest()
    if actual != expected:
        raise CorruptCheckpointError(
            path, f"its sha256 {actual[:16]}... differs from the one written with it ({expected[:16]}...)"
        )
    return DigestStatus.VERIFIED


def sealed_digest(path: str | os.PathLike[str]) -> str | None:
    """The sha256 that oml sealed the file ``path`` with (its digest record, see the module's docstring), read
    from its last bytes without hashing the file; None when it carries no well-formed record. Whether its bytes
    still have that digest is :func:`verify_checkpoint`'s to say (the loaders of oml's torch files call it).

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        file.seek(max(0, size - DIGEST_RECORD_SIZE))
        found = _DIGEST_RECORD.fullmatch(file.read(DIGEST_RECORD_SIZE))
    return None if found is None else found.group(1).decode("ascii")


def is_verified_checkpoint(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a file that carries oml's digest and whose bytes have it (a "good" checkpoint).

    False for a missing, unreadable or corrupt file and for a file without oml's digest; never raises.
    """
    try:
        return verify_checkpoint(path) is DigestStatus.VERIFIED
    except (CorruptCheckpointError, OSError):
        return False


def _ends_with_a_record_sized_comment(tail: bytes) -> bool:
    """Whether ``tail`` (a file's last bytes) holds a zip end record whose comment is as long as a digest record:
    the place of a digest record that is damaged or cut short."""
    start = tail.find(_END_RECORD_SIGNATURE)
    while 0 <= start <= len(tail) - _END_RECORD_SIZE:
        (comment_length,) = struct.unpack_from("<H", tail, start + _END_RECORD_SIZE - 2)
        if comment_length == DIGEST_RECORD_SIZE:
            return True
        start = tail.find(_END_RECORD_SIGNATURE, start + 1)
    return False


__all__ = [
    "DIGEST_MAGIC",
    "DIGEST_RECORD_SIZE",
    "CorruptCheckpointError",
    "DigestStatus",
    "is_verified_checkpoint",
    "SealingWriter",
    "sealed_digest",
    "verify_checkpoint",
]
