"""Which ``(anchor, positive, negative)`` index triplets a batch of labels admits, computed with masks.

Shared by the in-batch miners: ``all`` mines every available triplet, hard miners pick among them.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


def _as_labels(labels: Tensor | list[int], device: str | torch.device | None = None) -> Tensor:
    labels_t = torch.as_tensor(labels, device=device)
    if labels_t.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, got the shape {tuple(labels_t.shape)}")
    return labels_t


def get_pos_neg_masks(
    labels: Tensor | list[int], device: str | torch.device | None = None, n_anchors: int | None = None
) -> tuple[Tensor, Tensor]:
    """Boolean ``[A, B]`` masks of positive and negative pairs of ``labels`` ``[B]``.

    ``is_pos[i, j] = labels[i] == labels[j] and i != j``; ``is_neg[i, j] = labels[i] != labels[j]``. The rows
    are the anchors: the first ``A = n_anchors`` items (all ``B`` of them when ``None``).
    """
    labels_t = _as_labels(labels, device)
    n_anchors = len(labels_t) if n_anchors is None else n_anchors
    same = labels_t[:n_anchors, None] == labels_t[None, :]
    is_pos = same & ~torch.eye(n_anchors, len(labels_t), dtype=torch.bool, device=labels_t.device)
    return is_pos, ~same


def triplets_from_masks(pos_mask: Tensor, neg_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Every ``(a, p, n)`` with ``pos_mask[a, p]`` and ``neg_mask[a, n]``, sorted lexicographically.

    Vectorised: the pairs ``(a, p)`` of ``pos_mask`` are crossed with the negatives of their anchor (a
    ``[n_pos_pairs, B]`` mask, not ``[A, B, B]``).

    Args:
        pos_mask: Boolean ``[A, B]``: the positives chosen for every anchor.
        neg_mask: Boolean ``[A, B]``: the negatives chosen for every anchor.

    Returns:
        Three ``int64`` tensors of equal length on the masks' device: anchor, positive and negative indices.
    """
    ids_a, ids_p = torch.nonzero(pos_mask, as_tuple=True)
    pair_ids, ids_n = torch.nonzero(neg_mask[ids_a], as_tuple=True)
    return ids_a[pair_ids], ids_p[pair_ids], ids_n


def get_available_triplets_ids(
    labels: Tensor | list[int], device: str | torch.device | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """All triplets ``(a, p, n)`` with ``labels[a] == labels[p]``, ``a != p``, ``labels[n] != labels[a]``.

    The masks of :func:`get_pos_neg_masks` given to :func:`triplets_from_masks`. The triplets are sorted
    lexicographically by ``(a, p, n)``. Their number is ``sum_a (count(labels[a]) - 1) * (B -
    count(labels[a]))``.

    Args:
        labels: Labels ``[B]`` of the batch.
        device: Where to compute (``labels``' own device if ``None``).

    Returns:
        Three ``int64`` tensors of equal length: anchor, positive and negative indices.
    """
    return triplets_from_masks(*get_pos_neg_masks(labels, device))


class PositiveSlots(NamedTuple):
    """Each sample's positives as ``[B, S]`` slots (:func:`positive_slots`)."""

    pos_ids: Tensor  #: ``[B, S]`` indices of the positives, padded with the sample's own index
    valid: Tensor  #: ``[B, S]`` mask of the real slots
    counts: Tensor  #: ``[B]`` size of each sample's label group

    @property
    def n_triplets(self) -> int:
        """``sum_a (count_a - 1) * (B - count_a)``: the number of all the triplets of the batch."""
        return int(((self.counts - 1) * (len(self.counts) - self.counts)).sum())


def positive_slots(labels: Tensor) -> PositiveSlots:
    """Each sample's positives (same label, other index) in increasing order, as ``[B, S]`` slots.

    ``S + 1`` is the largest label count. Computed from a stable sort of the labels (no ``[B, B]`` mask):
    sample ``i`` of a label group starting at ``start`` in the sorted order, at rank ``r`` in its group of
    ``c`` members, has the positives ``order[start + k + (k >= r)]`` for the slots ``k < c - 1``.
    """
    order = torch.sort(labels, stable=True).indices
    _, group_of_sorted, group_counts = torch.unique_consecutive(
        labels[order], return_inverse=True, return_counts=True
    )
    group_starts = torch.cumsum(group_counts, 0) - group_counts
    start = torch.empty_like(order).scatter_(0, order, group_starts[group_of_sorted])
    counts = torch.empty_like(order).scatter_(0, order, group_counts[group_of_sorted])
    ranks = torch.empty_like(order).scatter_(0, order, torch.arange(len(order), device=order.device)) - start
    slots = torch.arange(int(group_counts.max()) - 1 if len(order) else 0, device=order.device)
    valid = slots[None, :] < counts[:, None] - 1
    sorted_pos = (start[:, None] + slots[None, :] + (slots[None, :] >= ranks[:, None])).clamp_(
        max=len(order) - 1
    )
    pos_ids = torch.where(valid, order[sorted_pos], torch.arange(len(order), device=order.device)[:, None])
    return PositiveSlots(pos_ids, valid, counts)


__all__ = [
    "PositiveSlots",
    "get_available_triplets_ids",
    "get_pos_neg_masks",
    "positive_slots",
    "triplets_from_masks",
]
