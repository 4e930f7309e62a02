"""Gallery items grouped by an integer key without a ``Q x G`` comparison: the items a query ignores (its own
item, its sequence: equal ignore keys), their number (:func:`group_sizes`) and its ground truth (equal labels)."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from oml_core.utils.ragged import Ragged


class Groups(NamedTuple):
    """Gallery positions grouped by an integer key, and every query's group (its key's), without a Q x G
    comparison: ``order[starts[q] : starts[q] + counts[q]]`` are the gallery positions with query ``q``'s key,
    ascending."""

    order: Tensor
    starts: Tensor
    counts: Tensor


def group_by_key(keys_gallery: Tensor, keys_query: Tensor) -> Groups:
    """The gallery positions grouped by ``keys_gallery``, and the group of every query's key in
    ``keys_query`` (see :class:`Groups`): one sort of the gallery's keys."""
    sorted_keys, order = torch.sort(keys_gallery, stable=True)
    starts = torch.searchsorted(sorted_keys, keys_query)
    counts = torch.searchsorted(sorted_keys, keys_query, right=True) - starts
    return Groups(order, starts, counts)


def expand_groups(groups: Groups, rows: slice) -> tuple[Tensor, Tensor]:
    """``(row, position)`` pairs of the groups of the queries ``rows``: row (local to ``rows``) ascending,
    then position ascending."""
    starts, counts = groups.starts[rows], groups.counts[rows]
    local = torch.repeat_interleave(torch.arange(len(counts), device=counts.device), counts)
    first = torch.cumsum(counts, 0) - counts
    offsets = torch.arange(len(local), device=counts.device) - first[local]
    return local, groups.order[starts[local] + offsets]


def ground_truth_ids(
    labels_query: Tensor, labels_gallery: Tensor, keys_query: Tensor, keys_gallery: Tensor
) -> Ragged:
    """Every query's ground truth: the gallery positions with its label, minus those sharing its ignore key
    (itself, its sequence), ascending, on the CPU. Grouped by sorting the gallery's labels once, never by a
    ``Q x G`` comparison.

    Args:
        labels_query: ``[Q]`` integer labels of the queries (coded as the gallery's).
        labels_gallery: ``[G]`` integer labels of the gallery items.
        keys_query: ``[Q]`` ignore keys of the queries.
        keys_gallery: ``[G]`` ignore keys of the gallery items (equal keys: an ignored pair).
    """
    rows, positions = expand_groups(group_by_key(labels_gallery, labels_query), slice(None))
    keep = keys_gallery[positions] != keys_query[rows]
    rows, positions = rows[keep], positions[keep]
    return Ragged(positions.cpu(), torch.bincount(rows, minlength=len(labels_query)).cpu())


def group_sizes(groups: Tensor, exclude: Tensor) -> Tensor:
    """``[Q]`` int64: how many items have the group ``exclude[q]`` (by a sort of ``groups``, no ``Q x n``
    comparison)."""
    sorted_groups = torch.sort(groups).values
    return torch.searchsorted(sorted_groups, exclude, right=True) - torch.searchsorted(sorted_groups, exclude)


__all__ = ["Groups", "expand_groups", "ground_truth_ids", "group_by_key", "group_sizes"]
