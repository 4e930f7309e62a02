"""Embeddings files at scale: writing N float32 vectors batch by batch with ``EmbeddingsWriter`` (as ``oml
predict predictions_format=...`` does) and reading them back with ``read_embeddings_file``, per format: wall
time, file size and the peak memory of the process above what it held before (``ru_maxrss``), so that "a million
vectors are never held whole" is measured, not assumed.

Every case runs in a fresh subprocess (its own high-water mark). The vectors are made batch by batch from a
seeded generator: the writing process never holds more than a batch of them; the reading process holds the
matrix it returns (memory-mapped for npy: only the pages it touches). The baseline is taken after the imports
(pyarrow's alone is ~130 MB).

    .venv/bin/python benchmarks/bench_embeddings_files.py --n 1000000 --dim 512 --formats parquet npy
    .venv/bin/python benchmarks/bench_embeddings_files.py --n 100000 --dim 512 --formats json
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _import_libraries(path: Path) -> None:
    """Import what the format needs before the baseline is taken (pyarrow's import alone is ~130 MB)."""
    if path.suffix == ".parquet":
        from oml_core.io.parquet_embeddings import import_pyarrow

        import_pyarrow()


def write_case(path: Path, n: int, dim: int, batch: int, seed: int) -> dict[str, float]:
    """Write ``n`` vectors of ``dim`` to ``path`` in batches of ``batch``; time and memory of this process."""
    import numpy as np

    from oml_core.io import EmbeddingsProvenance, EmbeddingsWriter

    provenance = EmbeddingsProvenance({"name": "resnet", "args": {"weights": None}}, "0" * 64, None)
    _import_libraries(path)
    before = _peak_mb()
    start = time.perf_counter()
    with EmbeddingsWriter(path, provenance) as writer:
        for first in range(0, n, batch):
            size = min(batch, n - first)
            vectors = np.random.default_rng([seed, first]).standard_normal((size, dim), dtype=np.float32)
            ids = range(first, first + size)
            writer.write(
                vectors, ids=ids, paths=[f"images/{i:08d}.jpg" for i in ids], labels=[i // 4 for i in ids]
            )
    seconds = time.perf_counter() - start
    return {"write_s": seconds, "write_extra_mb": _peak_mb() - before, "file_mb": path.stat().st_size / 2**20}


def read_case(path: Path) -> dict[str, float]:
    """Read ``path`` back (every value checked); time and memory of this process."""
    from oml_core.io import read_embeddings_file

    _import_libraries(path)
    before = _peak_mb()
    start = time.perf_counter()
    found = read_embeddings_file(path)
    seconds = time.perf_counter() - start
    return {"read_s": seconds, "read_extra_mb": _peak_mb() - before, "rows": len(found)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--batch", type=int, default=4096, help="vectors per write (oml predict: bs)")
    parser.add_argument("--formats", nargs="+", default=["parquet", "npy", "json"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--case", nargs=4, help=argparse.SUPPRESS)  # in a subprocess: what path n dim|-
    args = parser.parse_args()
    if args.case:
        what, path, n, dim = args.case
        if what == "write":
            result = write_case(Path(path), int(n), int(dim), args.batch, args.seed)
        else:
            result = read_case(Path(path))
        print(json.dumps(result))
        return
    print(f"dim={args.dim}, batch={args.batch}, seed={args.seed}\n")
    print("| format | N | vectors MB | file MB | write s | write peak+ MB | read s | read peak+ MB |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.n:
        for name in args.formats:
            with tempfile.TemporaryDirectory(dir=".") as folder:
                path = Path(folder) / f"predictions.{name}"
                results: dict[str, float] = {}
                for what in ("write", "read"):
                    done = subprocess.run(
                        [
                            sys.executable,
                            __file__,
                            "--batch",
                            str(args.batch),
                            "--seed",
                            str(args.seed),
                            "--case",
                            what,
                            str(path),
                            str(n),
                            str(args.dim),
                        ],
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    results.update(json.loads(done.stdout))
                vectors_mb = n * args.dim * 4 / 2**20
                print(
                    f"| {name} | {n} | {vectors_mb:.0f} | {results['file_mb']:.0f} | {results['write_s']:.1f} | "
                    f"{results['write_extra_mb']:.0f} | {results['read_s']:.1f} | {results['read_extra_mb']:.0f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
