"""The miner of all the possible triplets of a batch."""

from __future__ import annotations

import sys

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

    def _sample(self, features: Tensor | None, labels: Tensor | list[int]) -> tuple[Tensor, Tensor, Tensor]:
        """Return the indices ``(anchors, positives, negatives)`` of the triplets (``features`` is unused)."""
        ids_a, ids_p, ids_n = get_available_triplets_ids(labels, device=self.device)
        n_triplets = len(ids_a)
        if n_triplets > self.max_output_triplets:
            chosen = torch.randperm(n_triplets, generator=self.generator, device=self.generator.device)
            chosen = chosen[: self.max_output_triplets].sort().values.to(ids_a.device)
            ids_a, ids_p, ids_n = ids_a[chosen], ids_p[chosen], ids_n[chosen]
        return ids_a, ids_p, ids_n


__all__ = ["AllTripletsMiner", "make_generator"]
