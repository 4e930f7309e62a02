"""Which ``(anchor, positive, negative)`` index triplets a batch of labels admits, computed with masks.

Shared by the in-batch miners: ``all`` mines every available triplet, hard miners pick among them.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _as_labels(labels: Tensor | list[int], device: str | torch.device | None = None) -> Tensor:
    labels_t = torch.as_tensor(labels, device=device)
    if labels_t.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, got the shape {tuple(labels_t.shape)}")
    return labels_t


def get_pos_neg_masks(
    labels: Tensor | list[int], device: str | torch.device | None = None
) -> tuple[Tensor, Tensor]:
    """Boolean ``[B, B]`` masks of positive and negative pairs of ``labels`` ``[B]``.

    ``is_pos[i, j] = labels[i] == labels[j] and i != j``; ``is_neg[i, j] = labels[i] != labels[j]``.
    """
    labels_t = _as_labels(labels, device)
    same = labels_t[:, None] == labels_t[None, :]
    is_pos = same & ~torch.eye(len(labels_t), dtype=torch.bool, device=labels_t.device)
    return is_pos, ~same


def get_available_triplets_ids(
    labels: Tensor | list[int], device: str | torch.device | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """All triplets ``(a, p, n)`` with ``labels[a] == labels[p]``, ``a != p``, ``labels[n] != labels[a]``.

    Vectorised: the positive pairs ``(a, p)`` come from :func:`get_pos_neg_masks`, then each pair is
    crossed with the negatives of its anchor (a ``[n_pos_pairs, B]`` mask, not ``[B, B, B]``). The
    triplets are sorted lexicographically by ``(a, p, n)``. Their number is
    ``sum_a (count(labels[a]) - 1) * (B - count(labels[a]))``.

    Args:
        labels: Labels ``[B]`` of the batch.
        device: Where to compute (``labels``' own device if ``None``).

    Returns:
        Three ``int64`` tensors of equal length: anchor, positive and negative indices.
    """
    is_pos, is_neg = get_pos_neg_masks(labels, device)
    ids_a, ids_p = torch.nonzero(is_pos, as_tuple=True)
    pair_ids, ids_n = torch.nonzero(is_neg[ids_a], as_tuple=True)
    return ids_a[pair_ids], ids_p[pair_ids], ids_n


__all__ = ["get_available_triplets_ids", "get_pos_neg_masks"]
