"""Side-by-side timing of two Python environments (oml's and OML 4.0's), which one process cannot import together.

A benchmark script is run twice as a *worker*, once by each environment's interpreter; both workers stay alive
for the whole benchmark and are driven in turns: round ``r`` asks side A then side B to time a case (B then A in
odd rounds), so both sides see the same machine load, moment by moment. A worker sets its torch threads (and
``OMP_NUM_THREADS``) before importing torch, and ``OMP_WAIT_POLICY=PASSIVE``: the idle worker's OpenMP threads
sleep instead of spinning on the cores the busy one uses.

Protocol: one JSON line per request on the worker's stdin, ``{"case": name, "calls": n, "min_seconds": t,
"warmup": w}`` (time at least ``n`` calls, and more until ``t`` seconds have passed), and one JSON line per answer
on its stdout, ``{"seconds": [a float per call], "result": ...}`` (``result``: what the case's last call
returned, as JSON, for checking that both sides agree). Only this module's standard-library code is shared.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The worker side of a benchmark: a case's name -> the call to time (returning something JSON-able).
Prepare = Callable[[str], Callable[[], Any]]


def serve(prepare: Prepare) -> None:
    """The worker's loop: answer every request of stdin until it closes. Cases are prepared once and kept."""
    prepared: dict[str, Callable[[], Any]] = {}
    for line in sys.stdin:
        request = json.loads(line)
        case = request["case"]
        if case not in prepared:
            prepared[case] = prepare(case)
        call = prepared[case]
        for _ in range(request.get("warmup", 0)):
            call()
        seconds: list[float] = []
        result = None
        while len(seconds) < request["calls"] or sum(seconds) < request.get("min_seconds", 0.0):
            start = time.perf_counter()
            result = call()
            seconds.append(time.perf_counter() - start)
        print(json.dumps({"seconds": seconds, "result": result}), flush=True)


@dataclass
class Side:
    """One environment: its name in the tables, its interpreter, and the worker process once started."""

    name: str
    python: str
    process: subprocess.Popen[str] | None = field(default=None, repr=False)

    def start(self, script: str, worker_args: Sequence[str], threads: int) -> None:
        env = {
            **os.environ,
            "OMP_NUM_THREADS": str(threads),
            "MKL_NUM_THREADS": str(threads),
            "OMP_WAIT_POLICY": "PASSIVE",
        }
        self.process = subprocess.Popen(
            [self.python, script, "--worker", self.name, "--threads", str(threads), *worker_args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, case: str, calls: int, min_seconds: float, warmup: int) -> dict[str, Any]:
        assert self.process is not None and self.process.stdin and self.process.stdout
        request = {"case": case, "calls": calls, "min_seconds": min_seconds, "warmup": warmup}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} worker ({self.python}) died on case {case!r}")
        return json.loads(line)

    def stop(self) -> None:
        if self.process is not None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait()


@dataclass
class CaseTimes:
    """What the rounds gave for one case: per side, every call's seconds and the last result."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)

    def median_ms(self, side: str) -> float:
        return statistics.median(self.seconds[side]) * 1e3

    def min_ms(self, side: str) -> float:
        return min(self.seconds[side]) * 1e3


def run_interleaved(
    sides: Sequence[Side], cases: Sequence[str], rounds: int, calls: int, min_seconds: float, warmup: int
) -> dict[str, CaseTimes]:
    """Time every case ``rounds`` times on every side, alternating the order of the sides between rounds: at
    least ``calls`` timed calls a round and ``min_seconds`` of them, after ``warmup`` untimed ones in the
    first round."""
    times = {case: CaseTimes() for case in cases}
    for case in cases:
        for r in range(rounds):
            for side in sides if r % 2 == 0 else reversed(sides):
                answer = side.ask(case, calls, min_seconds, warmup if r == 0 else 0)
                times[case].seconds.setdefault(side.name, []).extend(answer["seconds"])
                times[case].results[side.name] = answer["result"]
    return times


def machine_line(threads: int) -> str:
    """One line on where it ran: CPU model, cores, load at the start, Python, the torch threads."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            model = next(
                (ln.split(":", 1)[1].strip() for ln in cpuinfo if ln.startswith("model name")), model
            )
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{model}, {os.cpu_count()} cores, load average {load:.2f} at the start, Python "
        f"{sys.version.split()[0]}, torch threads {threads}"
    )
