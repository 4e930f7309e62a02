"""Miner interfaces: turning a batch of features and labels into triplets, or into pairs."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor

#: OML's type aliases of ``oml.interfaces.miners``: a batch of triplets (anchors, positives, negatives), the
#: batch indices of triplets, and a batch's labels.
TTriplets = tuple[Tensor, Tensor, Tensor]
TTripletsIds = tuple[list[int], list[int], list[int]]
TLabels = list[int] | Tensor


def labels2list(labels: TLabels) -> list[int]:
    """A batch's labels as a new python list (OML's ``labels2list``): a tensor of any shape is flattened.

    Raises:
        TypeError: ``labels`` is neither a list nor a tensor.
    """
    if isinstance(labels, Tensor):
        return labels.reshape(-1).tolist()
    if isinstance(labels, list):
        return list(labels)
    raise TypeError(f"labels must be a list or a tensor, got {type(labels).__name__}")


class ITripletsMiner(ABC):
    """An abstraction of triplet miner."""

    @abstractmethod
    def sample(self, features: Tensor, labels: list[int] | Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Mine triplets.

        Args:
            features: Features with the shape of ``[batch_size, feature_size]``.
            labels: Labels with the size of ``batch_size``.

        Returns:
            Batch of triplets: the anchor, positive and negative features, each ``[n_triplets, feature_size]``.
        """


class ITripletsMinerInBatch(ITripletsMiner):
    """A miner of triplets inside one batch.

    The batches must contain at least 2 samples for each label and at least 2 different labels; the
    samplers of ``oml_samplers`` guarantee it.
    """

    @abstractmethod
    def _sample(self, features: Tensor, labels: list[int]) -> tuple[list[int] | Tensor, ...]:
        """Return the indices ``(anchors, positives, negatives)`` of the batch samples forming the triplets."""

    def sample(self, features: Tensor, labels: list[int] | Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Mine triplets with :meth:`_sample` and gather their features.

        Args:
            features: Features with the shape of ``[batch_size, feature_size]``.
            labels: Labels with the size of ``batch_size``.

        Returns:
            Batch of triplets.
        """
        if isinstance(labels, Tensor):
            labels = labels.tolist()
        ids_a, ids_p, ids_n = self._sample(features, labels=labels)
        index = [
            torch.as_tensor(ids, dtype=torch.long, device=features.device) for ids in (ids_a, ids_p, ids_n)
        ]
        # index_select rather than features[ids]: its backward (index_add_) is several times faster on the CPU
        return tuple(features.index_select(0, ids) for ids in index)  # type: ignore[return-value]


class IPairsMiner(ABC):
    """An abstraction of pairs miner: the positive and negative pairs of a batch, for training a pairwise
    model (a re-ranker such as STIR's ``ConcatSiamese``)."""

    @abstractmethod
    def sample(self, features: Tensor, labels: list[int] | Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Mine pairs.

        Args:
            features: Features with the shape of ``[batch_size, feature_size]``.
            labels: Labels with the size of ``batch_size``.

        Returns:
            ``(ids1, ids2, is_negative)``: the ``int64`` batch indices of the two items of every pair and a
            bool tensor telling the negative pairs (different labels), each ``[n_pairs]``.
        """
