"""What vetting the plugins costs a command: loading them unchecked, with kept verdicts, and checking them all.

Cases, each a fresh process that loads every installed plugin and calls its hooks (``Registry().names(...)``, what
``oml registry`` does), interleaved round by round (the order alternating), so that all see the same machine load:

- ``unchecked``: the plugins imported in the process, as before every command vetted them (and as Python does);
- ``kept verdicts``: under the commands' vetting (:mod:`oml_core.registry.vetting`) with every plugin's verdict
  kept: the fingerprints and one read of the verdicts file, no process started;
- ``cold``: under the vetting with an empty cache folder: every plugin checked in a process of its own (no
  component imported), the verdicts written, then the plugins imported in the process.

Run from the repository root: ``.venv/bin/python benchmarks/bench_plugin_vetting.py --rounds 3``. It prints the
wall time of every run and the medians, as a markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

UNCHECKED = "from oml_core.registry import Registry\nRegistry().names('optimizer')\n"
VETTED = (
    "from oml_core.registry import Registry\n"
    "from oml_core.registry.manager import guarded_loading\n"
    "from oml_core.registry.vetting import PluginVetting\n"
    "def end(message):\n    raise SystemExit(message)\n"
    "with guarded_loading(PluginVetting(timeout=60, end=end)):\n    Registry().names('optimizer')\n"
)


def run(code: str, cache_dir: str) -> float:
    """The wall time in seconds of ``python -c code`` with ``OML_CACHE_DIR=cache_dir`` (it must succeed)."""
    start = time.perf_counter()
    env = {**os.environ, "OML_CACHE_DIR": cache_dir}
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as kept:
        run(VETTED, kept)  # the verdicts of every plugin, kept
        cases = {
            "unchecked": lambda: run(UNCHECKED, kept),
            "kept verdicts": lambda: run(VETTED, kept),
            "cold": lambda: run(VETTED, tempfile.mkdtemp()),
        }
        times: dict[str, list[float]] = {case: [] for case in cases}
        for round_ in range(args.rounds):
            order = list(cases) if round_ % 2 == 0 else list(reversed(cases))
            for case in order:
                times[case].append(cases[case]())
                print(f"round {round_}: {case}: {times[case][-1]:.2f} s", file=sys.stderr)
    print("| case | wall s, each run | median wall s |")
    print("|---|---|---|")
    for case, seconds in times.items():
        each = ", ".join(f"{s:.2f}" for s in seconds)
        print(f"| {case} | {each} | {statistics.median(seconds):.2f} |")


if __name__ == "__main__":
    main()
