"""Benchmark: drawing the worst-queries figure (``RetrievalResults.visualize_with_functions``) and rendering it to
PNG, as ``MetricValCallback(log_images=True)`` does every validation.

The figure of ``--queries`` queries x (1 + ``--retrieved`` + ``--gt``) images (OML's worst-queries figure: 5 x
(1 + 5 + 2)), every image a seeded photo-like RGB uint8 array (:func:`photo_like`) of each ``--sizes`` side.
Two implementations, in alternating order within this one process, ``--rounds`` times:

- *before*: the drawing as it was (a copy kept here): ``add_subplot`` per image, ticks set to none, then
  ``fig.tight_layout()``;
- *after*: ``RetrievalResults.visualize_with_functions`` as it is (a computed grid, hidden axes).

Timed: *draw* (the figure built), *render* (``fig.savefig(buffer, format="png")``, as the loggers and
``save_figures`` do), *total*: wall and process CPU time (less sensitive to other processes on the machine),
median (min) ms of the rounds. Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_worst_queries_figure.py --sizes 64 224 --rounds 7
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
from matplotlib.figure import Figure

from oml_core.retrieval import RetrievalResults
from oml_core.retrieval.retrieval_results import GT_COLOR, IRRELEVANT_COLOR, QUERY_COLOR, RELEVANT_COLOR

DrawFn = Callable[[int, tuple[int, int, int]], np.ndarray]


def draw_before(
    rr: RetrievalResults, query_ids: list[int], image_fn: DrawFn, n_shown: int, n_gt_shown: int
) -> Figure:
    """The figure as ``visualize_with_functions`` drew it before its layout was computed (commit 586fc21)."""
    n_cols = 1 + n_shown + n_gt_shown
    fig = Figure(figsize=(2.0 * n_cols, 2.2 * len(query_ids)))

    def draw(where: int, image: np.ndarray, color: tuple[int, int, int], title: str) -> None:
        ax = fig.add_subplot(len(query_ids), n_cols, where)
        ax.imshow(image)
        ax.set_title(title, fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        for spine in ax.spines.values():
            spine.set_edgecolor(tuple(c / 255 for c in color))
            spine.set_linewidth(4)

    for row, i in enumerate(query_ids):
        first = row * n_cols + 1
        draw(first, image_fn(i, QUERY_COLOR), QUERY_COLOR, f"Query #{i}")
        gt = rr.gt_ids[i].tolist()
        for j, (position, dist) in enumerate(
            zip(rr.retrieved_ids[i][:n_shown].tolist(), rr.distances[i].tolist())
        ):
            color = RELEVANT_COLOR if position in gt else IRRELEVANT_COLOR
            draw(first + 1 + j, image_fn(position, color), color, f"#{position}: {dist:.3f}")
        for j, position in enumerate(gt[:n_gt_shown]):
            draw(first + 1 + n_shown + j, image_fn(position, GT_COLOR), GT_COLOR, f"GT #{position}")
    fig.tight_layout()
    return fig


def photo_like(rng: np.random.Generator, size: int) -> np.ndarray:
    """A ``size x size`` RGB uint8 image that compresses like a photo: random 8 x 8 colours, smoothly
    interpolated (bilinear), plus a little noise (pure noise would make PNG encoding unrealistically slow)."""
    coarse = torch.from_numpy(rng.random((1, 3, 8, 8), dtype=np.float32))
    smooth = torch.nn.functional.interpolate(coarse, size=(size, size), mode="bilinear", align_corners=True)
    noisy = smooth[0].permute(1, 2, 0).numpy() * 235 + rng.random((size, size, 3), dtype=np.float32) * 20
    return noisy.astype(np.uint8)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=5)
    parser.add_argument("--retrieved", type=int, default=5)
    parser.add_argument("--gt", type=int, default=2)
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 224])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    generator = torch.Generator().manual_seed(args.seed)
    n_gallery = 100
    retrieved = [
        torch.randperm(n_gallery, generator=generator)[: args.retrieved] for _ in range(args.queries)
    ]
    distances = [
        torch.sort(torch.rand(args.retrieved, generator=generator)).values for _ in range(args.queries)
    ]
    gt = [
        torch.cat([ids[:2], torch.arange(n_gallery, n_gallery + args.gt)]) for ids in retrieved
    ]  # the first 2 retrieved are relevant
    rr = RetrievalResults(distances, retrieved, gt)
    query_ids = list(range(args.queries))
    rng = np.random.default_rng(args.seed)

    print(
        f"{args.queries} queries x (1 + {args.retrieved} + {args.gt}) images, rounds={args.rounds}, "
        f"seed={args.seed}; ms, median (min) of the rounds\n"
    )
    print(
        "| images | version | draw wall | draw CPU | render PNG wall | render CPU | total wall | total CPU | PNG KiB |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        image = photo_like(rng, size)

        def image_fn(item: int, color: tuple[int, int, int], image: np.ndarray = image) -> np.ndarray:
            return image

        versions: dict[str, Callable[[], Figure]] = {
            "before": lambda: draw_before(rr, query_ids, image_fn, args.retrieved, args.gt),
            "after": lambda: rr.visualize_with_functions(
                query_ids, image_fn, image_fn, n_galleries_to_show=args.retrieved, n_gt_to_show=args.gt
            ),
        }
        columns = ("draw wall", "draw CPU", "render wall", "render CPU", "total wall", "total CPU")
        timings: dict[str, dict[str, list[float]]] = {v: {c: [] for c in columns} for v in versions}
        png_sizes: dict[str, int] = {}
        for round_ in range(args.rounds + 1):  # round 0 warms up
            order = list(versions) if round_ % 2 == 0 else list(reversed(versions))
            for version in order:
                wall, cpu = [time.perf_counter()], [time.process_time()]
                fig = versions[version]()
                wall.append(time.perf_counter())
                cpu.append(time.process_time())
                buffer = io.BytesIO()
                fig.savefig(buffer, format="png")
                wall.append(time.perf_counter())
                cpu.append(time.process_time())
                if round_ == 0:
                    png_sizes[version] = len(buffer.getvalue())
                    continue
                spans = (
                    wall[1] - wall[0],
                    cpu[1] - cpu[0],
                    wall[2] - wall[1],
                    cpu[2] - cpu[1],
                    wall[2] - wall[0],
                    cpu[2] - cpu[0],
                )
                for column, span in zip(columns, spans):
                    timings[version][column].append(span)
        for version, times in timings.items():
            cells = [f"{statistics.median(times[c]) * 1e3:.0f} ({min(times[c]) * 1e3:.0f})" for c in columns]
            print(f"| {size}x{size} | {version} | {' | '.join(cells)} | {png_sizes[version] / 1024:.0f} |")
        ratios = [
            statistics.median(timings["before"][c]) / statistics.median(timings["after"][c]) for c in columns
        ]
        print(f"| {size}x{size} | before / after | {' | '.join(f'{r:.2f}x' for r in ratios)} | |")


if __name__ == "__main__":
    main()
