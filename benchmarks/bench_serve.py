"""Benchmark: ``oml serve``'s ``POST /search`` by upload, at 1, 8 and 32 concurrent clients on 127.0.0.1, against
the same searches in the benchmark's own process (the floor) and against ``oml search`` run once per query.

An index of ``--gallery`` pictures of random pixels (``--size`` pixels square) is built with the default config of
``oml index build`` (a seeded random ResNet18, the ``exact`` backend). Then:

- **floor, one at a time**: ``GalleryIndex.search([path], top_k)`` in this process, one query after the other
  (what a service cannot beat at 1 client: no HTTP, no upload, no JSON);
- **floor, batches of 32**: ``GalleryIndex.search(paths, top_k)`` on 32 queries at once (what batching can reach
  at 32 clients: one forward pass per 32 queries);
- **oml search per call**: a process per query (``python -m oml_core.cli search``), ``--cli-calls`` of them;
- **plain FastAPI**: the endpoint one writes first (this script's ``--plain INDEX``, run by uvicorn in a process of
  its own): ``POST /search`` takes the upload into a temporary file and calls ``GalleryIndex.search`` on it, one
  request at a time (a lock), no batching, no checks;
- **oml serve**: a real ``oml serve`` process (``--max-batch 32``, ``--max-wait-ms`` as given), and C clients
  (asyncio, httpx, one connection each) that each post uploads one after the other, ``--requests`` in all per
  level (bounded by ``--seconds`` too). Latency: from the request's start to its answer, per request.

The service and the clients share the machine's cores, as they would on one host. The cases run in ``--rounds``
rounds, interleaved (floor, service at each level, floor ...), so that a busy moment of the machine does not fall
on one case only; each figure is the median over the rounds. Usage::

    .venv/bin/python benchmarks/bench_serve.py --gallery 256 --size 64 --requests 320 --clients 1 8 32 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import uvicorn
from fastapi import FastAPI, UploadFile
from PIL import Image

from oml_core.cli import main as oml
from oml_core.index import GalleryIndex

TOP_K = 5
BATCH = 32


def write_pictures(folder: Path, n: int, size: int, seed: int) -> list[Path]:
    """``n`` PNG pictures of random pixels in ``folder``."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    paths = []
    for i in range(n):
        path = folder / f"{i:05d}.png"
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def percentiles(latencies: list[float]) -> tuple[float, float, float]:
    """Median, 99th percentile and mean of ``latencies`` in milliseconds."""
    ms = np.array(latencies) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99)), float(ms.mean())


def floor(index: GalleryIndex, queries: list[Path], batch: int) -> tuple[float, list[float]]:
    """Queries per second of in-process searches in batches of ``batch``, and each batch's latency."""
    index.search(queries[:batch], top_k=TOP_K)  # warm
    latencies = []
    start = time.perf_counter()
    for i in range(0, len(queries), batch):
        begun = time.perf_counter()
        index.search(queries[i : i + batch], top_k=TOP_K)
        latencies.append(time.perf_counter() - begun)
    return len(queries) / (time.perf_counter() - start), latencies


def start_service(command: list[str]) -> tuple[subprocess.Popen[str], str]:
    """The uvicorn server of ``command`` and its URL (read from uvicorn's log)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            match = re.search(r"Uvicorn running on (http://[\d.]+:\d+)", line)
            if match:
                found.append(match.group(1))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + 300
    while not found:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{command} did not start")
        time.sleep(0.05)
    return process, found[0]


def plain_app(folder: Path) -> FastAPI:
    """The plain endpoint: an upload written to a temporary file, searched by ``GalleryIndex.search``."""
    index = GalleryIndex.load(folder)
    lock = threading.Lock()
    app = FastAPI()

    @app.post("/search")
    def search(file: UploadFile, top_k: int = TOP_K) -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "query.png"
            path.write_bytes(file.file.read())
            with lock:
                (hits,) = index.search([path], top_k=top_k)
        return {"results": [hit.to_dict() for hit in hits]}

    return app


async def load(
    url: str, queries: list[bytes], clients: int, requests: int, seconds: float, counters: bool = True
) -> dict[str, float]:
    """``requests`` uploads (at most ``seconds``) posted by ``clients`` concurrent clients: req/s, latencies."""
    latencies: list[float] = []
    sent = 0
    deadline = time.perf_counter() + seconds

    async def client(c: int) -> None:
        nonlocal sent
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            while sent < requests and time.perf_counter() < deadline:
                data = queries[sent % len(queries)]
                sent += 1
                begun = time.perf_counter()
                response = await http.post(f"/search?top_k={TOP_K}", files={"file": ("q.png", data)})
                response.raise_for_status()
                latencies.append(time.perf_counter() - begun)

    async with httpx.AsyncClient(base_url=url, timeout=60) as http:  # warm
        for data in queries[:BATCH]:
            (await http.post(f"/search?top_k={TOP_K}", files={"file": ("q.png", data)})).raise_for_status()
        before = (await http.get("/health")).json() if counters else {}
    start = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    elapsed = time.perf_counter() - start
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        after = (await http.get("/health")).json() if counters else {}
    p50, p99, mean = percentiles(latencies)
    passes = after["forward_passes"] - before["forward_passes"] if counters else 1
    embedded = after["queries_embedded"] - before["queries_embedded"] if counters else 1
    return {
        "rps": len(latencies) / elapsed,
        "p50": p50,
        "p99": p99,
        "mean": mean,
        "per_pass": embedded / passes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gallery", type=int, default=256)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--queries", type=int, default=64, help="distinct query pictures, reused in turn")
    parser.add_argument("--requests", type=int, default=320, help="requests per case and round")
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="time limit per concurrency level and round"
    )
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--max-wait-ms", type=float, default=2.0)
    parser.add_argument("--cli-calls", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--plain", type=Path, metavar="INDEX", help="run the plain endpoint of INDEX (internal)"
    )
    args = parser.parse_args()
    if args.plain is not None:
        uvicorn.run(plain_app(args.plain), host="127.0.0.1", port=0, log_level="info")
        return
    os.environ.setdefault("OML_CACHE_DIR", tempfile.mkdtemp(prefix="oml-bench-cache-"))

    with tempfile.TemporaryDirectory(prefix="oml-bench-serve-") as tmp:
        root = Path(tmp)
        write_pictures(root / "gallery", args.gallery, args.size, seed=0)
        queries = write_pictures(root / "queries", args.queries, args.size, seed=1)
        index_dir = root / "index"
        build = [
            f"data_dir={root / 'gallery'}",
            f"index_dir={index_dir}",
            f"transforms.args.im_size={args.size}",
        ]
        assert oml(["index", "build", *build]) == 0
        index = GalleryIndex.load(index_dir)
        many = (queries * (args.requests // len(queries) + 1))[: args.requests]
        cli = []
        for query in queries[: args.cli_calls]:
            begun = time.perf_counter()
            command = [
                sys.executable,
                "-m",
                "oml_core.cli",
                "search",
                str(index_dir),
                str(query),
                "--format",
                "json",
            ]
            subprocess.run(command, check=True, capture_output=True)
            cli.append(time.perf_counter() - begun)
        uploads = [path.read_bytes() for path in queries]
        rounds: list[dict[str, dict[str, float]]] = []
        serve = [sys.executable, "-m", "oml_core.cli", "serve", str(index_dir), "--port", "0"]
        process, url = start_service(
            [*serve, "--max-batch", str(BATCH), "--max-wait-ms", str(args.max_wait_ms)]
        )
        plain, plain_url = start_service([sys.executable, __file__, "--plain", str(index_dir)])
        try:
            for _ in range(args.rounds):
                one_rps, one_latencies = floor(index, many, 1)
                p50, p99, _ = percentiles(one_latencies)
                results = {"one": {"rps": one_rps, "p50": p50, "p99": p99}}
                results["batch"] = {"rps": floor(index, many, BATCH)[0]}
                for clients in args.clients:
                    results[f"plain{clients}"] = asyncio.run(
                        load(plain_url, uploads, clients, args.requests, args.seconds, counters=False)
                    )
                    results[f"serve{clients}"] = asyncio.run(
                        load(url, uploads, clients, args.requests, args.seconds)
                    )
                rounds.append(results)
        finally:
            for server in (process, plain):
                server.terminate()
                server.wait(timeout=60)

    def median(case: str, key: str) -> float:
        return statistics.median(r[case][key] for r in rounds)

    one, batch, cli_ms = median("one", "rps"), median("batch", "rps"), statistics.median(cli) * 1000
    print(
        f"gallery={args.gallery} size={args.size}px top_k={TOP_K} requests/case/round={args.requests} "
        f"rounds={args.rounds} max_wait_ms={args.max_wait_ms:g} cpus={os.cpu_count()}"
    )
    print()
    print(
        "| case | clients | queries/s | p50 ms | p99 ms | queries per forward pass | vs floor (queries/s) |"
    )
    print("|---|---|---|---|---|---|---|")
    plain_rows = [
        ("plain FastAPI endpoint", c, median(f"plain{c}", "rps"), median(f"plain{c}", "p50"),
         median(f"plain{c}", "p99"), 1.0)
        for c in args.clients
    ]  # fmt: skip
    rows = [
        ("floor: in-process, one at a time", 1, one, median("one", "p50"), median("one", "p99"), 1.0),
        (f"floor: in-process, batches of {BATCH}", "-", batch, None, None, BATCH),
        ("oml search, a process per query", 1, 1000 / cli_ms, cli_ms, None, 1.0),
        *plain_rows,
        *(
            ("oml serve", c, median(f"serve{c}", "rps"), median(f"serve{c}", "p50"), median(f"serve{c}", "p99"),
             median(f"serve{c}", "per_pass"))
            for c in args.clients
        ),
    ]  # fmt: skip
    for case, clients, rps, p50, p99, per_pass in rows:
        ms = " | ".join("-" if v is None else f"{v:.1f}" for v in (p50, p99))
        print(f"| {case} | {clients} | {rps:.2f} | {ms} | {per_pass:.1f} | {rps / one:.2f} |")


if __name__ == "__main__":
    main()
