"""Benchmark: the oml-qdrant backend on Qdrant's local modes (in-process and on a path) against ``exact``.

The clustered, L2-normalised gallery of ``bench_knn_backends.py`` (:func:`bench_knn_backends.make_data`), in
sequences of ``--sequence`` consecutive items. Queries are the first ``--queries`` gallery items, searched as
oml's retrieval searches them ("1 vs rest"): each leaves out its own sequence (``exclude``), or, in the rows
``exclude: none``, nothing. For every ``N``, mode and exclusion: the build (``add`` of the gallery) and query
wall times of ``qdrant`` and ``exact``, recall@k of ``qdrant`` against ``exact`` and the share of queries whose
ids are exactly ``exact``'s (tie order included). Distance ``l2``, one thread. Prints a markdown table (see
``benchmarks/RESULTS.md``)::

    python benchmarks/bench_qdrant.py --n 10000 50000 --queries 200
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from bench_knn_backends import make_data, set_threads
from oml_qdrant import QdrantKnnIndex
from torch import Tensor

from oml_core.interfaces.knn import IKnnIndex, KnnSearchResult
from oml_core.knn.exact import ExactKnnIndex


def timed(index: IKnnIndex, gallery: Tensor, groups: Tensor, queries: Tensor, k: int, exclude: Tensor | None):
    """``(build s, query s, result)`` of adding the gallery to ``index`` and searching the queries."""
    start = time.perf_counter()
    index.add(gallery, groups=groups)
    build = time.perf_counter() - start
    start = time.perf_counter()
    found = index.search(queries, k, exclude=exclude)
    return build, time.perf_counter() - start, found


def compare(found: KnnSearchResult, exact: KnnSearchResult, k: int) -> tuple[float, float]:
    """Recall@k of ``found`` against ``exact``, and the share of rows whose ids are ``exact``'s."""
    hits = (found.ids.unsqueeze(2) == exact.ids.unsqueeze(1)).any(2).sum(1)
    return float(hits.float().mean()) / k, float((found.ids == exact.ids).all(1).float().mean())


def run(n: int, mode: str, exclusion: bool, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    gallery, _ = make_data(n, 0, args.dim, args.items_per_cluster, args.seed)
    groups = torch.arange(n) // args.sequence
    queries = gallery[: args.queries]
    exclude = groups[: args.queries] if exclusion else None
    exact_build, exact_query, exact = timed(ExactKnnIndex("l2"), gallery, groups, queries, args.k, exclude)
    path = str(folder / f"{n}-{exclusion}") if mode == "path" else None
    index = QdrantKnnIndex("l2", path=path)
    build, query, found = timed(index, gallery, groups, queries, args.k, exclude)
    index.close()
    recall, same = compare(found, exact, args.k)
    return {
        "n": n,
        "mode": mode,
        "exclude": "sequence" if exclusion else "none",
        "build": build,
        "query": query,
        "qps": len(queries) / query,
        "exact_build": exact_build,
        "exact_query": exact_query,
        "recall": recall,
        "same": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--sequence", type=int, default=4, help="items per sequence")
    parser.add_argument("--items-per-cluster", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    set_threads(1)
    columns = "N | mode | exclude | build s | query s | queries/s | exact build s | exact query s | recall@k"
    print(f"| {columns} | ids = exact's |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for n in args.n:
            for mode in ("memory", "path"):
                for exclusion in (False, True):
                    r = run(n, mode, exclusion, args, Path(folder))
                    print(
                        f"| {r['n']:,} | {r['mode']} | {r['exclude']} | {r['build']:.1f} | {r['query']:.2f} | "
                        f"{r['qps']:.0f} | {r['exact_build']:.2f} | {r['exact_query']:.3f} | {r['recall']:.4f} | "
                        f"{r['same']:.3f} |",
                        flush=True,
                    )
    print(
        f"\ndim={args.dim}, queries={args.queries}, k={args.k}, sequence={args.sequence}, seed={args.seed}, l2"
    )


if __name__ == "__main__":
    main()
