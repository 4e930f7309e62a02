"""The miner of the hardest triplet of every anchor of a batch."""

from __future__ import annotations

from torch import Tensor

from oml_core.interfaces.miners import ITripletsMinerInBatch
from oml_losses.miners.checks import check_batch
from oml_losses.miners.hardest import HARDEST, hard_triplets_lists, hardest_triplets_ids


class HardTripletsMiner(ITripletsMinerInBatch):
    """This miner selects the hardest triplets based on the distances between the features:

    - The hardest *positive* sample has the *maximal* distance to the anchor sample
    - The hardest *negative* sample has the *minimal* distance to the anchor sample

    Every sample of the batch that has a positive and a negative is an anchor, once: the output has one
    triplet per such sample, in increasing anchor order. Distances are Euclidean, on detached features; equal
    distances are broken by the smallest batch index. Mined by
    :func:`~oml_losses.miners.hardest.hardest_triplets_ids` (a float32 screen, exact near ties).
    """

    def _sample(self, features: Tensor, labels: Tensor | list[int]) -> tuple[Tensor, Tensor, Tensor]:
        """Return the indices ``(anchors, positives, negatives)``: ``int64`` tensors on the features' device.

        Args:
            features: Features with the shape of ``[batch_size, feature_size]``.
            labels: Labels with the size of ``batch_size``.
        """
        labels_t = check_batch(features, labels)
        return hardest_triplets_ids(features, labels_t)

    @staticmethod
    def _sample_from_distmat(
        distmat: Tensor, labels: Tensor | list[int]
    ) -> tuple[list[int], list[int], list[int]]:
        """OML's method: the hardest triplet of every anchor of a given ``[B, B]`` distance matrix, as lists
        (:func:`~oml_losses.miners.hardest.hard_triplets_lists`; equal distances go to the smallest index)."""
        return hard_triplets_lists(distmat, labels, HARDEST, HARDEST)


__all__ = ["HardTripletsMiner"]
