"""What ``oml search`` on a large saved gallery index costs in memory, opened memory-mapped (index format 5:
``items.arrow`` and ``embeddings.npy``) against read whole (the same index in format 4's files: ``items.json`` and
the embeddings inside ``embeddings.pt``) (issue 38, item 4).

An index of ``--n`` random embeddings (with names ``images/<i>.jpg`` and labels), the extractor ``tiny_conv`` of
the example plugin (random weights) and the ``exact`` backend (whose own save is mapped in both cases) is saved;
then, in a fresh process each (``tests/scripts/limited_search.py``, no memory limit, one thread), a search of a
small index first imports and builds everything, and ``oml search INDEX probe.png`` is measured: the smallest
data memory it needs beyond that (the ``RLIMIT_DATA`` headroom under which it still answers, found by bisection
to ``--resolution`` MiB: what the process allocates, the mapped files not counted), the peak RSS it added
(``VmHWM``, which counts the pages of the mapped files that the search touched, and which the kernel may drop
under pressure) and its seconds.

Run from the repository root with the project's virtualenv::

    .venv/bin/python benchmarks/bench_mapped_gallery_index.py --n 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the tests' helpers: the search under a limit, an index in format 4's files

from oml_core.index import GalleryIndex  # noqa: E402
from tests.scripts.old_indexes import as_version_4  # noqa: E402

SCRIPT = ROOT / "tests" / "scripts" / "limited_search.py"
ROWS = 65536
MIB = 2**20


def build(folder: Path, n: int, dim: int) -> Path:
    """Save an index of ``n`` random embeddings of ``dim`` (added ``ROWS`` at a time) into ``folder``."""
    index = GalleryIndex(
        extractor={"name": "tiny_conv", "args": {"feat_dim": dim}},
        transforms={"name": "norm_resize", "args": {"im_size": 32}},
    )
    generator = torch.Generator().manual_seed(0)
    for start in range(0, n, ROWS):
        rows = range(start, min(n, start + ROWS))
        index.add(
            torch.randn(len(rows), dim, generator=generator),
            labels=[i % 1000 for i in rows],
            paths=[f"images/{i}.jpg" for i in rows],
        )
    return index.save(folder)


def search(small: Path, index: Path, headroom: int) -> subprocess.CompletedProcess[str]:
    """``oml search`` of ``index`` in a fresh process, with ``headroom`` bytes of data memory (0: no limit)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "1"}
    command = [
        sys.executable,
        str(SCRIPT),
        str(headroom),
        str(small),
        str(index),
        str(index / "probe.png"),
        "10",
    ]
    return subprocess.run(command, env=env, capture_output=True, text=True, check=False)


def measure(small: Path, index: Path) -> dict[str, float]:
    """What ``oml search`` of ``index`` added to its process's memory (no limit), and its seconds."""
    done = search(small, index, 0)
    if done.returncode != 0:
        raise RuntimeError(done.stdout + done.stderr)
    return json.loads(done.stderr.strip().splitlines()[-1])


def least_headroom(small: Path, index: Path, high: int, resolution: int) -> int:
    """The smallest data headroom (within ``resolution`` bytes, at most ``high``) under which the search answers."""
    low = 0
    while high - low > resolution:
        middle = (low + high) // 2
        if search(small, index, middle).returncode == 0:
            high = middle
        else:
            low = middle
    return high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--resolution", type=int, default=8, help="MiB of the headroom's bisection")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        small, index = build(folder / "small", 10, args.dim), build(folder / "mapped", args.n, args.dim)
        whole = Path(shutil.copytree(index, folder / "whole"))
        as_version_4(whole)
        embeddings = args.n * args.dim * 4
        print(f"{args.n} items of dim {args.dim}: {embeddings / MIB:.0f} MiB of embeddings")
        print("| open | least data headroom (MiB) | peak RSS added (MiB) | seconds |")
        print("|---|---|---|---|")
        for name, saved in (("mapped (format 5)", index), ("whole (format 4)", whole)):
            least = least_headroom(small, saved, 4 * embeddings, args.resolution * MIB)
            runs = [measure(small, saved) for _ in range(args.repeat)]
            peaks = " / ".join(f"{run['maxrss'] / MIB:.0f}" for run in runs)
            seconds = " / ".join(f"{run['seconds']:.2f}" for run in runs)
            print(f"| {name} | {least / MIB:.0f} | {peaks} | {seconds} |")


if __name__ == "__main__":
    main()
