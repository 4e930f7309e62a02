"""``oml search`` under a real memory limit, for ``tests/test_mapped_index.py``.

It runs ``oml search SMALL QUERY`` first (``oml_core.cli.main``, its answer discarded), so that everything a
search imports and builds once (torch, oml, the extractor's plugin, pyarrow, PIL) is in memory; then sets
``RLIMIT_DATA`` (``ulimit -d``: the process's private writable memory, what it allocates; not the read-only
mappings of files) to its data memory now (``VmData``) plus ``HEADROOM`` bytes (0: no limit), and runs
``oml search INDEX QUERY --top-k K --format json``, printing its answer. It exits with the search's status, or
3 after printing ``MemoryError`` when the limit refused an allocation.

Usage: ``python limited_search.py HEADROOM SMALL INDEX QUERY K``
"""

from __future__ import annotations

import contextlib
import io
import re
import resource
import sys
from pathlib import Path

from oml_core.cli import main


def status_bytes(key: str) -> int:
    """The line ``key`` of ``/proc/self/status`` (e.g. ``VmData``), in bytes."""
    found = re.search(rf"^{key}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    assert found is not None, f"no {key} in /proc/self/status"
    return int(found.group(1)) * 1024


def run(headroom: int, small: str, index: str, query: str, k: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["search", small, query, "--format", "json"]) == 0
    if headroom:
        limit = status_bytes("VmData") + headroom
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    try:
        return main(["search", index, query, "--top-k", k, "--format", "json"])
    except MemoryError:
        print("MemoryError", flush=True)
        return 3


if __name__ == "__main__":
    sys.exit(run(int(sys.argv[1]), *sys.argv[2:6]))
