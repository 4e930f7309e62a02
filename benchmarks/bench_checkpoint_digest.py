"""Benchmark: what the sha256 digest of oml's checkpoints (``oml_core.utils.digest``) costs per save and per load.

A checkpoint of ``--megabytes`` MB of float32 tensors (a state dict of 4 MB tensors; 134 MB is the size of the
``last.ckpt`` files in the report that asked for the digest) is saved and loaded in a folder of ``--dir``
(default: the system's temporary folder), side by side:

- **save, before**: ``torch.save`` into memory, then ``atomic_write_bytes`` (temporary file, fsync, rename): what
  ``atomic_torch_save`` did before the digest;
- **save, sealed**: ``atomic_torch_save``: ``torch.save`` straight into the temporary file through
  ``SealingWriter`` (the bytes hashed on their way, the 96-byte record at the end), fsync, rename;
- **load, before**: ``torch.load(path, weights_only=True)``;
- **load, verified**: ``verify_checkpoint(path)`` (the file read and hashed once), then the same ``torch.load``.

Protocol: ``--repeat`` rounds, each timing the four in turn (interleaved, so that a drift of the machine's speed
moves all four); the table gives the medians and the median of the per-round differences.

Usage (from the repository root)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_checkpoint_digest.py --megabytes 134 --repeat 7
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from oml_core.utils.atomic import atomic_torch_save, atomic_write_bytes
from oml_core.utils.digest import DigestStatus, verify_checkpoint

#: The size of each tensor of the benchmark's state dict, in float32 values (4 MB).
TENSOR_VALUES = 2**20


def checkpoint_of(megabytes: int) -> dict:
    """A Lightning-like checkpoint of ``megabytes`` MB of seeded random float32 tensors."""
    generator = torch.Generator().manual_seed(0)
    n_tensors = max(1, megabytes * 2**20 // (4 * TENSOR_VALUES))
    state_dict = {
        f"layer{i}.weight": torch.randn(TENSOR_VALUES, generator=generator) for i in range(n_tensors)
    }
    return {"state_dict": state_dict, "epoch": 3, "global_step": 1000, "loops": {}, "optimizer_states": []}


def save_before(obj: dict, path: Path) -> None:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    atomic_write_bytes(path, buffer.getbuffer())


def load_before(path: Path) -> None:
    torch.load(path, map_location="cpu", weights_only=True)


def load_verified(path: Path) -> None:
    assert verify_checkpoint(path) is DigestStatus.VERIFIED
    torch.load(path, map_location="cpu", weights_only=True)


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=134)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary folder)")
    args = parser.parse_args()

    obj = checkpoint_of(args.megabytes)
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        plain, sealed = Path(folder) / "plain.ckpt", Path(folder) / "sealed.ckpt"
        times: dict[str, list[float]] = {
            "save_before": [],
            "save_sealed": [],
            "load_before": [],
            "load_verified": [],
        }
        for _ in range(args.repeat):
            times["save_before"].append(timed(lambda: save_before(obj, plain)))
            times["save_sealed"].append(timed(lambda: atomic_torch_save(obj, sealed)))
            times["load_before"].append(timed(lambda: load_before(plain)))
            times["load_verified"].append(timed(lambda: load_verified(sealed)))
        size = sealed.stat().st_size

    def diff(a: str, b: str) -> float:
        return statistics.median(y - x for x, y in zip(times[a], times[b], strict=True))

    print(f"checkpoint: {size / 1e6:.1f} MB, {args.repeat} interleaved rounds (medians, seconds)")
    print("| | before | with the digest | difference (median of the rounds') |")
    print("|---|---|---|---|")
    for what, before, after in (
        ("save", "save_before", "save_sealed"),
        ("load", "load_before", "load_verified"),
    ):
        print(
            f"| {what} | {statistics.median(times[before]):.3f} | {statistics.median(times[after]):.3f} | "
            f"{diff(before, after):+.3f} |"
        )


if __name__ == "__main__":
    main()
