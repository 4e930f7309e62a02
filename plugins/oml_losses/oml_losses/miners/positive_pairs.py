"""Random positive pairs ``(anchor, positive)`` of a set of labels, drawn without enumerating the pairs."""

from __future__ import annotations

import torch
from torch import Tensor


def sample_positive_pairs(labels: Tensor, n_pairs: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Draw ``n_pairs`` pairs ``(a, p)`` with ``labels[a] == labels[p]`` and ``a != p``, with replacement.

    The anchor is uniform among the items that have at least one other item of their label, the positive
    uniform among the other items of the anchor's label (so memory stays ``O(len(labels))``). The draws are
    made with ``generator`` on its device.

    Args:
        labels: ``int64`` labels ``[N]``.
        n_pairs: How many pairs to draw.
        generator: The random generator.

    Returns:
        Two ``int64`` tensors ``[n_pairs]`` on ``labels``' device: anchor and positive indices.

    Raises:
        ValueError: ``n_pairs > 0`` and no label has two items.
    """
    if n_pairs == 0:
        empty = labels.new_zeros(0, dtype=torch.long)
        return empty, empty.clone()
    order = torch.argsort(labels, stable=True)
    _, group, counts = torch.unique_consecutive(labels[order], return_inverse=True, return_counts=True)
    starts = torch.cumsum(counts, dim=0) - counts
    size = counts[group]  # the size of the label group of every sorted position
    eligible = torch.nonzero(size >= 2).squeeze(1)
    if len(eligible) == 0:
        raise ValueError(f"labels: no label has two items, cannot draw {n_pairs} positive pairs")
    draw = torch.randint(len(eligible), (n_pairs,), generator=generator, device=generator.device)
    anchor = eligible[draw.to(labels.device)]
    start, size_a = starts[group[anchor]], size[anchor]
    # uniform among the size_a - 1 other positions of the group: skip the anchor's own offset
    # (float64: floor(u * m) < m for every u < 1 and m < 2**52)
    u = torch.rand(n_pairs, generator=generator, device=generator.device, dtype=torch.float64)
    other = (u.to(labels.device) * (size_a - 1)).floor().long()
    other += other >= anchor - start
    return order[anchor], order[start + other]


__all__ = ["sample_positive_pairs"]
