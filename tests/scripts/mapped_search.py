"""Searches of saved knn backends under a real memory limit, for ``tests/test_mapped_index.py`` and
``benchmarks/bench_mapped_index.py``.

It measures the process's data memory once torch and oml are imported (``VmData`` of ``/proc/self/status``), sets
``RLIMIT_DATA`` (``ulimit -d``: the process's private writable memory, what it allocates) to that plus
``HEADROOM`` bytes (0: no limit), then, for each ``MODE FOLDER OUT`` in turn, either loads the embeddings of the
exact backend saved in ``FOLDER`` whole into memory (``whole``: what an index that is not memory-mapped costs) or
opens the backend memory-mapped (``mapped``: the exact backend; ``faiss``: any oml-faiss backend), or reads an
oml-faiss backend into memory (``faiss-loaded``), and searches
``QUERIES`` (a torch file of ``[q, dim]``), ``K`` neighbours each. It writes to ``OUT`` the ``distances`` and
``ids`` found, the ``seconds`` of the load and search, and what the load and search added to the process's
memory, in bytes: ``maxrss`` (peak RSS, ``VmHWM``: ``ru_maxrss`` would keep the parent's peak across the fork and
exec, minus ``VmRSS`` before the load; the process's peak: meaningful for the first search only), ``anon`` (its
own memory, ``RssAnon``) and ``file`` (the pages of the files it maps, which the kernel may drop, ``RssFile``)
after the search minus before the load. A load refused by the limit exits 3 after printing ``MemoryError``.

Usage: ``python mapped_search.py QUERIES K HEADROOM MODE FOLDER OUT [MODE FOLDER OUT ...]`` (``MODE``:
``mapped``, ``whole``, ``faiss`` or ``faiss-loaded``)
"""

from __future__ import annotations

import re
import resource
import sys
import time
from collections.abc import Callable
from functools import partial
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
    if mode in ("faiss", "faiss-loaded"):
        from oml_faiss import FaissKnnIndex  # an optional plugin: imported only for it

        return partial(FaissKnnIndex.load, mapped=mode == "faiss")
    return load_whole if mode == "whole" else ExactKnnIndex.load


def main(queries_file: Path, k: int, headroom: int, searches: list[tuple[str, Path, Path]]) -> int:
    queries, loads = torch.load(queries_file, weights_only=True), [loader(mode) for mode, _, _ in searches]
    if headroom:
        limit = status_bytes("VmData") + headroom
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    for load, (_, folder, out) in zip(loads, searches, strict=True):
        if search(load, folder, queries, k, out):
            return 3
    return 0


def search(load: Callable[[Path], IKnnIndex], folder: Path, queries: torch.Tensor, k: int, out: Path) -> bool:
    """Open ``folder`` by ``load``, search ``queries``, write what was found and measured into ``out``; whether
    the limit refused it (``MemoryError`` printed)."""
    before = {key: status_bytes(key) for key in ("VmRSS", "RssAnon", "RssFile")}
    start = time.perf_counter()
    try:
        index = load(folder)  # kept until its memory is measured
        result = index.search(queries, k)
    except MemoryError:
        print("MemoryError", flush=True)
        return True
    seconds = time.perf_counter() - start
    memory = {
        "maxrss": status_bytes("VmHWM") - before["VmRSS"],
        "anon": status_bytes("RssAnon") - before["RssAnon"],
        "file": status_bytes("RssFile") - before["RssFile"],
    }
    torch.save({"distances": result.distances, "ids": result.ids, "seconds": seconds, **memory}, out)
    return False


if __name__ == "__main__":
    queries_file, k, headroom, *rest = sys.argv[1:]
    triples = [(rest[i], Path(rest[i + 1]), Path(rest[i + 2])) for i in range(0, len(rest), 3)]
    sys.exit(main(Path(queries_file), int(k), int(headroom), triples))
