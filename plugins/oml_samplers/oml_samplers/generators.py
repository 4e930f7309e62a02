"""The explicit random generator every sampler draws from (never the global RNG)."""

from __future__ import annotations

import torch


def make_generator(generator: torch.Generator | None = None, seed: int | None = None) -> torch.Generator:
    """Return ``generator``, or a new CPU ``torch.Generator`` seeded with ``seed`` (``0`` if neither given).

    Raises:
        ValueError: both ``generator`` and ``seed`` are given, or ``generator`` is not a CPU generator.
        TypeError: ``generator`` is not a ``torch.Generator`` or ``seed`` is not an int.
    """
    if generator is not None and seed is not None:
        raise ValueError("give either generator or seed, not both")
    if generator is not None:
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        if generator.device.type != "cpu":
            raise ValueError(f"generator must be a CPU generator, got one on {generator.device}")
        return generator
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    return torch.Generator().manual_seed(0 if seed is None else seed)
