"""What a change of a gallery index costs: ``upsert`` + ``commit`` of one item, ``remove`` + ``commit`` of one
item, a reader's ``refresh()`` that takes the new generation and one that finds none, against building and
saving an index of the resulting items from scratch (what a change cost before: a rebuild, without the
embedding). Embeddings only (no extractor), random float32 rows.

Run from the repository root with the project's virtualenv::

    .venv/bin/python benchmarks/bench_index_changes.py --n 10000 100000 --dim 384 --backends exact faiss_flat faiss_ivf
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from oml_core.index import GalleryIndex


def timed(run: Callable[[], object], repeat: int) -> float:
    """The median wall time of ``run`` in seconds, over ``repeat`` runs."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench(n: int, dim: int, backend: str, repeat: int, folder: Path) -> dict[str, float]:
    """The costs of one backend at ``n`` items of dimension ``dim`` (see the module)."""
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(n, dim, generator=generator)
    built = GalleryIndex(knn_backend=backend)
    built.add(embeddings)
    built.save(folder / "index")
    writer, reader = GalleryIndex.load(folder / "index"), GalleryIndex.load(folder / "index")
    new = torch.randn(1, dim, generator=generator)
    next_id = [n]

    def upsert() -> None:
        writer.upsert(new, ids=[next_id[0]])
        writer.commit()
        next_id[0] += 1

    def remove() -> None:
        writer.remove([writer.ids[0]])
        writer.commit()

    def refresh() -> None:
        writer.remove([writer.ids[0]])
        writer.commit()
        start = time.perf_counter()
        reader.refresh()
        refreshed.append(time.perf_counter() - start)

    def rebuild() -> None:
        target = folder / "scratch"
        shutil.rmtree(target, ignore_errors=True)
        scratch = GalleryIndex(knn_backend=backend)
        scratch.add(writer.embeddings, ids=writer.ids)
        scratch.save(target)

    refreshed: list[float] = []
    result = {
        "upsert + commit": timed(upsert, repeat),
        "remove + commit": timed(remove, repeat),
    }
    for _ in range(repeat):
        refresh()
    result["refresh (new generation)"] = statistics.median(refreshed)
    result["refresh (none)"] = timed(reader.refresh, repeat)
    result["rebuild + save"] = timed(rebuild, repeat)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--backends", nargs="+", default=["exact", "faiss_flat", "faiss_ivf"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    columns = [
        "upsert + commit",
        "remove + commit",
        "refresh (new generation)",
        "refresh (none)",
        "rebuild + save",
    ]
    print("| n | backend | " + " | ".join(f"{c} s" for c in columns) + " |")
    print("|---|---|" + "---|" * len(columns))
    for n in args.n:
        for backend in args.backends:
            with tempfile.TemporaryDirectory() as folder:
                result = bench(n, args.dim, backend, args.repeat, Path(folder))
            cells = " | ".join(f"{result[c]:.4f}" for c in columns)
            print(f"| {n} | {backend} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
