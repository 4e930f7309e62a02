"""The miner of all the possible triplets of a batch."""

from __future__ import annotations

import random
import sys
from itertools import combinations, product

import torch
from torch import Tensor

from oml_core.interfaces.miners import ITripletsMinerInBatch
from oml_losses.miners.checks import check_positive_int
from oml_losses.miners.triplet_masks import get_available_triplets_ids


def make_generator(generator: torch.Generator | None, seed: int | None) -> torch.Generator:
    """Return ``generator``, or a new CPU generator seeded with ``seed`` (``0`` when neither is given).

    Raises:
        ValueError: both are given.
    """
    if generator is not None and seed is not None:
        raise ValueError("give either generator or seed, not both")
    if generator is not None:
        return generator
    return torch.Generator().manual_seed(0 if seed is None else seed)


class AllTripletsMiner(ITripletsMinerInBatch):
    """This miner selects all the possible triplets for the given batch.

    A triplet of batch indices ``(a, p, n)`` is available when ``labels[a] == labels[p]``, ``a != p`` and
    ``labels[n] != labels[a]`` (see :func:`~oml_losses.miners.triplet_masks.get_available_triplets_ids`).
    When there are more than ``max_output_triplets`` of them, ``max_output_triplets`` are drawn without
    repetition with ``generator`` (never the global RNG) and returned in lexicographic order; two miners
    with the same seed make the same draws, call after call.

    Args:
        max_output_triplets: Number of all of the possible triplets in the batch can be very large,
            so we can limit them via this parameter.
        device: The device where to perform computations.
        generator: The random generator used to subsample triplets.
        seed: Seed of a new CPU generator when ``generator`` is not given (``0`` by default).
    """

    def __init__(
        self,
        max_output_triplets: int = sys.maxsize,
        device: str = "cpu",
        generator: torch.Generator | None = None,
        seed: int | None = None,
    ) -> None:
        self.max_output_triplets = check_positive_int(max_output_triplets, "max_output_triplets")
        self.device = device
        self.generator = make_generator(generator, seed)

    def _sample(
        self, features: Tensor | None = None, labels: Tensor | list[int] | None = None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Return the indices ``(anchors, positives, negatives)`` of the triplets. ``features`` is unused and
        may be left out, as in OML (``miner._sample(labels=labels)``).

        Raises:
            TypeError: ``labels`` is not given.
        """
        if labels is None:
            raise TypeError("AllTripletsMiner._sample needs labels")
        triplets = get_available_triplets_ids(labels, device=self.device)
        return _subsample(triplets, self.max_output_triplets, self.generator)


def _subsample(
    triplets: tuple[Tensor, Tensor, Tensor], max_triplets: int, generator: torch.Generator | None
) -> tuple[Tensor, Tensor, Tensor]:
    """At most ``max_triplets`` of ``triplets``, drawn without repetition with ``generator`` (torch's global one
    when ``None``) and kept in their order."""
    ids_a, ids_p, ids_n = triplets
    if len(ids_a) <= max_triplets:
        return ids_a, ids_p, ids_n
    device = "cpu" if generator is None else generator.device
    chosen = torch.randperm(len(ids_a), generator=generator, device=device)
    chosen = chosen[:max_triplets].sort().values.to(ids_a.device)
    return ids_a[chosen], ids_p[chosen], ids_n[chosen]


def get_available_triplets(
    labels: Tensor | list[int],
    max_out_triplets: int = sys.maxsize,
    device: str = "cpu",
    generator: torch.Generator | None = None,
) -> tuple[list[int], list[int], list[int]]:
    """OML's ``get_available_triplets``: the triplets of :func:`get_available_triplets_ids` as lists, at most
    ``max_out_triplets`` of them (drawn with ``generator``, torch's global one when ``None``; OML draws with
    numpy's global generator), in lexicographic order.

    Raises:
        TypeError, ValueError: ``max_out_triplets`` is not a positive int.
    """
    check_positive_int(max_out_triplets, "max_out_triplets")
    ids_a, ids_p, ids_n = _subsample(
        get_available_triplets_ids(labels, device=device), max_out_triplets, generator
    )
    return ids_a.tolist(), ids_p.tolist(), ids_n.tolist()


def get_available_triplets_naive(
    labels: list[int], max_out_triplets: int = sys.maxsize
) -> tuple[list[int], list[int], list[int]]:
    """OML's reference of :func:`get_available_triplets` by plain enumeration (slow; for checking): for every
    label, every ordered pair ``(a, p)`` of two different items of that label with every item ``n`` of another
    label; at most ``max_out_triplets`` of them, drawn with python's global ``random`` (in the drawn order).

    Raises:
        ValueError: no triplet is available (every item has one label, or no label has two items).
    """
    triplets = []
    for label in sorted(set(labels)):
        positives = [i for i, other in enumerate(labels) if other == label]
        negatives = [i for i, other in enumerate(labels) if other != label]
        ordered_pairs = [pair for a, p in combinations(positives, 2) for pair in ((a, p), (p, a))]
        triplets += [(a, p, n) for (a, p), n in product(ordered_pairs, negatives)]
    if not triplets:
        raise ValueError(f"no triplet is available in the labels {labels}")
    ids_a, ids_p, ids_n = zip(*random.sample(triplets, min(len(triplets), max_out_triplets)))
    return list(ids_a), list(ids_p), list(ids_n)


__all__ = [
    "AllTripletsMiner",
    "get_available_triplets",
    "get_available_triplets_naive",
    "make_generator",
]
