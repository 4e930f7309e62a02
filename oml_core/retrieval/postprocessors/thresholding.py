"""Post-processors that need no model: they cut every query's retrieved list at a distance threshold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from oml_core.interfaces.retrieval import IRetrievalPostprocessor
from oml_core.retrieval.retrieval_results import RetrievalResults
from oml_core.utils.checks import check_threshold


def keep_first_items(rr: RetrievalResults, n_keep: Sequence[int] | Tensor) -> RetrievalResults:
    """New results where query ``i`` keeps only its ``n_keep[i]`` closest retrieved items.

    The ground truth and the per-query gallery sizes are kept as they are (shared: results are immutable):
    items cut from the list are still relevant (they count as missed by recall-like metrics), and could have
    been retrieved.

    Raises:
        ValueError: ``n_keep`` is not one non-negative integer per query.
    """
    return RetrievalResults(
        distances=rr.distances.truncate(n_keep),
        retrieved_ids=rr.retrieved_ids.truncate(n_keep),
        gt_ids=rr.gt_ids,
        n_gallery=rr.n_gallery,
    )


class ConstantThresholding(IRetrievalPostprocessor):
    """Keep only the retrieved items closer than a constant distance threshold.

    Query ``i`` keeps the items with ``distances[i][j] < th`` (strictly: an item exactly at ``th`` is cut).
    Since distances are sorted, this keeps a prefix of every list; a query may end with no item at all.

    Args:
        th: Distance threshold to limit the ``RetrievalResults``: a number, or ``+inf`` (keep every item).

    Raises:
        TypeError: ``th`` is not a real number (a ``bool`` is not one).
        ValueError: ``th`` is NaN (``d < nan`` is false for every distance: every item would be cut without a
            word) or ``-inf`` (the same).

    Example:
        >>> rr = RetrievalResults([torch.tensor([0.1, 0.2, 0.5])], [torch.tensor([4, 0, 2])])
        >>> ConstantThresholding(th=0.3).process(rr).retrieved_ids[0]
        tensor([4, 0])
    """

    def __init__(self, th: float) -> None:
        self.th = check_threshold(th, "th")

    def process(self, rr: RetrievalResults, dataset: Any = None) -> RetrievalResults:
        """New ``RetrievalResults`` without the items at distance ``>= th``; ``rr`` is unchanged.

        Args:
            rr: Retrieval results to cut.
            dataset: Not used (accepted for the common post-processor interface).
        """
        below = (rr.distances.values.float() < self.th).long()
        n_keep = torch.zeros(len(rr), dtype=torch.long).index_add_(0, rr.distances.row_ids(), below)
        return keep_first_items(rr, n_keep)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(th={self.th})"


class AdaptiveThresholding(IRetrievalPostprocessor):
    """Cut every query's retrieved list after the first big gap between consecutive distances.

    With :math:`\\Delta_{i,j} = d_{i,j+1} - d_{i,j}` the gaps within every query's sorted distances and
    :math:`\\bar\\Delta` their mean over all the queries, query ``i`` keeps its items up to and including
    position ``j*``, the first ``j`` with :math:`\\Delta_{i,j} > n_{std} \\cdot \\bar\\Delta`; a query
    without such a gap keeps everything. (OML's rule; the mean is taken over all the gaps of all queries.)

    Args:
        n_std: Multiple of the mean gap that makes a gap "big": the smaller it is, the fewer items remain.

    Example:
        >>> rr = RetrievalResults([torch.tensor([0.1, 0.2, 0.3, 0.9])], [torch.tensor([5, 6, 7, 8])])
        >>> AdaptiveThresholding(n_std=1.5).process(rr).retrieved_ids[0]  # gaps 0.1, 0.1, 0.6; mean 0.267
        tensor([5, 6, 7])
    """

    def __init__(self, n_std: float) -> None:
        if not n_std >= 0:
            raise ValueError(f"n_std must be a non-negative number, got {n_std}")
        self.n_std = float(n_std)

    def process(self, rr: RetrievalResults, dataset: Any = None) -> RetrievalResults:
        """New ``RetrievalResults`` cut after the first big gap of every query; ``rr`` is unchanged.

        Args:
            rr: Retrieval results to cut.
            dataset: Not used (accepted for the common post-processor interface).
        """
        flat, lengths = rr.distances.values.double(), rr.distances.lengths
        n_gaps_total = int((lengths - 1).clamp(min=0).sum())
        if n_gaps_total == 0:
            return keep_first_items(rr, lengths)
        query = rr.distances.row_ids()
        # gap k is flat[k + 1] - flat[k]; it is a gap within a query when both items belong to the same query
        gaps = flat[1:] - flat[:-1]
        within = query[1:] == query[:-1]
        mean_gap = gaps[within].sum() / n_gaps_total
        big = within & (gaps > self.n_std * mean_gap)
        starts = torch.cumsum(lengths, 0) - lengths
        position_in_query = torch.arange(len(gaps)) - starts[query[:-1]]
        first_big = torch.full((len(lengths),), -1, dtype=torch.long)
        first_big = first_big.scatter_reduce(
            0, query[:-1][big], position_in_query[big], reduce="amin", include_self=False
        )
        n_keep = torch.where(first_big >= 0, first_big + 1, lengths)
        return keep_first_items(rr, n_keep)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_std={self.n_std})"


__all__ = ["AdaptiveThresholding", "ConstantThresholding", "keep_first_items"]
