"""Benchmark: forward + backward of oml-losses' pair and proxy losses against pytorch-metric-learning's.

Each case is a batch of ``n_labels x n_instances`` random standard normal ``--dim`` features that require
grad (no backbone), labels in a random order. A step is the loss, then ``backward``; ``--steps`` steps are
timed after ``--warmup`` ones and the median kept, in ``--repeat`` rounds whose best median is shown (the
machine may be shared: the fastest round is the least disturbed one). Both sides get the same batch and, for
ProxyAnchor, the same proxies. ``--threads`` torch threads (one by default, as the CPU tests run).

Pairs compared (the same values, see ``plugins/oml_losses/tests/test_pair_proxy_losses.py``):
``ContrastiveLoss`` (on L2-normalised features, PML's default distance), ``MultiSimilarityLoss``,
``SupConLoss(0.1)``, ``ProxyAnchorLoss`` (1000 classes). Prints a markdown table. Usage::

    python benchmarks/bench_pair_losses.py --batches 16x4 64x4 256x4 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import pytorch_metric_learning.losses as pml
import torch
from oml_losses import ContrastiveLoss, MultiSimilarityLoss, ProxyAnchorLoss, SupConLoss
from torch import Tensor, nn

N_PROXY_CLASSES = 1000


def make_batch(n_labels: int, n_instances: int, dim: int, seed: int) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(n_labels).repeat_interleave(n_instances)
    labels = labels[torch.randperm(len(labels), generator=generator)]
    features = torch.randn(len(labels), dim, generator=generator)
    return features, labels


def loss_pairs(dim: int) -> dict[str, tuple[nn.Module, nn.Module, bool]]:
    """``name -> (oml loss, PML loss, whether the features are L2-normalised first)``."""
    ours = ProxyAnchorLoss(N_PROXY_CLASSES, dim, generator=torch.Generator().manual_seed(0))
    theirs = pml.ProxyAnchorLoss(N_PROXY_CLASSES, dim)
    theirs.proxies.data.copy_(ours.proxies.data)
    return {
        "contrastive": (ContrastiveLoss(), pml.ContrastiveLoss(), True),
        "multi_similarity": (MultiSimilarityLoss(), pml.MultiSimilarityLoss(), False),
        "supcon": (SupConLoss(0.1), pml.SupConLoss(0.1), False),
        "proxy_anchor": (ours, theirs, False),
    }


def step_ms(
    loss: nn.Module, features: Tensor, labels: Tensor, normalise: bool, steps: int, warmup: int
) -> float:
    """The median milliseconds of ``steps`` steps (loss + backward) after ``warmup`` ones."""
    times = []
    for i in range(warmup + steps):
        x = features.clone().requires_grad_(True)
        start = time.perf_counter()
        value = loss(nn.functional.normalize(x, dim=1) if normalise else x, labels)
        value.backward()
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--batches", nargs="+", default=["16x4", "64x4", "256x4"], help="n_labels x n_instances"
    )
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    labels_x_instances = [tuple(int(v) for v in batch.split("x")) for batch in args.batches]
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), dim {args.dim}; median ms per step, best round\n"
    )
    print("| loss | batch | oml ms | PML ms | oml / PML |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (ours, theirs, normalise) in loss_pairs(args.dim).items():
        for n_labels, n_instances in labels_x_instances:
            features, labels = make_batch(n_labels, n_instances, args.dim, seed=0)
            if name == "proxy_anchor":
                labels = labels % N_PROXY_CLASSES
            oml_ms, pml_ms = (
                min(
                    step_ms(loss, features, labels, normalise, args.steps, args.warmup)
                    for _ in range(args.repeat)
                )
                for loss in (ours, theirs)
            )
            print(f"| {name} | {len(labels)} | {oml_ms:.2f} | {pml_ms:.2f} | {oml_ms / pml_ms:.2f} |")


if __name__ == "__main__":
    main()
