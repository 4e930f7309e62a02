"""Benchmark: ``calc_pcf`` of oml against OML 4.0's, side by side (see :mod:`interleave`).

Each side runs in its own interpreter (``--oml-python`` is OML 4.0's environment; this script's own interpreter
is oml's), both alive for the whole run with the same torch threads, and every case is timed in alternating
turns, ``--rounds`` times. The embeddings are the same on both sides: a seeded ``[n, d]`` standard normal matrix
whose column ``j`` is scaled by ``(j + 1) ** -0.5`` (a decaying spectrum, so that the fractions are not all
alike), float32. Both sides' values are printed, and must agree.

Prints a markdown table (see ``benchmarks/RESULTS.md``). Usage, from the repository root::

    .venv/bin/python benchmarks/bench_pcf.py --oml-python /work/oml_ref/.venv/bin/python --threads 1
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

from interleave import Side, machine_line, run_interleaved, serve

#: ``n x d`` shapes of the embeddings.
CASES = ("64x2048", "64x4096", "10000x384", "1000x4096")
#: The explained variances asked for.
PCF_VARIANCE = (0.5, 0.9, 0.99)
#: Side names: this repository's oml, and OML 4.0 in another environment.
OML_NEW, OML_REF = "oml", "OML-4.0"


def worker(side: str, threads: int, seed: int) -> None:
    """Serve the cases with ``side``'s ``calc_pcf`` (the only import that differs between the two sides)."""
    import torch

    torch.set_num_threads(threads)
    if side == OML_NEW:
        from oml_core.functional.metrics import calc_pcf
    else:
        from oml.functional.metrics import calc_pcf

    def prepare(case: str) -> Callable[[], Any]:
        n, d = map(int, case.split("x"))
        generator = torch.Generator().manual_seed(seed)
        embeddings = torch.randn(n, d, generator=generator) * torch.arange(1, d + 1).float().rsqrt()
        return lambda: [float(v) for v in calc_pcf(embeddings, PCF_VARIANCE)]

    serve(prepare)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--oml-python", default="/work/oml_ref/.venv/bin/python", help="OML 4.0's interpreter"
    )
    parser.add_argument("--cases", nargs="+", default=list(CASES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=1, help="timed calls a side makes in a round, at least")
    parser.add_argument("--min-seconds", type=float, default=0.5, help="and for at least this long")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--worker", choices=(OML_NEW, OML_REF), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.threads, args.seed)
        return

    sides = [Side(OML_NEW, sys.executable), Side(OML_REF, args.oml_python)]
    print(machine_line(args.threads))
    for side in sides:
        side.start(os.path.abspath(__file__), ["--seed", str(args.seed)], args.threads)
    try:
        times = run_interleaved(sides, args.cases, args.rounds, args.calls, args.min_seconds, warmup=1)
    finally:
        for side in sides:
            side.stop()
    print(
        f"\ncalc_pcf(embeddings, {PCF_VARIANCE}), float32, torch threads={args.threads}, rounds={args.rounds} "
        f"(alternating order), seed={args.seed}\n"
    )
    print(
        f"| n x d | {OML_NEW} median ms | {OML_REF} median ms | {OML_REF} / {OML_NEW} | calls | values | agree |"
    )
    print("|---|---|---|---|---|---|---|")
    for case in args.cases:
        case_times = times[case]
        new, ref = case_times.median_ms(OML_NEW), case_times.median_ms(OML_REF)
        values = case_times.results[OML_NEW]
        agree = all(abs(a - b) < 1e-6 for a, b in zip(values, case_times.results[OML_REF]))
        calls = f"{len(case_times.seconds[OML_NEW])} / {len(case_times.seconds[OML_REF])}"
        shown = ", ".join(f"{v:.4f}" for v in values)
        print(f"| {case} | {new:.1f} | {ref:.1f} | {ref / new:.1f} | {calls} | {shown} | {agree} |")


if __name__ == "__main__":
    main()
