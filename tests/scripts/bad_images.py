"""Real bad image files for the tests of the checks before training."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def png_chunk(kind: bytes, data: bytes) -> bytes:
    """A PNG chunk: length, type, data and CRC."""
    return (
        struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def decompression_bomb(path: Path, side: int = 30_000) -> Path:
    """A 1-bit PNG whose header says ``side x side`` pixels (900 M: past twice PIL's limit) in a few bytes."""
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    rows = zlib.compress(b"\x00" * (1 + side // 8) * 8)  # the first rows only: PIL refuses it on open
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", header) + png_chunk(b"IDAT", rows) + png_chunk(b"IEND", b"")
    )
    return path
