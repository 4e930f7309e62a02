"""Text files read by oml (configs, csv dataframes): which encodings are text encodings, and where a file's
first undecodable byte lies, for one-line errors that point at it."""

from __future__ import annotations


def is_text_encoding(name: object) -> bool:
    """Whether ``name`` is a text encoding Python knows (``utf-8``, ``latin-1``, ``cp1252``, ...): not a codec
    of bytes to bytes (``zlib``, ``base64``) or of text to text (``rot13``)."""
    if not isinstance(name, str):
        return False
    try:
        b"\0".decode(name)  # looks the codec up (an empty bytes would not), refusing one that is not text
    except LookupError:
        return False
    except UnicodeDecodeError:  # a text encoding of wider units (utf-16)
        pass
    return True


def undecodable_position(data: bytes, error: UnicodeDecodeError) -> tuple[int, int]:
    """``(line, column)``, both counted from 1, of the byte at which decoding ``data`` failed with ``error``
    (lines end with ``\\n``; the column counts bytes)."""
    line_start = data.rfind(b"\n", 0, error.start) + 1
    return data.count(b"\n", 0, error.start) + 1, error.start - line_start + 1


def one_line(text: object) -> str:
    """``str(text)`` (a message, an exception) with its white space (new lines, tabs) folded into single spaces,
    for the one-line errors of the command line and the pipelines."""
    return " ".join(str(text).split())


__all__ = ["is_text_encoding", "one_line", "undecodable_position"]
