"""The random choices the samplers are made of, all drawn from an explicit ``torch.Generator``."""

from __future__ import annotations

import torch
from torch import Tensor


def choose(n: int, k: int, generator: torch.Generator) -> list[int]:
    """``k`` distinct positions out of ``range(n)`` in random order (``k <= n``)."""
    return torch.randperm(n, generator=generator)[:k].tolist()


def sample_with_fill(items: Tensor, k: int, generator: torch.Generator) -> Tensor:
    """``k`` items of the 1-D tensor ``items``, in random order.

    Without repetition when ``items`` has at least ``k`` elements; otherwise with repetition, taking every
    item once and drawing the ``k - len(items)`` missing ones uniformly with repetition, so that no item of
    a small group is left out.
    """
    n = len(items)
    if n >= k:
        return items[torch.randperm(n, generator=generator)[:k]]
    extra = torch.randint(n, (k - n,), generator=generator)
    picked = torch.cat([torch.arange(n), extra])
    return items[picked[torch.randperm(k, generator=generator)]]
