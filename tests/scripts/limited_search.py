"""``oml search`` under a real memory limit, for ``tests/test_mapped_index.py``.

It runs ``oml search SMALL QUERY`` first (``oml_core.cli.main``, its answer discarded), so that everything a
search imports and builds once (torch, oml, the extractor's plugin, pyarrow, PIL) is in memory; then sets
``RLIMIT_DATA`` (``ulimit -d``: the process's private writable memory, what it allocates; not the read-only
mappings of files) to its data memory now (``VmData``) plus ``HEADROOM`` bytes (0: no limit; with a limit, the
threads it starts get small stacks, and the caller gives ``MALLOC_ARENA_MAX=1``: neither is the index's), and runs
``oml search INDEX QUERY --top-k K --format json``, printing its answer, and to stderr what it added to the
process's memory, in bytes, and its seconds, as JSON: ``maxrss`` (peak RSS, ``VmHWM``, minus ``VmRSS`` before),
``anon`` (its own memory, ``RssAnon``) and ``file`` (pages of the files it mapped, which the kernel may drop,
``RssFile``) after minus before. It exits with the search's status, or 3 after printing ``MemoryError`` when the
limit refused an allocation.

Usage: ``python limited_search.py HEADROOM SMALL INDEX QUERY K``
"""

from __future__ import annotations

import contextlib
import io
import json
import resource
import sys
import threading
import time

from mapped_search import status_bytes  # the script beside this one (its folder is on sys.path)

from oml_core.cli import main


def run(headroom: int, small: str, index: str, query: str, k: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["search", small, query, "--format", "json"]) == 0
    if headroom:
        # the plugin loader's timer threads: stacks of 256 KiB rather than 8 MiB each, not the index's memory
        threading.stack_size(256 * 1024)
        limit = status_bytes("VmData") + headroom
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    before = {key: status_bytes(key) for key in ("VmRSS", "RssAnon", "RssFile")}
    start = time.perf_counter()
    try:
        status = main(["search", index, query, "--top-k", k, "--format", "json"])
    except MemoryError:
        print("MemoryError", flush=True)
        return 3
    added = {
        "maxrss": status_bytes("VmHWM") - before["VmRSS"],
        "anon": status_bytes("RssAnon") - before["RssAnon"],
        "file": status_bytes("RssFile") - before["RssFile"],
        "seconds": time.perf_counter() - start,
    }
    print(json.dumps(added), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(run(int(sys.argv[1]), *sys.argv[2:6]))
