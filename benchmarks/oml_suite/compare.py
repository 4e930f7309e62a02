#!/usr/bin/env python
"""Tests passing on OML 4.0 (the reference outcomes) against the same tests on oml (rename only), by node id.

``tests/test_imports.py`` is reported apart: its parameters are the imports found in the installed project's own
files, so its node ids differ from one install to another.

Usage: ``python compare.py REFERENCE.tsv OML.tsv [--failures FILE]`` (outcomes written by ``record_outcomes.py``);
``--failures`` writes the tests that pass on OML and not on oml, with oml's outcome and message, a line each.
"""

from __future__ import annotations

import argparse
from collections import Counter


def load(path: str) -> dict[str, tuple[str, str]]:
    """``{node id: (outcome, message)}``; a node id reported twice keeps its failing outcome."""
    outcomes: dict[str, tuple[str, str]] = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            outcome, _, nodeid, *message = line.rstrip("\n").split("\t")
            if nodeid not in outcomes or outcomes[nodeid][0] == "passed":
                outcomes[nodeid] = (outcome, message[0] if message else "")
    return outcomes


def is_imports(nodeid: str) -> bool:
    return nodeid.startswith("tests/test_imports.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference")
    parser.add_argument("oml")
    parser.add_argument("--failures")
    args = parser.parse_args()
    ref, new = load(args.reference), load(args.oml)
    ref_pass = {n for n, (o, _) in ref.items() if o == "passed"}
    new_pass = {n for n, (o, _) in new.items() if o == "passed"}
    print("outcomes on oml:", dict(Counter(o for o, _ in new.values())))
    comparable = {n for n in ref_pass if not is_imports(n)}
    both = comparable & new_pass
    share = 100 * len(both) / max(len(comparable), 1)
    print(
        f"without test_imports.py: {len(both)} of the {len(comparable)} passing on OML pass on oml ({share:.1f} %)"
    )
    print(
        f"passing on oml and not on OML (not counted): {len({n for n in new_pass - ref_pass if not is_imports(n)})}"
    )
    if args.failures:
        with open(args.failures, "w", encoding="utf-8") as out:
            for nodeid in sorted(comparable - new_pass):
                outcome, message = new.get(nodeid, ("not run", ""))
                out.write(f"{nodeid}\t{outcome}\t{message}\n")


if __name__ == "__main__":
    main()
