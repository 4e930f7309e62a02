"""Positive and negative pairs of a batch, for pairwise (re-ranking) models, taken apart from triplets."""

from __future__ import annotations

import torch
from torch import Tensor

from oml_core.interfaces.miners import IPairsMiner, ITripletsMinerInBatch
from oml_losses.miners.checks import check_batch
from oml_losses.miners.inbatch_all_tri import AllTripletsMiner
from oml_losses.miners.inbatch_hard_tri import HardTripletsMiner


def unique_pairs(ids1: Tensor, ids2: Tensor) -> Tensor:
    """The distinct unordered pairs of ``(ids1[i], ids2[i])`` as ``[n, 2]`` rows ``(min, max)``, sorted."""
    pairs = torch.stack([torch.minimum(ids1, ids2), torch.maximum(ids1, ids2)], dim=1)
    return torch.unique(pairs, dim=0) if len(pairs) else pairs


class PairsMiner(IPairsMiner):
    """This miner takes triplets apart into pairs: every triplet ``(a, p, n)`` of a batch gives the positive
    pair ``(a, p)`` and the negative pair ``(a, n)``.

    The triplets are those of ``HardTripletsMiner`` (``hard_mining``) or ``AllTripletsMiner``. A pair is
    unordered: it is written ``(min, max)`` and kept once. Registered as the pair miner ``pairs``.

    Args:
        hard_mining: Take the pairs from the hardest triplets, otherwise from all of them.
    """

    def __init__(self, hard_mining: bool = True) -> None:
        if not isinstance(hard_mining, bool):
            raise TypeError(f"hard_mining must be a bool, got {type(hard_mining).__name__}")
        self.hard_mining = hard_mining
        self._miner: ITripletsMinerInBatch = HardTripletsMiner() if hard_mining else AllTripletsMiner()

    def sample(self, features: Tensor, labels: Tensor | list[int]) -> tuple[Tensor, Tensor, Tensor]:
        """Mine the pairs of the batch.

        Args:
            features: Features with the shape of ``[batch_size, feature_size]``.
            labels: Labels with the size of ``batch_size``.

        Returns:
            ``(ids1, ids2, is_negative)``: ``int64`` batch indices with ``ids1 < ids2`` and a bool tensor, all
            ``[n_pairs]`` on the features' device: first the distinct positive pairs, then the distinct
            negative pairs, each sorted lexicographically.
        """
        labels_t = check_batch(features, labels)
        ids_a, ids_p, ids_n = (
            torch.as_tensor(ids, dtype=torch.long, device=features.device)
            for ids in self._miner._sample(features, labels_t)
        )
        positive, negative = unique_pairs(ids_a, ids_p), unique_pairs(ids_a, ids_n)
        pairs = torch.cat([positive, negative])
        is_negative = torch.arange(len(pairs), device=features.device) >= len(positive)
        return pairs[:, 0], pairs[:, 1], is_negative


__all__ = ["PairsMiner", "unique_pairs"]
