"""The miner of one hard triplet per label, built on the labels' mean vectors."""

from __future__ import annotations

import torch
from torch import Tensor

from oml_core.interfaces.miners import ITripletsMiner
from oml_losses.miners.checks import check_batch
from oml_losses.miners.distances import l2_dist


def check_balanced(labels: Tensor) -> tuple[Tensor, Tensor]:
    """The sorted unique labels and, for each item, the index of its label among them.

    Raises:
        ValueError: the labels do not have the same number of items each, there are fewer than 2 labels, or
            fewer than 2 items per label.
    """
    unique, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
    if len(unique) < 2:
        raise ValueError(f"labels: expected at least 2 labels in the batch, got {len(unique)}")
    if not bool((counts == counts[0]).all()):
        raise ValueError(
            f"labels: expected the same number of samples for each label, got the counts {counts.tolist()} "
            f"for the labels {unique.tolist()}"
        )
    if int(counts[0]) < 2:
        raise ValueError("labels: expected more than one sample for each label, got 1")
    return unique, inverse


class HardClusterMiner(ITripletsMiner):
    """This miner selects the hardest triplets based on the distance to mean vectors: anchor is a mean vector
    of features of i-th label in the batch, the hardest positive sample is the most distant from the anchor
    sample of anchor's label, the hardest negative sample is the closest mean vector of other labels.

    The batch must contain ``n_instances`` for ``n_labels`` where both values higher than 1. Distances are
    Euclidean, ranked on detached features; equal distances are broken by the smallest batch index (positives)
    and the smallest label (negatives). The returned tensors keep the features' gradients.
    """

    @staticmethod
    def _get_labels_mask(labels: Tensor | list[int]) -> Tensor:
        """Boolean ``[n_labels, batch_size]``: ``mask[i, j]`` tells whether item ``j`` has the ``i``-th
        smallest label (OML's name)."""
        labels_t = torch.as_tensor(labels)
        return torch.unique(labels_t)[:, None] == labels_t[None, :]

    @staticmethod
    def _count_intra_label_distances(embeddings: Tensor, mean_vectors: Tensor) -> Tensor:
        """Squared Euclidean distances ``[n_labels, n_instances]`` from every label's mean vector
        ``mean_vectors`` ``[n_labels, embed_dim]`` to the label's items ``embeddings``
        ``[n_labels, n_instances, embed_dim]`` (OML's name; squared, as OML's: the same ranking)."""
        return (embeddings - mean_vectors[:, None, :]).square().sum(dim=2)

    @staticmethod
    def _count_inter_label_distances(mean_vectors: Tensor) -> Tensor:
        """Euclidean distances ``[n_labels, n_labels]`` between the labels' mean vectors (OML's name)."""
        return l2_dist(mean_vectors, mean_vectors)

    def sample(self, features: Tensor, labels: Tensor | list[int]) -> tuple[Tensor, Tensor, Tensor]:
        """This method samples the hardest triplets in the batch.

        Args:
            features: Tensor with the shape of ``[batch_size, embed_dim]`` that contains ``n_instances`` for
                each of ``n_labels``.
            labels: Labels with the size of ``batch_size``.

        Returns:
            ``n_labels`` triplets in the form of ``(mean_vector, positive, negative_mean_vector)``, each
            ``[n_labels, embed_dim]``, row ``i`` for the ``i``-th smallest label.

        Raises:
            ValueError: the batch is not ``n_labels x n_instances`` with both above 1 (or mis-shaped).
        """
        labels_t = check_batch(features, labels)
        unique, _ = check_balanced(labels_t)
        n_labels = len(unique)
        # the batch indices of every label's items, in increasing order: [n_labels, n_instances]
        members = self._get_labels_mask(labels_t).nonzero()[:, 1].view(n_labels, -1)
        grouped = features[members]  # [n_labels, n_instances, embed_dim]
        means = grouped.mean(dim=1)

        to_own_mean = self._count_intra_label_distances(grouped.detach(), means.detach())
        ids_pos = members.gather(1, to_own_mean.argmax(dim=1, keepdim=True)).squeeze(1)

        between_means = self._count_inter_label_distances(means.detach()).fill_diagonal_(torch.inf)
        ids_neg = between_means.argmin(dim=1)
        return means, features[ids_pos], means[ids_neg]


__all__ = ["HardClusterMiner"]
