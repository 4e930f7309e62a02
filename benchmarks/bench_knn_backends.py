"""Benchmark: kNN backends (``oml_core.knn.backend_search.make_knn_index``): faiss against ``exact``.

A synthetic clustered gallery of ``N`` items (``N / --items-per-cluster`` centres drawn from a standard normal in
``--dim`` dimensions, every item a centre plus Gaussian noise of std ``--noise`` per coordinate, L2-normalised, in a
random order) and ``--queries`` queries drawn the same way around random centres of the gallery (not gallery
items). With ``--latent-dim L`` the centres and the noise are drawn in ``L`` dimensions and mapped to ``--dim`` by
one fixed random Gaussian matrix (a low intrinsic dimension, as learnt embeddings have); without, they are
isotropic in ``--dim`` dimensions (the hard case for approximate search: a query's cluster mates are nearly
equidistant from it). Distance ``l2``, ``k = --k``. For every ``N`` and backend, in a fresh subprocess (so that
its peak memory, ``ru_maxrss``, is its own):

- **build**: ``make_knn_index(spec, "l2")``, ``index.add(gallery)`` and one search of a single query, which makes
  the training backends (``faiss_ivf``, ``faiss_ivfpq``) train and index what they buffered;
- **query**: ``index.search(queries, k)`` of all the queries at once: wall time and queries per second;
- **recall@k**: the mean over queries of ``|ids & exact ids| / k``, against the ``exact`` backend, which runs
  first for every ``N`` and leaves its ids in a temporary file that the other cases read.

A backend is given as ``name`` or ``name:key=value,key=value`` (e.g. ``faiss_ivf:nprobe=16``); the values
override the per-``N`` defaults of :func:`default_args` (the table prints the arguments used). One search-time
argument (``nprobe``, ``efSearch``, ``k_factor``) may be given several values separated by ``/``
(``faiss_ivf:nprobe=16/32/64``): the index is built once with the first and searched once per value (a row each,
with the same build). Prints a markdown table (see ``benchmarks/RESULTS.md``, which was made with)::

    python benchmarks/bench_knn_backends.py --n 1000000 --queries 2000 \\
        --backends faiss_ivf:nprobe=4/8/16/32 faiss_hnsw:efSearch=64/128/256 faiss_ivfpq:nprobe=4/8/16/32
    python benchmarks/bench_knn_backends.py --n 100000 --queries 10000 \\
        --backends faiss_flat faiss_ivf:nprobe=8/16/32 faiss_hnsw:efSearch=64/128 faiss_ivfpq:nprobe=8/16
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

import torch
from torch import Tensor

from oml_core.knn.backend_search import make_knn_index

#: Default noise around the centres (per coordinate, centres being standard normal): at 1.0 an item is at
#: cosine ~0.71 from its centre, ~0.5 from the other items of its cluster and ~0 (std ``1 / sqrt(dim)``, 0.05 at
#: 384) from the rest; the best of 1M unrelated items reaches ~0.25, well under the mates. At 1.5 the mates are at
#: ~0.3 and, from ~100k items on, unrelated items compete with them (neighbours close to random).
NOISE = 1.0
GENERATION_CHUNK = 8192
DISTANCE = "l2"


def make_data(
    n: int,
    n_queries: int,
    dim: int,
    items_per_cluster: int,
    seed: int,
    noise: float = NOISE,
    latent_dim: int = 0,
) -> tuple[Tensor, Tensor]:
    """``(gallery [n, dim], queries [n_queries, dim])``, clustered and L2-normalised; generated chunk by chunk so
    that the peak memory is the embeddings plus the centres. ``latent_dim > 0``: clusters drawn in that many
    dimensions, mapped to ``dim`` by a random Gaussian matrix."""
    generator = torch.Generator().manual_seed(seed)
    n_centres = -(-n // items_per_cluster)
    drawn_dim = latent_dim or dim
    projection = torch.randn(latent_dim, dim, generator=generator) if latent_dim else None
    centres = torch.randn(n_centres, drawn_dim, generator=generator)
    clusters = torch.arange(n_centres).repeat_interleave(items_per_cluster)[:n]
    clusters = clusters[torch.randperm(n, generator=generator)]
    query_clusters = torch.randint(n_centres, (n_queries,), generator=generator)
    out = []
    for labels in (clusters, query_clusters):
        embeddings = torch.empty(len(labels), dim)
        for start in range(0, len(labels), GENERATION_CHUNK):
            stop = min(len(labels), start + GENERATION_CHUNK)
            chunk = centres[labels[start:stop]] + noise * torch.randn(
                stop - start, drawn_dim, generator=generator
            )
            if projection is not None:
                chunk = chunk @ projection
            embeddings[start:stop] = torch.nn.functional.normalize(chunk, dim=1)
        out.append(embeddings)
    return out[0], out[1]


def ivf_nlist(n: int) -> int:
    """The power of two nearest to ``2 * sqrt(n)``: 512 at 100k, 1024 at 300k, 2048 at 1M."""
    return 2 ** round(math.log2(2 * math.sqrt(n)))


def default_args(name: str, n: int) -> dict[str, Any]:
    """The arguments of backend ``name`` for a gallery of ``n`` items, unless overridden on the command line.

    IVF: ``nlist`` from :func:`ivf_nlist`, k-means trained on the first ``min(n, 100 * nlist)`` items
    (``train_size``; faiss would sample ``256 * nlist`` of them anyway), ``nprobe = nlist / 64``. HNSW: the
    plugin's defaults (``M=32, efConstruction=40, efSearch=64``). IVF-PQ: IVF's lists and probes, the plugin's
    ``m=48`` (48 bytes a code at ``dim`` 384; the plugin's default, 96, trains its 4-dimensional sub-quantizers
    very slowly: about 65 s on 20k items), ``nbits=8``, ``refine="sq8"``, ``k_factor=4``.
    """
    if name in ("faiss_ivf", "faiss_ivfpq"):
        nlist = ivf_nlist(n)
        args: dict[str, Any] = {
            "nlist": nlist,
            "nprobe": max(1, nlist // 64),
            "train_size": min(n, 100 * nlist),
        }
        if name == "faiss_ivfpq":
            args.update({"m": 48, "nbits": 8, "refine": "sq8", "k_factor": 4})
        return args
    if name == "faiss_hnsw":
        return {"M": 32, "efConstruction": 40, "efSearch": 64}
    return {}


#: The arguments that only matter at search time, which a sweep (``key=a/b/c``) may vary on one build.
SEARCH_ARGS = ("nprobe", "efSearch", "k_factor")


def _literal(value: str) -> Any:
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return value


def parse_backend(text: str, n: int) -> tuple[str, dict[str, Any], tuple[str, list[Any]] | None]:
    """``name[:key=value,...]`` into ``(name, args, sweep)``: the values (Python literals) over
    :func:`default_args`; ``sweep`` is ``(key, values)`` for a search-time ``key=a/b/...`` (``args`` then has the
    first value), else ``None``."""
    name, _, rest = text.partition(":")
    args = default_args(name, n)
    sweep = None
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        values = [_literal(v) for v in value.split("/")]
        if len(values) > 1:
            if key not in SEARCH_ARGS or sweep is not None:
                raise ValueError(f"{text!r}: only one of {SEARCH_ARGS} may take several values")
            sweep = (key, values)
        args[key] = values[0]
    return name, args, sweep


def set_search_arg(index: Any, key: str, value: Any) -> None:
    """Change a search-time argument of a built faiss backend (HNSW reads ``efSearch`` at every search; IVF's
    ``nprobe`` and the refine's ``k_factor`` are pushed into the faiss index by the plugin's ``_configure``)."""
    setattr(index, key, value)
    if getattr(index, "_index", None) is not None:
        index._configure(index._index)


def current_rss_mb() -> float:
    """The resident set size of this process now (Linux ``/proc/self/statm``), in MiB."""
    with open("/proc/self/statm") as statm:
        resident_pages = int(statm.read().split()[1])
    return resident_pages * resource.getpagesize() / 2**20


def set_threads(threads: int) -> None:
    torch.set_num_threads(threads)
    try:
        import faiss
    except ImportError:
        return
    faiss.omp_set_num_threads(threads)


def run_case(backend: str, n: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One backend in this process: build and query wall times, recall, memory (a result per swept value)."""
    set_threads(args.threads)
    name, backend_args, sweep = parse_backend(backend, n)
    gallery, queries = make_data(
        n, args.queries, args.dim, args.items_per_cluster, args.seed, args.noise, args.latent_dim
    )
    rss_before = current_rss_mb()
    start = time.perf_counter()
    index = make_knn_index({"name": name, "args": backend_args}, DISTANCE)
    index.add(gallery)
    index.search(queries[:1], args.k)  # trains and indexes what a training backend buffered
    build_s = time.perf_counter() - start
    rss_built = current_rss_mb()
    results = []
    for value in sweep[1] if sweep else [None]:
        if sweep:
            set_search_arg(index, sweep[0], value)
            backend_args = {**backend_args, sweep[0]: value}
        start = time.perf_counter()
        found = index.search(queries, args.k)
        query_s = time.perf_counter() - start
        result: dict[str, Any] = {
            "backend": name,
            "args": backend_args,
            "build_s": build_s,
            "query_s": query_s,
            "qps": len(queries) / query_s,
            "index_mb": rss_built - rss_before,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
            "data_mb": (gallery.numel() + queries.numel()) * gallery.element_size() / 2**20,
            "structure": getattr(index, "structure", None),
        }
        if name == "exact":
            torch.save(found.ids, args.ids_file)
            result["recall"] = 1.0
        else:
            exact_ids = torch.load(args.ids_file, weights_only=True)
            hits = (found.ids.unsqueeze(2) == exact_ids.unsqueeze(1)).any(2).sum(1)
            result["recall"] = float(hits.float().mean()) / args.k
        results.append(result)
    return results


def run_in_subprocess(backend: str, n: int, args: argparse.Namespace, ids_file: str) -> list[dict[str, Any]]:
    command = [sys.executable, __file__, "--case", backend, "--ids-file", ids_file, "--n", str(n)]
    for option in ("queries", "dim", "k", "items_per_cluster", "noise", "latent_dim", "seed", "threads"):
        command += [f"--{option.replace('_', '-')}", str(getattr(args, option))]
    out = subprocess.run(command, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"the {backend!r} case for N={n} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def markdown_table(rows: list[tuple[int, dict[str, Any]]], k: int) -> str:
    header = (
        f"| N | backend | args | build s | query s | queries/s | speedup vs exact | recall@{k} | "
        "peak RSS MB | peak - data MB | index MB | index bytes/item |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    exact_qps: dict[int, float] = {}
    for n, r in rows:
        if r["backend"] == "exact":
            exact_qps[n] = r["qps"]
        speedup = r["qps"] / exact_qps[n] if n in exact_qps else float("nan")
        args = ", ".join(f"{key}={value}" for key, value in r["args"].items()) or "-"
        if r.get("structure"):
            args += f" ({r['structure']})"
        lines.append(
            f"| {n} | {r['backend']} | {args} | {r['build_s']:.1f} | {r['query_s']:.2f} | {r['qps']:.0f} | "
            f"{speedup:.1f} | {r['recall']:.4f} | {r['peak_rss_mb']:.0f} | "
            f"{r['peak_rss_mb'] - r['data_mb']:.0f} | {r['index_mb']:.0f} | {r['index_mb'] * 2**20 / n:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, nargs="+", default=[100000], help="gallery sizes")
    parser.add_argument("--queries", type=int, default=10000, help="number of queries")
    parser.add_argument("--dim", type=int, default=384, help="embedding dimension")
    parser.add_argument("--k", type=int, default=10, help="neighbours per query")
    parser.add_argument("--items-per-cluster", type=int, default=50, help="gallery items per centre")
    parser.add_argument(
        "--noise", type=float, default=NOISE, help="noise std per coordinate around the centres"
    )
    parser.add_argument(
        "--latent-dim", type=int, default=0, help="draw the clusters in this many dimensions (0: in --dim)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic embeddings")
    parser.add_argument("--threads", type=int, default=2, help="torch and faiss (OpenMP) threads")
    parser.add_argument(
        "--backends",
        nargs="+",
        default=["faiss_flat", "faiss_ivf", "faiss_hnsw", "faiss_ivfpq"],
        help="name or name:key=value,... (exact always runs first, for the recall)",
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)  # one backend, in-process
    parser.add_argument("--ids-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case is not None:
        print(json.dumps(run_case(args.case, args.n[0], args)))
        return
    rows = []
    backends = ["exact"] + [b for b in args.backends if b != "exact"]
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            ids_file = os.path.join(tmp, f"exact_ids_{n}.pt")
            for backend in backends:
                for result in run_in_subprocess(backend, n, args, ids_file):
                    rows.append((n, result))
                    print(
                        f"N={n} {backend} {result['args']}: build {result['build_s']:.1f} s, query "
                        f"{result['query_s']:.2f} s, recall {result['recall']:.4f}, "
                        f"peak {result['peak_rss_mb']:.0f} MB",
                        file=sys.stderr,
                        flush=True,
                    )
    print(
        f"dim={args.dim}, queries={args.queries}, k={args.k}, items per cluster={args.items_per_cluster}, "
        f"noise={args.noise}, latent dim={args.latent_dim or args.dim}, seed={args.seed}, "
        f"threads={args.threads}, distance={DISTANCE}\n"
    )
    print(markdown_table(rows, args.k))


if __name__ == "__main__":
    main()
