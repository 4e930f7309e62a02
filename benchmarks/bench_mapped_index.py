"""What opening a large saved index memory-mapped costs in memory, against loading it whole (issue 38, item 4):
random float32 rows saved by ``ExactKnnIndex.save`` and by the oml-faiss backends ``faiss_flat``, ``faiss_ivf``
and ``faiss_ivfpq`` (at their defaults), then, each in a fresh process (``tests/scripts/mapped_search.py``),
opened and ``--queries`` queries searched (k=10): the exact backend opened by ``ExactKnnIndex.load``
(``mapped``: the embeddings memory-mapped) or its ``embeddings.npy`` read into memory and added to a new index
(``whole``); a faiss backend opened by ``FaissKnnIndex.load`` (``faiss``: memory-mapped) or by
``FaissKnnIndex.load(mapped=False)`` (``faiss-loaded``: read into memory).
Reported: what the load and search added to the process's memory (the interpreter, torch and the queries
excluded): peak RSS (``VmHWM``, the ``ru_maxrss`` of this process alone, which counts the pages of the mapped
file that the search touched), and, after the search, ``RssAnon`` (the process's own memory) and ``RssFile``
(pages of mapped files, which the kernel may drop); and the seconds of the load and search.

Run from the repository root with the project's virtualenv (oml-faiss installed)::

    .venv/bin/python benchmarks/bench_mapped_index.py --n 1000000 --dim 128
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from oml_core.interfaces.knn import IKnnIndex
from oml_core.knn.exact import ExactKnnIndex

SCRIPT = Path(__file__).resolve().parent.parent / "tests" / "scripts" / "mapped_search.py"
ROWS = 65536
MIB = 2**20
#: The cases measured: (the label of the row, the saved backend's folder, the script's mode).
CASES = [
    ("mapped", "exact", "mapped"),
    ("whole", "exact", "whole"),
    ("faiss_flat, mapped", "faiss_flat", "faiss"),
    ("faiss_ivf, mapped", "faiss_ivf", "faiss"),
    ("faiss_ivf, loaded", "faiss_ivf", "faiss-loaded"),
    ("faiss_ivfpq, mapped", "faiss_ivfpq", "faiss"),
    ("faiss_ivfpq, loaded", "faiss_ivfpq", "faiss-loaded"),
]


def build(folder: Path, n: int, dim: int, n_queries: int) -> None:
    """Save the exact backend and each faiss one of the same ``n`` random rows into ``folder / <name>`` (one at a
    time), and the queries into ``folder / "queries.pt"``."""
    from oml_faiss import FaissFlatIndex, FaissIVFIndex, FaissIVFPQIndex  # an optional plugin: imported here

    backends: dict[str, Callable[[str], IKnnIndex]] = {
        "exact": ExactKnnIndex,
        "faiss_flat": FaissFlatIndex,
        "faiss_ivf": FaissIVFIndex,
        "faiss_ivfpq": FaissIVFPQIndex,
    }
    for name, cls in backends.items():
        generator, index = torch.Generator().manual_seed(0), cls("l2")
        for start in range(0, n, ROWS):
            index.add(torch.randn(min(ROWS, n - start), dim, generator=generator))
        index.save(folder / name)
    torch.save(torch.randn(n_queries, dim, generator=generator), folder / "queries.pt")


def measure(folder: Path, saved: str, mode: str) -> dict[str, float]:
    """Load and search in a fresh process (no memory limit); what it reported."""
    out = folder / f"{saved}-{mode}.pt"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(SCRIPT), str(folder / "queries.pt"), "10", "0", mode, str(folder / saved)]
    subprocess.run([*command, str(out)], env=env, check=True)
    return torch.load(out, weights_only=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        build(folder, args.n, args.dim, args.queries)
        size = (folder / "exact" / "embeddings.npy").stat().st_size
        print(f"n={args.n} dim={args.dim}: embeddings {size / MIB:.0f} MiB, {args.queries} queries, k=10")
        print("| open | file MiB | peak RSS MiB | RssAnon MiB | RssFile MiB | load + search s |")
        print("|---|---:|---:|---:|---:|---:|")
        for label, saved, mode in CASES:
            found = measure(folder, saved, mode)
            maxrss, anon, file = found["maxrss"], found["anon"], found["file"]
            files = sum(p.stat().st_size for p in (folder / saved).iterdir()) / MIB
            print(
                f"| {label} | {files:.0f} | {maxrss / MIB:.0f} | {anon / MIB:.0f} | {file / MIB:.0f} "
                f"| {found['seconds']:.2f} |"
            )


if __name__ == "__main__":
    main()
