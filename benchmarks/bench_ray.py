"""Benchmark: ``oml embed`` (oml-ray) on a new local Ray against ``oml predict`` on the same items.

``--n`` generated pictures (random 96x96 PNGs) in a folder (``data_dir``), embedded by the default ResNet18 at
64 px on the CPU: once by ``oml predict`` (one process), once by ``oml embed`` with ``--workers`` actors of one CPU
each, both as programs of their own, timed whole (start-up included: Ray's start is part of what ``oml embed``
costs). Prints a markdown row per run and the overhead ratio (see ``benchmarks/RESULTS.md``)::

    python benchmarks/bench_ray.py --n 2000 --workers 1 2
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image


def make_images(folder: Path, n: int) -> None:
    """``n`` random 96x96 RGB pictures in ``folder`` (seeded)."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (96, 96, 3), dtype=np.uint8)).save(folder / f"{i:06d}.png")


def timed(args: list[str], env: dict[str, str]) -> float:
    """The wall seconds of ``oml ARGS`` (it must succeed)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "oml_core.cli", *args], env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--shard-rows", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="oml-bench-ray-") as tmp:
        root = Path(tmp)
        make_images(root / "images", args.n)
        env = {
            **os.environ,
            "OML_CACHE_DIR": str(root / "cache"),
            "RAY_TMPDIR": str(root),
            "RAY_AUTH_TOKEN": secrets.token_hex(16),  # else Ray writes one to ~/.ray
        }
        data = f"data_dir={root / 'images'}"
        predict = timed(["predict", data, f"save_dir={root / 'pred'}", "predictions_format=parquet"], env)
        print("| run | workers | s | items/s | / oml predict |")
        print("|---|---|---|---|---|")
        print(f"| oml predict | 1 process | {predict:.1f} | {args.n / predict:.0f} | 1.00 |")
        for workers in args.workers:
            out = root / f"embed-{workers}"
            flags = ["--workers", str(workers), "--shard-rows", str(args.shard_rows)]
            seconds = timed(["embed", *flags, str(out), data], env)
            print(
                f"| oml embed | {workers} | {seconds:.1f} | {args.n / seconds:.0f} | {seconds / predict:.2f} |"
            )


if __name__ == "__main__":
    main()
