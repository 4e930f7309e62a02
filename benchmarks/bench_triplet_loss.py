"""Benchmark: forward + backward of ``TripletLossWithMiner(margin=0.2)`` on a batch of random features.

The features are a ``[n_labels * n_instances, --dim]`` standard normal tensor that requires grad (no backbone),
the labels ``n_labels x n_instances`` in a random order. Every (miner, batch) case runs ``--repeat`` times,
each run in a fresh subprocess with ``--threads`` torch threads (and ``OMP_NUM_THREADS``), so that its peak
memory is its own. A run times ``--steps`` steps (loss, then ``backward``) after ``--warmup`` ones and keeps
their median; the table shows the best run's median (the machine may be shared: the fastest run is the least
disturbed one) and the largest memory:

- ``peak RSS MB``: the process's resident-set high-water mark (``ru_maxrss``), libraries included;
- ``work MB``: that high-water mark minus the resident set just before the first step, i.e. what the
  steps (torch allocations included, which ``tracemalloc`` does not see) added at their peak.

Miners: ``all`` is ``AllTripletsMiner()`` (every triplet of the batch), ``hard`` is ``HardTripletsMiner()``
(the hardest positive and negative of every anchor; mining included in the time, and also timed alone:
``miner._sample alone``). Prints a markdown table with the targets of issue 4. Usage::

    python benchmarks/bench_triplet_loss.py --batches 16x4 64x4 256x4 --miners all hard --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

import torch
from oml_losses.miners.inbatch_all_tri import AllTripletsMiner
from oml_losses.miners.inbatch_hard_tri import HardTripletsMiner
from oml_losses.triplet import TripletLossWithMiner
from torch import Tensor

from oml_core.interfaces.miners import ITripletsMiner, ITripletsMinerInBatch

MARGIN = 0.2
MINERS: dict[str, type[ITripletsMiner]] = {"all": AllTripletsMiner, "hard": HardTripletsMiner}
#: Median ms per step that issue 4 asks for, by (miner, batch size).
TARGET_MS = {
    ("all", 64): 1.5,
    ("all", 256): 15.0,
    ("all", 1024): 150.0,
    ("hard", 64): 0.7,
    ("hard", 256): 2.7,
    ("hard", 1024): 19.6,
}
#: Miners whose ``_sample`` alone is timed too (the all-triplets loss mines no index triplets).
MINED_ALONE = ("hard",)
#: Peak work memory that issue 4 asks for, by (miner, batch size).
TARGET_WORK_MB = {("all", 1024): 1024.0}


def make_batch(n_labels: int, n_instances: int, dim: int, seed: int) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(n_labels).repeat_interleave(n_instances)
    labels = labels[torch.randperm(len(labels), generator=generator)]
    features = torch.randn(len(labels), dim, generator=generator).requires_grad_(True)
    return features, labels


def current_rss_mb() -> float:
    """The resident set size of this process now (Linux ``/proc/self/statm``), in MiB."""
    with open("/proc/self/statm") as statm:
        resident_pages = int(statm.read().split()[1])
    return resident_pages * resource.getpagesize() / 2**20


def run_case(miner: str, n_labels: int, n_instances: int, args: argparse.Namespace) -> dict[str, float]:
    """One case in this process: the median step time and the memory."""
    torch.set_num_threads(args.threads)
    features, labels = make_batch(n_labels, n_instances, args.dim, args.seed)
    criterion = TripletLossWithMiner(margin=MARGIN, miner=MINERS[miner]())
    rss_before = current_rss_mb()
    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        criterion(features, labels).backward()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
        features.grad = None
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    result = {"ms": 1e3 * statistics.median(times), "peak_rss_mb": peak_mb, "work_mb": peak_mb - rss_before}
    if miner in MINED_ALONE:
        result["mining_ms"] = 1e3 * statistics.median(time_mining(criterion.miner, features, labels, args))
    return result


def time_mining(
    miner: ITripletsMinerInBatch, features: Tensor, labels: Tensor, args: argparse.Namespace
) -> list[float]:
    """Seconds of ``miner._sample`` alone (the index triplets the loss then takes), step by step."""
    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        miner._sample(features.detach(), labels.tolist())
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    return times


def run_in_subprocesses(miner: str, batch: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--case", miner, "--batches", batch]
    for name in ("dim", "seed", "threads", "warmup", "steps"):
        command += [f"--{name}", str(getattr(args, name))]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    runs = []
    for _ in range(args.repeat):
        out = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        if out.returncode != 0:
            raise RuntimeError(f"the {miner!r} case of the batch {batch} failed:\n{out.stderr}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return {
        "ms": min(run["ms"] for run in runs),
        "ms_runs": [run["ms"] for run in runs],
        "peak_rss_mb": max(run["peak_rss_mb"] for run in runs),
        "work_mb": max(run["work_mb"] for run in runs),
        "mining_ms": min((run["mining_ms"] for run in runs if "mining_ms" in run), default=None),
    }


def parse_batch(batch: str) -> tuple[int, int]:
    """``"64x4"`` -> ``(64, 4)``: labels x instances."""
    n_labels, _, n_instances = batch.partition("x")
    return int(n_labels), int(n_instances)


def markdown_table(rows: list[tuple[str, str, dict[str, Any]]]) -> str:
    lines = [
        "| miner | batch (labels x instances) | B | median ms / step (best run) | runs' medians ms | target ms | "
        "miner._sample alone ms | peak RSS MB | work MB | target work MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for miner, batch, result in rows:
        n_labels, n_instances = parse_batch(batch)
        size = n_labels * n_instances
        target = TARGET_MS.get((miner, size))
        target_mb = TARGET_WORK_MB.get((miner, size))
        lines.append(
            f"| {miner} | {batch} | {size} | {result['ms']:.2f} | "
            + ", ".join(f"{ms:.2f}" for ms in result["ms_runs"])
            + f" | {'-' if target is None else target} | "
            + ("-" if result["mining_ms"] is None else f"{result['mining_ms']:.2f}")
            + " | "
            f"{result['peak_rss_mb']:.0f} | {result['work_mb']:.0f} | "
            f"{'-' if target_mb is None else f'< {target_mb:.0f}'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", nargs="+", default=["16x4", "64x4", "256x4"], help="labels x instances")
    parser.add_argument("--miners", nargs="+", choices=sorted(MINERS), default=["all", "hard"])
    parser.add_argument("--dim", type=int, default=384, help="feature dimension")
    parser.add_argument("--seed", type=int, default=0, help="seed of the features and the labels' order")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (and OMP_NUM_THREADS)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=30, help="timed steps (their median is kept)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case, each in a fresh subprocess")
    parser.add_argument("--case", choices=sorted(MINERS), help=argparse.SUPPRESS)  # one case, in-process
    args = parser.parse_args()
    if args.case is not None:
        print(json.dumps(run_case(args.case, *parse_batch(args.batches[0]), args)))
        return
    rows = []
    for miner in args.miners:
        for batch in args.batches:
            result = run_in_subprocesses(miner, batch, args)
            rows.append((miner, batch, result))
            print(f"{miner} {batch}: {result['ms']:.2f} ms", file=sys.stderr, flush=True)
    print(
        f"TripletLossWithMiner(margin={MARGIN}), forward + backward, dim={args.dim}, torch threads={args.threads}, "
        f"{args.steps} timed steps after {args.warmup}, runs per case={args.repeat}, seed={args.seed}\n"
    )
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
