"""Benchmark: the cost of refusing duplicate retrieved ids (``check_unique_retrieved_ids``).

``--queries`` queries with ``--top-k`` distinct int64 ids each (seeded), sorted distances and 3 ground truth ids
each. Three timings, each with the check on and with it replaced by a no-op, in alternating order within this one
process, ``--rounds`` times (median and min ms): the check alone, ``RetrievalResults(distances, ids, gt)`` and
``calc_retrieval_metrics(ids, gt)`` with cmc@1, cmc@5, precision@5 and map@5. Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_unique_ids.py --queries 100000 --top-k 10
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import oml_core.functional.ragged_tops as ragged_tops
import oml_core.retrieval.retrieval_results as retrieval_results
from oml_core.functional.metrics import calc_retrieval_metrics
from oml_core.retrieval import RetrievalResults
from oml_core.utils.ragged import Ragged


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    q, k = args.queries, args.top_k
    generator = torch.Generator().manual_seed(args.seed)
    ids = torch.sort(torch.randint(0, 1_000_000, (q, k), generator=generator), dim=1).values + torch.arange(k)
    ids = ids[:, torch.randperm(k, generator=generator)]  # distinct within each row, in a random order
    distances = torch.sort(torch.rand(q, k, generator=generator), dim=1).values
    gt = torch.cat([ids[:, :2], torch.full((q, 1), 2_000_000)], dim=1)
    lengths = torch.full((q,), k)
    retrieved = Ragged(ids.flatten(), lengths)
    ragged_distances = Ragged(distances.flatten(), lengths)
    ragged_gt = Ragged(gt.flatten(), torch.full((q,), 3))

    check = ragged_tops.check_unique_retrieved_ids
    cases: dict[str, Callable[[], object]] = {
        "the check alone": lambda: check(retrieved),
        "RetrievalResults(distances, ids, gt)": lambda: RetrievalResults(
            ragged_distances, retrieved, ragged_gt
        ),
        "calc_retrieval_metrics(ids, gt)": lambda: calc_retrieval_metrics(
            retrieved, ragged_gt, cmc_top_k=(1, 5), precision_top_k=(5,), map_top_k=(5,), verbose=False
        ),
    }
    seconds: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for mode in ("on", "off") if r % 2 == 0 else ("off", "on"):
            used = check if mode == "on" else (lambda ragged: None)
            retrieval_results.check_unique_retrieved_ids = used
            ragged_tops.check_unique_retrieved_ids = used
            for name, call in cases.items():
                start = time.perf_counter()
                call()
                seconds.setdefault((name, mode), []).append(time.perf_counter() - start)
    retrieval_results.check_unique_retrieved_ids = ragged_tops.check_unique_retrieved_ids = check

    print(f"{q} queries x top {k}, torch threads={args.threads}, rounds={args.rounds}, seed={args.seed}\n")
    print("| timing | with the check, median (min) ms | without, median (min) ms |")
    print("|---|---|---|")
    for name in cases:
        on, off = seconds[(name, "on")], seconds[(name, "off")]
        shown = [f"{statistics.median(t) * 1e3:.1f} ({min(t) * 1e3:.1f})" for t in (on, off)]
        print(f"| {name} | {shown[0]} | {shown[1] if name != 'the check alone' else '-'} |")


if __name__ == "__main__":
    main()
