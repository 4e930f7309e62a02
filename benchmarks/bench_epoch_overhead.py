"""Benchmark: the per-epoch overhead of ``oml train`` against OML 4.0's own training pipeline, side by side.

A run of many epochs of one training step each (and one validation step after every epoch) spends almost all
its time between the steps: the epoch's bookkeeping, the validation callbacks, the checkpoints. Both systems
run the same config on the same data, whole processes timed from outside (start-up included):

- **data**: a small image dataset in OML's format written to a temporary folder: 8x8 glyphs of the digits
  0-9 drawn with numpy (a random shift of up to one pixel and Gaussian noise per image), scaled to 32 x 32
  RGB PNGs; digits 0-4 train (``--per-label`` images each), 5-9 validation (every image a query and a gallery
  item);
- **config**: a random ``resnet18`` (no weights), ``norm_resize_torch`` at 32 px for both splits, the
  ``balance`` sampler of 5 labels x 4 instances (one step an epoch), ``triplet_with_miner`` with
  ``all_triplets``, Adam, ``max_epochs=--epochs``, ``valid_period=1`` (one validation step after every
  epoch, ``bs_val`` 64), cmc@1/5, TensorBoard logging, precision 32 on the CPU, ``num_workers=0``;
- **oml**: ``oml train --config-path DIR --config-name bench`` (the project's virtualenv); its extra checks and
  the start metrics are switched off (``check_images=false``, ``validate_before_training=false``), which OML
  has not either, so that both do the same work;
- **OML 4.0**: ``oml.lightning.pipelines.train.extractor_training_pipeline(cfg)`` called by a small script
  with the same config (``--oml-python``: a python with ``open-metric-learning[pipelines]==4.0.0``), run in
  a fresh folder (OML writes into the working directory, as its hydra scripts do);
- **protocol**: ``--repeat`` pairs, interleaved in alternating order (oml, OML, OML, oml, oml, OML ...), so
  that neither system always runs first; each a fresh process with
  ``OMP_NUM_THREADS=--threads``; the table gives every run, the medians and the median of the pairwise
  ratios (a drift of the machine's speed moves both runs of a pair).

Usage (from the repository root)::

    .venv/bin/python benchmarks/bench_epoch_overhead.py --epochs 600 --repeat 3 \\
        --oml-python /path/to/oml40/bin/python [--oml-pythonpath DIR]

``--oml-pythonpath`` is prepended to OML's ``PYTHONPATH`` (e.g. a ``pip install --target`` folder holding
``pytorch-lightning==2.1.2`` when OML's environment lacks its ``pipelines`` extra). ``--only oml`` times
oml alone (no OML 4.0 needed). Prints a markdown table and writes it with the raw numbers to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

#: The digits as 8 x 8 glyphs (``#`` ink), drawn for this benchmark.
GLYPHS = {
    0: ["..####..", ".#....#.", "#......#", "#......#", "#......#", "#......#", ".#....#.", "..####.."],
    1: ["...##...", "..###...", ".#.##...", "...##...", "...##...", "...##...", "...##...", ".######."],
    2: ["..####..", ".#....#.", "......#.", ".....#..", "....#...", "...#....", "..#.....", ".######."],
    3: [".#####..", "......#.", "......#.", "..####..", "......#.", "......#.", "......#.", ".#####.."],
    4: ["....##..", "...#.#..", "..#..#..", ".#...#..", "########", ".....#..", ".....#..", ".....#.."],
    5: [".######.", ".#......", ".#......", ".#####..", "......#.", "......#.", ".#....#.", "..####.."],
    6: ["..####..", ".#......", "#.......", "#.####..", "##....#.", "#......#", ".#....#.", "..####.."],
    7: [".######.", "......#.", ".....#..", "....#...", "...#....", "...#....", "...#....", "...#...."],
    8: ["..####..", ".#....#.", ".#....#.", "..####..", ".#....#.", "#......#", ".#....#.", "..####.."],
    9: ["..####..", ".#....#.", "#......#", ".#....##", "..####.#", ".......#", "......#.", "..####.."],
}
TRAIN_DIGITS = (0, 1, 2, 3, 4)
IMAGE_SIZE = 32

#: The config both systems run (``max_epochs`` and the paths are set per run).
CONFIG: dict[str, Any] = {
    "postfix": "bench",
    "seed": 0,
    "precision": 32,
    "accelerator": "cpu",
    "devices": 1,
    "dataframe_name": "df.csv",
    "num_workers": 0,
    "cache_size": 0,
    "transforms_train": {"name": "norm_resize_torch", "args": {"im_size": IMAGE_SIZE}},
    "transforms_val": {"name": "norm_resize_torch", "args": {"im_size": IMAGE_SIZE}},
    "sampler": {"name": "balance", "args": {"n_labels": 5, "n_instances": 4}},
    "bs_val": 64,
    "valid_period": 1,
    "metric_args": {"cmc_top_k": [1, 5], "return_only_overall_category": True},
    "log_images": False,
    "metric_for_checkpointing": "OVERALL/cmc/1",
    "mode_for_checkpointing": "max",
    "extractor": {
        "name": "resnet",
        "args": {
            "weights": None,
            "arch": "resnet18",
            "gem_p": None,
            "remove_fc": True,
            "normalise_features": True,
        },
    },
    "criterion": {
        "name": "triplet_with_miner",
        "args": {
            "margin": 0.2,
            "reduction": "mean",
            "need_logs": True,
            "miner": {"name": "all_triplets", "args": {}},
        },
    },
    "optimizer": {"name": "adam", "args": {"lr": 0.001}},
    "scheduling": None,
    "tags": [],
}
#: Keys that only ``oml train`` has: the checks and the start metrics OML does not make.
OML_ONLY = {"check_images": False, "validate_before_training": False, "show_dataset_warnings": False}
#: OML 4.0's runner: the config from a yaml file, the pipeline in the working directory.
OML40_RUNNER = (
    "import sys, yaml\n"
    "from oml.lightning.pipelines.train import extractor_training_pipeline\n"
    "extractor_training_pipeline(yaml.safe_load(open(sys.argv[1])))\n"
)


def write_digits_dataset(root: Path, per_label: int, seed: int) -> Path:
    """The dataset (see the module) in ``root``; returns ``root``."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    rows = ["label,path,split,is_query,is_gallery"]
    (root / "images").mkdir(parents=True, exist_ok=True)
    scale = IMAGE_SIZE // 8
    for digit, glyph in GLYPHS.items():
        ink = np.array([[c == "#" for c in line] for line in glyph], dtype=np.float64)
        split = "train" if digit in TRAIN_DIGITS else "validation"
        for i in range(per_label):
            shifted = np.roll(ink, tuple(rng.integers(-1, 2, size=2)), axis=(0, 1))
            pixels = np.clip(1.0 - shifted + rng.normal(0.0, 0.15, size=(8, 8)), 0.0, 1.0)
            big = np.kron(pixels, np.ones((scale, scale)))
            image = np.repeat((big * 255).astype(np.uint8)[:, :, None], 3, axis=2)
            path = f"images/{digit}_{i}.png"
            Image.fromarray(image).save(root / path)
            query = "" if split == "train" else "True"
            rows.append(f"{digit},{path},{split},{query},{query}")
    (root / "df.csv").write_text("\n".join(rows) + "\n")
    return root


def oml_command(config_dir: Path, logs_root: Path, folder: str) -> list[str]:
    oml = Path(sys.executable).with_name("oml")
    return [
        str(oml),
        "train",
        "--config-path",
        str(config_dir),
        "--config-name",
        "bench",
        f"logs_root={logs_root}",
        f"logs_folder={folder}",
    ]


def timed(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, of the process and its children) of ``command`` (stdout and
    stderr to ``log``). The CPU time moves less than the wall time when other processes share the machine.

    Raises:
        RuntimeError: the command failed (the end of its log).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "w") as out:
        started = time.perf_counter()
        done = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
        seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed ({done.returncode}):\n{log.read_text()[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--per-label", type=int, default=8, help="images per digit")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--oml-python", help="python of OML 4.0 with its pipelines extra")
    parser.add_argument("--oml-pythonpath", default="", help="prepended to OML 4.0's PYTHONPATH")
    parser.add_argument("--only", choices=("oml", "both"), default="both")
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new temporary folder")
    parser.add_argument("--out", type=Path, default=Path("bench_epoch_overhead.json"))
    args = parser.parse_args()
    if args.only == "both" and not args.oml_python:
        parser.error("--oml-python is needed to time OML 4.0 (or --only oml)")

    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench_epoch_overhead_"))
    data = write_digits_dataset(work / "digits", args.per_label, seed=0)
    config = {**CONFIG, "dataset_root": str(data), "max_epochs": args.epochs}
    (work / "configs").mkdir(parents=True, exist_ok=True)
    (work / "configs" / "bench.yaml").write_text(
        yaml.safe_dump({**config, **OML_ONLY, "logs_root": "logs", "logs_folder": None})
    )
    (work / "oml40.yaml").write_text(yaml.safe_dump({**config, "logs_root": "."}))
    (work / "oml40_run.py").write_text(OML40_RUNNER)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
    env.pop("PYTHONPATH", None)
    oml40_env = {**env, "PYTHONPATH": args.oml_pythonpath} if args.oml_pythonpath else env

    def run_oml(i: int) -> None:
        wall, cpu = timed(
            oml_command(work / "configs", work / "logs", f"oml_{i}"), work, env, work / f"oml_{i}.log"
        )
        runs["oml"].append((wall, cpu))
        print(f"run {i}: oml train {wall:.1f} s (cpu {cpu:.1f} s)", flush=True)

    def run_oml40(i: int) -> None:
        folder = work / f"oml40_{i}"
        folder.mkdir()
        command = [args.oml_python, str(work / "oml40_run.py"), str(work / "oml40.yaml")]
        wall, cpu = timed(command, folder, oml40_env, work / f"oml40_{i}.log")
        runs["OML 4.0"].append((wall, cpu))
        print(f"run {i}: OML 4.0   {wall:.1f} s (cpu {cpu:.1f} s)", flush=True)

    runs: dict[str, list[tuple[float, float]]] = {"oml": [], "OML 4.0": []}
    for i in range(args.repeat):
        if args.only == "oml":
            run_oml(i)
        else:  # the order alternates, so that neither system always runs first (a machine warms or cools)
            for run in (run_oml, run_oml40) if i % 2 == 0 else (run_oml40, run_oml):
                run(i)

    table = report(runs, args.epochs)
    print(table)
    args.out.write_text(json.dumps({"epochs": args.epochs, "runs": runs, "table": table}, indent=2))


def report(runs: dict[str, list[tuple[float, float]]], epochs: int) -> str:
    """A markdown table: every run's wall and CPU seconds, their medians, the median wall time per epoch, and
    the medians of the pairwise ratios oml / OML 4.0."""
    lines = [
        "| system | wall s (runs) | cpu s (runs) | median wall s | median cpu s | median wall ms / epoch |",
        "|---|---|---|---|---|---|",
    ]
    for name, times in runs.items():
        if not times:
            continue
        walls, cpus = [t[0] for t in times], [t[1] for t in times]
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        listed = ", ".join(f"{w:.1f}" for w in walls), ", ".join(f"{c:.1f}" for c in cpus)
        lines.append(
            f"| {name} | {listed[0]} | {listed[1]} | {wall:.1f} | {cpu:.1f} | {1000 * wall / epochs:.0f} |"
        )
    if runs["OML 4.0"]:
        pairs = list(zip(runs["oml"], runs["OML 4.0"]))
        wall_ratio = statistics.median(a[0] / b[0] for a, b in pairs)
        cpu_ratio = statistics.median(a[1] / b[1] for a, b in pairs)
        lines.append(f"\nmedian pairwise ratio oml / OML 4.0: wall {wall_ratio:.3f}, cpu {cpu_ratio:.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
