"""The header check of oml's own JSON documents (an export's manifest, an embeddings file's sidecar): an object
whose ``format`` names the document and whose ``version`` is the one this oml reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def checked_header(
    data: Any, path: Path, fmt: str, version: int, what: str, one_of: str, error: type[Exception]
) -> dict[str, Any]:
    """``data``, the JSON read from ``path``, when it is an object of format ``fmt`` and version ``version``.

    Args:
        data: The parsed JSON.
        path: Its file, named by the messages.
        fmt: The ``format`` it must have.
        version: The ``version`` it must have.
        what: The document, as "not ``what`` (format X)" names it (e.g. "the manifest of an oml export").
        one_of: One such document, as "``one_of`` of version V" names it (e.g. "an export").
        error: The exception raised.

    Raises:
        error: "``path``: not ``what`` (format X)" or "``path``: ``one_of`` of version V; this oml reads version
            ``version``".
    """
    if not isinstance(data, dict) or data.get("format") != fmt:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise error(f"{path}: not {what} (format {found!r})")
    if data.get("version") != version:
        raise error(f"{path}: {one_of} of version {data.get('version')!r}; this oml reads version {version}")
    return data
