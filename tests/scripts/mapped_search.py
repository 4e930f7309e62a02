"""A search of a saved exact knn backend under a real memory limit, for ``tests/test_mapped_index.py`` and
``benchmarks/bench_mapped_index.py``.

It measures the process's data memory once torch and oml are imported (``VmData`` of ``/proc/self/status``), sets
``RLIMIT_DATA`` (``ulimit -d``: the process's private writable memory, what it allocates) to that plus
``HEADROOM`` bytes (0: no limit), then either loads the embeddings whole into memory (``whole``: what an index
that is not memory-mapped costs) or opens the backend memory-mapped (``mapped``; ``faiss``: a saved
``faiss_flat`` index, through oml-faiss) and searches ``QUERIES`` (a
torch file of ``[q, dim]``), ``K`` neighbours each. It writes to ``OUT`` the ``distances`` and ``ids`` found,
the ``seconds`` of the load and search, and what the load and search added to the process's memory, in bytes:
``maxrss`` (peak RSS, ``VmHWM``: ``ru_maxrss`` would keep the parent's peak across the fork and exec, minus
``VmRSS`` before the load), ``anon`` (its own memory, ``RssAnon``)
and ``file`` (the pages of the files it maps, which the kernel may drop, ``RssFile``) after the search minus
before the load. A load refused by the limit exits 3 after printing ``MemoryError``.

Usage: ``python mapped_search.py FOLDER QUERIES K OUT HEADROOM mapped|whole|faiss``
"""

from __future__ import annotations

import re
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from oml_core.interfaces.knn import IKnnIndex
from oml_core.knn.exact import EXACT_EMBEDDINGS_FILE, ExactKnnIndex


def status_bytes(key: str) -> int:
    """The line ``key`` of ``/proc/self/status`` (e.g. ``VmData``), in bytes."""
    status = Path("/proc/self/status").read_text()
    found = re.search(rf"^{key}:\s+(\d+) kB", status, re.MULTILINE)
    assert found is not None, f"no {key} in /proc/self/status"
    return int(found.group(1)) * 1024


def load_whole(folder: Path) -> IKnnIndex:
    """An exact backend of the embeddings of the one saved in ``folder``, read whole into memory."""
    index = ExactKnnIndex("l2")
    index.add(torch.from_numpy(np.load(folder / EXACT_EMBEDDINGS_FILE)))
    return index


def loader(mode: str) -> Callable[[Path], IKnnIndex]:
    """How ``mode`` opens a saved backend (its modules imported now, before anything is measured)."""
    if mode == "faiss":
        from oml_faiss import FaissKnnIndex  # an optional plugin: imported only for it

        return FaissKnnIndex.load
    return load_whole if mode == "whole" else ExactKnnIndex.load


def main(folder: Path, queries_file: Path, k: int, out: Path, headroom: int, mode: str) -> int:
    queries, load = torch.load(queries_file, weights_only=True), loader(mode)
    if headroom:
        limit = status_bytes("VmData") + headroom
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    before = {key: status_bytes(key) for key in ("VmRSS", "RssAnon", "RssFile")}
    start = time.perf_counter()
    try:
        index = load(folder)  # kept until its memory is measured
        result = index.search(queries, k)
    except MemoryError:
        print("MemoryError", flush=True)
        return 3
    seconds = time.perf_counter() - start
    memory = {
        "maxrss": status_bytes("VmHWM") - before["VmRSS"],
        "anon": status_bytes("RssAnon") - before["RssAnon"],
        "file": status_bytes("RssFile") - before["RssFile"],
    }
    torch.save({"distances": result.distances, "ids": result.ids, "seconds": seconds, **memory}, out)
    return 0


if __name__ == "__main__":
    folder, queries_file, k, out, headroom, mode = sys.argv[1:7]
    sys.exit(main(Path(folder), Path(queries_file), int(k), Path(out), int(headroom), mode))
