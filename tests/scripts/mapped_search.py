"""A search of a saved exact knn backend under a real memory limit, for ``tests/test_mapped_index.py`` and
``benchmarks/bench_mapped_index.py``.

It measures the process's data memory once torch and oml are imported (``VmData`` of ``/proc/self/status``), sets
``RLIMIT_DATA`` (``ulimit -d``: the process's private writable memory, what it allocates) to that plus
``HEADROOM`` bytes (0: no limit), then either loads the embeddings whole into memory (``whole``: what an index
that is not memory-mapped costs) or opens the backend memory-mapped (``mapped``) and searches ``QUERIES`` (a
torch file of ``[q, dim]``), ``K`` neighbours each. It writes ``{distances, ids, maxrss}`` (``ru_maxrss`` in
bytes) to ``OUT``; a load refused by the limit exits 3 after printing ``MemoryError``.

Usage: ``python mapped_search.py FOLDER QUERIES K OUT HEADROOM mapped|whole``
"""

from __future__ import annotations

import re
import resource
import sys
from pathlib import Path

import numpy as np
import torch

from oml_core.knn.exact import EXACT_EMBEDDINGS_FILE, ExactKnnIndex


def data_bytes() -> int:
    """The process's data memory now (``VmData``), in bytes."""
    status = Path("/proc/self/status").read_text()
    found = re.search(r"^VmData:\s+(\d+) kB", status, re.MULTILINE)
    assert found is not None, "no VmData in /proc/self/status"
    return int(found.group(1)) * 1024


def main(folder: Path, queries_file: Path, k: int, out: Path, headroom: int, mode: str) -> int:
    queries = torch.load(queries_file, weights_only=True)
    if headroom:
        limit = data_bytes() + headroom
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    try:
        if mode == "whole":
            embeddings = torch.from_numpy(np.load(folder / EXACT_EMBEDDINGS_FILE))
            index = ExactKnnIndex("l2")
            index.add(embeddings)
        else:
            index = ExactKnnIndex.load(folder)
        result = index.search(queries, k)
    except MemoryError:
        print("MemoryError", flush=True)
        return 3
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    torch.save({"distances": result.distances, "ids": result.ids, "maxrss": maxrss}, out)
    return 0


if __name__ == "__main__":
    folder, queries_file, k, out, headroom, mode = sys.argv[1:7]
    sys.exit(main(Path(folder), Path(queries_file), int(k), Path(out), int(headroom), mode))
