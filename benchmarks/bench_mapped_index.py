"""What opening a large saved exact backend memory-mapped costs in memory, against loading its embeddings whole
(issue 38, item 4): random float32 rows saved by ``ExactKnnIndex.save``, then, each in a fresh process
(``tests/scripts/mapped_search.py``), either opened by ``ExactKnnIndex.load`` (``mapped``: the embeddings
memory-mapped) or its ``embeddings.npy`` read into memory and added to a new index (``whole``), or a
``faiss_flat`` index of the same rows opened by ``FaissKnnIndex.load`` (``faiss``: memory-mapped; oml-faiss
needed), and ``--queries`` queries searched (k=10).
Reported: what the load and search added to the process's memory (the interpreter, torch and the queries
excluded): peak RSS (``VmHWM``, the ``ru_maxrss`` of this process alone, which counts the pages of the mapped
file that the search touched), and, after the search, ``RssAnon`` (the process's own memory) and ``RssFile``
(pages of mapped files, which the kernel may drop); and the seconds of the load and search.

Run from the repository root with the project's virtualenv::

    .venv/bin/python benchmarks/bench_mapped_index.py --n 1000000 --dim 128
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from oml_core.knn.exact import ExactKnnIndex

SCRIPT = Path(__file__).resolve().parent.parent / "tests" / "scripts" / "mapped_search.py"
ROWS = 65536
MIB = 2**20


def build(folder: Path, n: int, dim: int, n_queries: int) -> None:
    """Save an exact backend and a ``faiss_flat`` one of the same ``n`` random rows into ``folder / "backend"``
    and ``folder / "faiss"``, and the queries into ``folder / "queries.pt"``."""
    from oml_faiss import FaissFlatIndex  # an optional plugin: imported only here

    generator = torch.Generator().manual_seed(0)
    exact, flat = ExactKnnIndex("l2"), FaissFlatIndex("l2")
    for start in range(0, n, ROWS):
        rows = torch.randn(min(ROWS, n - start), dim, generator=generator)
        exact.add(rows)
        flat.add(rows)
    exact.save(folder / "backend")
    flat.save(folder / "faiss")
    torch.save(torch.randn(n_queries, dim, generator=generator), folder / "queries.pt")


def measure(folder: Path, mode: str) -> dict[str, float]:
    """Load and search in a fresh process (no memory limit); what it reported."""
    out, saved = folder / f"{mode}.pt", folder / ("faiss" if mode == "faiss" else "backend")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        str(SCRIPT),
        str(saved),
        str(folder / "queries.pt"),
        "10",
        str(out),
    ]
    subprocess.run([*command, "0", mode], env=env, check=True)
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
        size = (folder / "backend" / "embeddings.npy").stat().st_size
        print(f"n={args.n} dim={args.dim}: embeddings {size / MIB:.0f} MiB, {args.queries} queries, k=10")
        print("| open | peak RSS MiB | RssAnon MiB | RssFile MiB | load + search s |")
        print("|---|---:|---:|---:|---:|")
        for mode in ("mapped", "whole", "faiss"):
            found = measure(folder, mode)
            maxrss, anon, file = found["maxrss"], found["anon"], found["file"]
            print(
                f"| {mode} | {maxrss / MIB:.0f} | {anon / MIB:.0f} | {file / MIB:.0f} | {found['seconds']:.2f} |"
            )


if __name__ == "__main__":
    main()
