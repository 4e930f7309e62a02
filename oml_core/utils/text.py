"""Text files read by oml (configs, csv dataframes): which encodings are text encodings, and where a file's
first undecodable byte lies, for one-line errors that point at it; and text for a terminal: on one line, its
control characters escaped."""

from __future__ import annotations

import re

#: The characters a terminal would act on rather than show: C0 controls (ESC starts colour and cursor sequences),
#: DEL, C1 controls (CSI ``\x9b`` among them), the line and paragraph separators, and the bidirectional overrides
#: and isolates (which reorder what is shown). Other characters, any script's letters and emoji, are kept.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


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


def printable(text: object) -> str:
    """``str(text)`` for a terminal: each control character (see :data:`_CONTROL`) written as Python writes it in
    a string literal (``\\x1b``, ``\\n``, ``\\x9b``, ``\\u202e``), every other character as it is. For item paths,
    names and texts that come from files a user did not write (a tampered ``items.json``, a dataframe): the text
    renderings of oml's answers and its error lines show them so, the JSON renderings exactly (JSON escapes
    them)."""
    return _CONTROL.sub(_escaped, str(text))


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


__all__ = ["is_text_encoding", "one_line", "printable", "undecodable_position"]
