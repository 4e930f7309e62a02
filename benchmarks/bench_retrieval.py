"""Benchmark: 1-vs-rest retrieval metrics with oml against the floor of a plain chunked matmul + top-k.

Every item of a synthetic clustered set (``--items-per-label`` items per label, ``--dim``-dimensional,
L2-normalised, in random order) is a query and a gallery item. Three cases per ``N``, each run ``--repeat``
times, every run in a fresh subprocess so that its peak memory (``ru_maxrss``) is its own:

- ``oml``: ``RetrievalResults.from_embeddings`` (l2, top 5, self excluded) followed by
  ``calc_retrieval_metrics_rr`` with cmc@1, cmc@5, precision@5 and map@5;
- ``floor``: ``torch.topk(x[chunk] @ x.T, k=5)`` over chunks of ``FLOOR_CHUNK`` rows and nothing else (no
  self-exclusion, no ground truth, no metrics);
- ``fnmr``: ``calc_fnmr_at_fmr_all_pairs`` over all the ``N * (N - 1)`` pairs, at ``FMR_VALS``.

Times are the median over the runs, peak memory the largest. Prints a markdown table (see
``benchmarks/RESULTS.md``). Usage::

    python benchmarks/bench_retrieval.py --n 10000 30000 100000 --dim 384 --items-per-label 5 --seed 0
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
from torch import LongTensor, Tensor

from oml_core.functional.fnmr import calc_fnmr_at_fmr_all_pairs
from oml_core.interfaces.datasets import IQueryGalleryLabeledDataset
from oml_core.metrics.embeddings import calc_retrieval_metrics_rr
from oml_core.retrieval import RetrievalResults

TOP_K = 5
#: Rows per matrix multiply of the floor.
FLOOR_CHUNK = 1024
#: Noise around the label centres (per coordinate, centres being standard normal): mates at cosine ~0.3.
NOISE = 1.5
GENERATION_CHUNK = 8192
#: False match rates of the ``fnmr`` case.
FMR_VALS = (0.001, 0.01, 0.1)


def make_embeddings(n: int, dim: int, items_per_label: int, seed: int) -> tuple[Tensor, LongTensor]:
    """``(embeddings [n, dim], labels [n])``: clustered, L2-normalised, in a random order; generated chunk by
    chunk so that the peak memory is the embeddings plus the label centres."""
    generator = torch.Generator().manual_seed(seed)
    n_labels = -(-n // items_per_label)
    centres = torch.randn(n_labels, dim, generator=generator)
    labels = torch.arange(n_labels).repeat_interleave(items_per_label)[:n]
    labels = labels[torch.randperm(n, generator=generator)]
    embeddings = torch.empty(n, dim)
    for start in range(0, n, GENERATION_CHUNK):
        stop = min(n, start + GENERATION_CHUNK)
        chunk = centres[labels[start:stop]] + NOISE * torch.randn(stop - start, dim, generator=generator)
        embeddings[start:stop] = torch.nn.functional.normalize(chunk, dim=1)
    return embeddings, labels


class OneVsRest(IQueryGalleryLabeledDataset):
    """Labels only; every item is a query and a gallery item."""

    def __init__(self, labels: LongTensor) -> None:
        self.labels = labels.numpy()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, item: int) -> dict[str, int]:
        return {self.index_key: item, self.labels_key: int(self.labels[item])}

    def get_labels(self) -> np.ndarray:
        return self.labels

    def get_query_ids(self) -> LongTensor:
        return torch.arange(len(self.labels))

    def get_gallery_ids(self) -> LongTensor:
        return torch.arange(len(self.labels))


def run_oml(embeddings: Tensor, labels: LongTensor) -> dict[str, float]:
    dataset = OneVsRest(labels)
    start, cpu_start = time.perf_counter(), time.process_time()
    rr = RetrievalResults.from_embeddings(embeddings, dataset, n_items=TOP_K)
    knn_s = time.perf_counter() - start
    metrics = calc_retrieval_metrics_rr(
        rr, cmc_top_k=(1, 5), precision_top_k=(5,), map_top_k=(5,), verbose=False
    )
    return {
        "knn_s": knn_s,
        "total_s": time.perf_counter() - start,
        "cpu_s": time.process_time() - cpu_start,
        "cmc@1": float(metrics["cmc"][1]),
        "cmc@5": float(metrics["cmc"][5]),
        "precision@5": float(metrics["precision"][5]),
        "map@5": float(metrics["map"][5]),
    }


def run_floor(embeddings: Tensor) -> dict[str, float]:
    start, cpu_start = time.perf_counter(), time.process_time()
    for first in range(0, len(embeddings), FLOOR_CHUNK):
        torch.topk(embeddings[first : first + FLOOR_CHUNK] @ embeddings.T, k=TOP_K, dim=1)
    return {"total_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu_start}


def run_fnmr(embeddings: Tensor, labels: LongTensor) -> dict[str, float]:
    ids = torch.arange(len(embeddings))
    start, cpu_start = time.perf_counter(), time.process_time()
    values = calc_fnmr_at_fmr_all_pairs(embeddings, ids, ids, labels, fmr_vals=FMR_VALS)
    result = {"total_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu_start}
    result.update({f"fnmr@fmr={fmr}": float(v) for fmr, v in zip(FMR_VALS, values)})
    return result


def current_rss_mb() -> float:
    """The resident set size of this process now (Linux ``/proc/self/statm``), in MiB."""
    with open("/proc/self/statm") as statm:
        resident_pages = int(statm.read().split()[1])
    return resident_pages * resource.getpagesize() / 2**20


CASES = {"oml": run_oml, "fnmr": run_fnmr, "floor": lambda embeddings, labels: run_floor(embeddings)}


def run_case(case: str, n: int, dim: int, items_per_label: int, seed: int, threads: int) -> dict[str, float]:
    """One case in this process: its results, wall times and peak RSS."""
    torch.set_num_threads(threads)
    embeddings, labels = make_embeddings(n, dim, items_per_label, seed)
    rss_before = current_rss_mb()
    result = CASES[case](embeddings, labels)
    result["rss_before_mb"] = rss_before
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    result["embeddings_mb"] = embeddings.numel() * embeddings.element_size() / 2**20
    return result


def run_in_subprocess(case: str, n: int, args: argparse.Namespace) -> dict[str, float]:
    command = [
        sys.executable,
        __file__,
        "--case",
        case,
        "--n",
        str(n),
        "--dim",
        str(args.dim),
        "--items-per-label",
        str(args.items_per_label),
        "--seed",
        str(args.seed),
        "--threads",
        str(args.threads),
    ]
    runs = []
    for _ in range(args.repeat):
        out = subprocess.run(command, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"the {case!r} case for N={n} failed:\n{out.stderr}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    summary = dict(runs[0])
    for key in ("total_s", "knn_s", "cpu_s"):
        if key in summary:
            summary[key] = statistics.median(run[key] for run in runs)
    summary["peak_rss_mb"] = max(run["peak_rss_mb"] for run in runs)
    summary["work_mb"] = max(run["peak_rss_mb"] - run["rss_before_mb"] for run in runs)
    return summary


def markdown_table(rows: list[tuple[int, dict[str, dict[str, float]]]]) -> str:
    header = (
        "| N | embeddings MB | oml kNN s | oml total s | floor s | oml / floor | oml / floor (CPU time) | "
        "oml peak MB | oml overhead MB | oml work MB | floor peak MB | floor work MB | fnmr all pairs s | "
        "fnmr / floor | fnmr overhead MB | fnmr work MB | "
        "cmc@1 | cmc@5 | precision@5 | map@5 | " + " | ".join(f"fnmr@fmr={fmr}" for fmr in FMR_VALS) + " |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for n, case in rows:
        oml, floor, fnmr = case["oml"], case["floor"], case["fnmr"]
        emb_mb = oml["embeddings_mb"]
        lines.append(
            f"| {n} | {emb_mb:.0f} | {oml['knn_s']:.2f} | {oml['total_s']:.2f} | "
            f"{floor['total_s']:.2f} | {oml['total_s'] / floor['total_s']:.2f} | "
            f"{oml['cpu_s'] / floor['cpu_s']:.2f} | {oml['peak_rss_mb']:.0f} | "
            f"{oml['peak_rss_mb'] - emb_mb:.0f} | {oml['work_mb']:.0f} | {floor['peak_rss_mb']:.0f} | "
            f"{floor['work_mb']:.0f} | {fnmr['total_s']:.2f} | {fnmr['total_s'] / floor['total_s']:.2f} | "
            f"{fnmr['peak_rss_mb'] - emb_mb:.0f} | {fnmr['work_mb']:.0f} | "
            f"{oml['cmc@1']:.4f} | {oml['cmc@5']:.4f} | {oml['precision@5']:.4f} | {oml['map@5']:.4f} | "
            + " | ".join(f"{fnmr[f'fnmr@fmr={fmr}']:.2e}" for fmr in FMR_VALS)
            + " |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, nargs="+", default=[10000, 30000, 100000], help="dataset sizes")
    parser.add_argument("--dim", type=int, default=384, help="embedding dimension")
    parser.add_argument("--items-per-label", type=int, default=5, help="items per label")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic embeddings")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (torch.set_num_threads)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (median time, largest peak)")
    parser.add_argument("--case", choices=sorted(CASES), help=argparse.SUPPRESS)  # one case, in-process
    args = parser.parse_args()
    if args.case is not None:
        result = run_case(args.case, args.n[0], args.dim, args.items_per_label, args.seed, args.threads)
        print(json.dumps(result))
        return
    rows = []
    for n in args.n:
        cases = {case: run_in_subprocess(case, n, args) for case in ("oml", "floor", "fnmr")}
        rows.append((n, cases))
        times = ", ".join(f"{case} {result['total_s']:.2f} s" for case, result in cases.items())
        print(f"N={n}: {times}", file=sys.stderr, flush=True)
    print(
        f"dim={args.dim}, items per label={args.items_per_label}, seed={args.seed}, "
        f"torch threads={args.threads}, top k={TOP_K}, runs per case={args.repeat}\n"
    )
    print(markdown_table(rows))


if __name__ == "__main__":
    main()
