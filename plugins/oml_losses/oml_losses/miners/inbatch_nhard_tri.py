"""The miner of the n hardest positives times the n hardest negatives of every anchor of a batch."""

from __future__ import annotations

from torch import Tensor

from oml_core.interfaces.miners import ITripletsMinerInBatch
from oml_losses.miners.checks import check_batch
from oml_losses.miners.distances import l2_dist
from oml_losses.miners.hardest import get_hard_triplets_ids, hard_triplets_lists

THardnessRange = tuple[int, int] | list[int] | int


def parse_hardness_range(value: THardnessRange, name: str) -> slice:
    """The 0-based half-open slice of ranks meant by ``n`` (``1..n``) or ``(min, max)`` (``min..max``), both
    1-based and inclusive.

    Raises:
        TypeError: ``value`` is not an int or a 2-element list/tuple of ints.
        ValueError: ``n < 1``, ``min < 1`` or ``min > max``.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
        return slice(0, value)
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError(f"{name} must be an int or a (min, max) pair of ints, got {value!r}")
    low, high = value
    if any(isinstance(v, bool) or not isinstance(v, int) for v in (low, high)):
        raise TypeError(f"{name} must be an int or a (min, max) pair of ints, got {value!r}")
    if low < 1 or low > high:
        raise ValueError(f"{name} must be a range (min, max) with 1 <= min <= max, got {value!r}")
    return slice(low - 1, high)


class NHardTripletsMiner(ITripletsMinerInBatch):
    """This miner selects hard triplets based on distances between features:

    - hard *positive* samples have large distance to the anchor sample
    - hard *negative* samples have small distance to the anchor sample

    For every anchor, the positives are ranked from the farthest (the 1st hardest) and the negatives from the
    closest (the 1st hardest), equal distances by increasing batch index; the chosen positives and negatives
    of an anchor give all their ``(anchor, positive, negative)`` combinations. Distances are Euclidean, on
    detached features. The triplets come sorted lexicographically by ``(anchor, positive, negative)``.

    Toward the end of the training, annotation errors can affect final metric. If you are not sure about the
    quality of your dataset, you can use range instead of integer value for parameters and exclude
    combinations with the largest distances. For example instead picking 5 positive examples, you can use
    examples from the 2nd hardest to the 5th one: ``n_positive=(2, 5)``.

    Args:
        n_positive: Keep the ``n_positive`` hardest positives (``1..n``), or, given a range ``(min, max)``,
            the ``min``-th to the ``max``-th hardest (1-based, inclusive). An anchor with fewer positives keeps
            those it has in the range (none when it has fewer than ``min``).
        n_negative: The same for the negatives.

    Note:
        If both parameters are 1, the miner is equivalent to ``HardTripletsMiner``. If both parameters are
        large enough (at least the largest number of positives, resp. negatives, of a sample), the miner mines
        the triplets of ``AllTripletsMiner``.
    """

    def __init__(self, n_positive: THardnessRange = 1, n_negative: THardnessRange = 1) -> None:
        self.positive_slice = parse_hardness_range(n_positive, "n_positive")
        self.negative_slice = parse_hardness_range(n_negative, "n_negative")

    def _sample(self, features: Tensor, labels: Tensor | list[int]) -> tuple[Tensor, Tensor, Tensor]:
        """Return the indices ``(anchors, positives, negatives)``: ``int64`` tensors on the features' device.

        Args:
            features: Features with the shape of ``[batch_size, feature_size]``.
            labels: Labels with the size of ``batch_size``.
        """
        labels_t = check_batch(features, labels)
        return self.sample_from_distmat(l2_dist(features, features), labels_t)

    def sample_from_distmat(self, distmat: Tensor, labels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Mine from given distances, with only the first ``A`` of the ``B`` items as anchors.

        Args:
            distmat: Distances ``[A, B]`` from the first ``A`` items to all the ``B`` items.
            labels: ``int64`` labels ``[B]`` of the items, on ``distmat``'s device.

        Returns:
            Indices ``(anchors, positives, negatives)`` into the ``B`` items, sorted lexicographically.
        """
        return get_hard_triplets_ids(distmat, labels, self.positive_slice, self.negative_slice)

    def _sample_from_distmat(
        self,
        distmat: Tensor,
        labels: Tensor | list[int],
        *,
        ignore_anchor_mask: Tensor | list[int] | None = None,
    ) -> tuple[list[int], list[int], list[int]]:
        """OML's method: :meth:`sample_from_distmat` of a square ``[B, B]`` distance matrix, as lists, with
        the items marked in ``ignore_anchor_mask`` (non-zero) left out as anchors (they remain positives and
        negatives; :func:`~oml_losses.miners.hardest.hard_triplets_lists`)."""
        return hard_triplets_lists(
            distmat, labels, self.positive_slice, self.negative_slice, ignore_anchor_mask
        )


__all__ = ["NHardTripletsMiner", "parse_hardness_range"]
