"""Benchmark: building an extractor with ``weights`` (a local checkpoint), with and without its random
initialisation (``oml_core.zoo.weights.build_for_weights``).

For each case, a checkpoint of the extractor (its state dict) is written to a temporary folder once; then, in
alternating order within this one process, ``--rounds`` times: *with init*, the path before
``build_for_weights`` (the extractor built with ``weights=None``, then the checkpoint loaded strictly over it,
as its constructor did) and *without*, ``Extractor(weights=path, ...)`` (built on the meta device, materialised
uninitialised, then the same load). Median and min seconds of each, and whether both end with the same state
dict. Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_extractor_weights_build.py --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch
from torch import nn

from oml_core.registry import Registry

#: name: (extractor, its args without weights).
CASES: dict[str, tuple[str, dict]] = {
    "resnet50": (
        "resnet",
        {"arch": "resnet50", "gem_p": None, "remove_fc": True, "normalise_features": False},
    ),
    "vits16": ("vit", {"arch": "vits16", "normalise_features": False}),
    "vitl14": ("vit", {"arch": "vitl14", "normalise_features": False}),
    "clip_vitb32_224": ("vit_clip", {"arch": "vitb32_224"}),
    "unicom_vitb32": ("vit_unicom", {"arch": "vitb32_unicom", "normalise_features": True}),
}


def _timed(build: Callable[[], nn.Module]) -> tuple[float, nn.Module]:
    start = time.perf_counter()
    module = build()
    return time.perf_counter() - start, module


def _with_init(registry: Registry, spec: dict, path: Path) -> nn.Module:
    """The path before ``build_for_weights``: a random initialisation, then the checkpoint over it."""
    module = registry.build("extractor", {"name": spec["name"], "args": {**spec["args"], "weights": None}})
    module.load_state_dict(torch.load(path, weights_only=True))
    return module


def _without(registry: Registry, spec: dict, path: Path) -> nn.Module:
    """The constructor given the checkpoint: no random initialisation."""
    return registry.build("extractor", {"name": spec["name"], "args": {**spec["args"], "weights": str(path)}})


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    args = parser.parse_args()
    registry = Registry(allow=["oml_models"], strict=True)
    print("| case | with init s (median / min) | without s (median / min) | speedup | same state |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for case in args.cases:
            name, init_args = CASES[case]
            torch.manual_seed(0)
            source = registry.build("extractor", {"name": name, "args": {**init_args, "weights": None}})
            path = Path(folder) / f"{case}.pth"
            torch.save(source.state_dict(), path)
            checkpoint = torch.load(path, weights_only=True)
            del source

            spec = {"name": name, "args": init_args}
            builds = {
                "with": partial(_with_init, registry, spec, path),
                "without": partial(_without, registry, spec, path),
            }
            times: dict[str, list[float]] = {"with": [], "without": []}
            same = True
            for round_ in range(args.rounds):
                for label in ("with", "without") if round_ % 2 == 0 else ("without", "with"):
                    seconds, module = _timed(builds[label])
                    times[label].append(seconds)
                    state = module.state_dict()
                    same &= all(torch.equal(state[key], value) for key, value in checkpoint.items())
                    del module, state
            med = {label: statistics.median(values) for label, values in times.items()}
            print(
                f"| {case} | {med['with']:.2f} / {min(times['with']):.2f} | "
                f"{med['without']:.2f} / {min(times['without']):.2f} | {med['with'] / med['without']:.1f}x | {same} |"
            )


if __name__ == "__main__":
    main()
