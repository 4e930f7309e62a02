"""Benchmark: a training step of ``TripletLossWithMiner(margin=0.2, miner=HardTripletsMiner())``, oml against
OML 4.0, side by side (see :mod:`interleave`).

Each side runs in its own interpreter (``--oml-python`` is OML 4.0's environment; this script's own interpreter
is oml's), both alive for the whole run with the same torch threads, and the cases are timed in alternating
turns, ``--rounds`` times. The batch is the same on both sides: ``--labels x --instances`` labels as a balance
sampler gives them (every label ``--instances`` times), in a seeded random order, and a seeded standard normal
``[B, --dim]`` float32 feature tensor that requires grad (no backbone). Cases:

- ``step``: the loss and its ``backward()`` (mining included), the training step of the loss;
- ``mine``: ``miner._sample(features.detach(), labels)`` alone.

Both sides' losses are printed, and must agree. Prints a markdown table (see ``benchmarks/RESULTS.md``).
Usage, from the repository root::

    .venv/bin/python benchmarks/bench_hard_triplets.py --oml-python /work/oml_ref/.venv/bin/python --threads 1
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from interleave import Side, machine_line, run_interleaved, serve

CASES = ("step", "mine")
MARGIN = 0.2
#: Side names: this repository's oml, and OML 4.0 in another environment.
OML_NEW, OML_REF = "oml", "OML-4.0"


def worker(side: str, args: argparse.Namespace) -> None:
    """Serve the cases with ``side``'s loss and miner (the only imports that differ between the two sides)."""
    import torch

    torch.set_num_threads(args.threads)
    if side == OML_NEW:
        from oml_losses import HardTripletsMiner, TripletLossWithMiner
    else:
        from oml.losses.triplet import TripletLossWithMiner
        from oml.miners.inbatch_hard_tri import HardTripletsMiner

    generator = torch.Generator().manual_seed(args.seed)
    labels = torch.arange(args.labels).repeat_interleave(args.instances)
    labels = labels[torch.randperm(len(labels), generator=generator)]
    features = torch.randn(len(labels), args.dim, generator=generator).requires_grad_(True)
    criterion = TripletLossWithMiner(margin=MARGIN, miner=HardTripletsMiner())

    def step() -> float:
        features.grad = None
        loss = criterion(features, labels)
        loss.backward()
        return float(loss.detach())

    def mine() -> int:
        return len(criterion.miner._sample(features.detach(), labels)[0])

    def prepare(case: str) -> Callable[[], Any]:
        return {"step": step, "mine": mine}[case]

    serve(prepare)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--oml-python", default="/work/oml_ref/.venv/bin/python", help="OML 4.0's interpreter"
    )
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--labels", type=int, default=256)
    parser.add_argument("--instances", type=int, default=4)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=5, help="timed calls a side makes in a round, at least")
    parser.add_argument("--min-seconds", type=float, default=0.5, help="and for at least this long")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", choices=(OML_NEW, OML_REF), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args)
        return

    sides = [Side(OML_NEW, sys.executable), Side(OML_REF, args.oml_python)]
    print(machine_line(args.threads))
    batch = ["--labels", str(args.labels), "--instances", str(args.instances), "--dim", str(args.dim)]
    for side in sides:
        side.start(os.path.abspath(__file__), [*batch, "--seed", str(args.seed)], args.threads)
    try:
        times = run_interleaved(sides, args.cases, args.rounds, args.calls, args.min_seconds, args.warmup)
    finally:
        for side in sides:
            side.stop()
    b = args.labels * args.instances
    print(
        f"\nTripletLossWithMiner(margin={MARGIN}, miner=HardTripletsMiner()), batch {args.labels}x{args.instances} "
        f"(B={b}), dim={args.dim}, float32, torch threads={args.threads}, rounds={args.rounds} (alternating "
        f"order), seed={args.seed}\n"
    )
    print(
        f"| case | {OML_NEW} median ms | {OML_REF} median ms | {OML_NEW} / {OML_REF} | {OML_NEW} min ms | "
        f"{OML_REF} min ms | calls | result ({OML_NEW} / {OML_REF}) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for case in args.cases:
        t = times[case]
        new, ref = t.median_ms(OML_NEW), t.median_ms(OML_REF)
        calls = f"{len(t.seconds[OML_NEW])} / {len(t.seconds[OML_REF])}"
        result = f"{t.results[OML_NEW]} / {t.results[OML_REF]}"
        print(
            f"| {case} | {new:.2f} | {ref:.2f} | {new / ref:.2f} | {t.min_ms(OML_NEW):.2f} | "
            f"{t.min_ms(OML_REF):.2f} | {calls} | {result} |"
        )


if __name__ == "__main__":
    main()
