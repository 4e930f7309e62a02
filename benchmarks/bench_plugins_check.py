"""What isolating the plugins costs ``oml plugins --check``: each plugin in its own process against all in one.

Cases, each run as a fresh ``oml``-like process, interleaved round by round (the order alternating), so that
both see the same machine load:

- ``in one process``: what ``oml plugins --check --all`` did before the plugins were isolated: one process
  builds the registry with every installed plugin and imports every component
  (``plugins_report(Registry(), include_builtins=True, check=True)``);
- ``isolated``: ``oml plugins --check --all`` as it is: the plugins' processes forked from a fork server that
  imported torch once, as many at a time as the CPUs (:mod:`oml_core.registry.isolation`).

Run from the repository root: ``.venv/bin/python benchmarks/bench_plugins_check.py --rounds 3``. It prints the
wall time of every run and the medians, as a markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

IN_ONE_PROCESS = (
    "from oml_core.registry import Registry\n"
    "from oml_core.registry.plugin_rows import plugins_report\n"
    "report = plugins_report(Registry(), include_builtins=True, check=True)\n"
    "assert not any(row['error'] or row['broken'] for row in report), report\n"
)
CASES = {
    "in one process": [sys.executable, "-c", IN_ONE_PROCESS],
    "isolated": [sys.executable, "-m", "oml_core.cli", "plugins", "--check", "--all"],
}


def run(command: list[str]) -> float:
    """The wall time of ``command`` in seconds (it must succeed)."""
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {case: [] for case in CASES}
    for round_ in range(args.rounds):
        order = list(CASES) if round_ % 2 == 0 else list(reversed(CASES))
        for case in order:
            times[case].append(run(CASES[case]))
            print(f"round {round_}: {case}: {times[case][-1]:.1f} s", file=sys.stderr)
    print("| case | wall s, each run | median wall s |")
    print("|---|---|---|")
    for case, seconds in times.items():
        each = ", ".join(f"{s:.1f}" for s in seconds)
        print(f"| {case} | {each} | {statistics.median(seconds):.1f} |")


if __name__ == "__main__":
    main()
