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
        unique, inverse = check_balanced(check_batch(features, labels))
        n_labels = len(unique)
        sums = features.new_zeros(n_labels, features.shape[1]).index_add(0, inverse, features)
        means = sums / (len(features) // n_labels)

        to_own_mean = torch.linalg.vector_norm(features.detach() - means.detach()[inverse], dim=1)
        # [n_labels, B]: the distance of every item to its own label's mean, -inf for the other labels
        own = inverse[None, :] == torch.arange(n_labels, device=features.device)[:, None]
        ids_pos = to_own_mean.expand(n_labels, -1).masked_fill(~own, -torch.inf).argmax(dim=1)

        between_means = l2_dist(means, means).fill_diagonal_(torch.inf)
        ids_neg = between_means.argmin(dim=1)
        return means, features[ids_pos], means[ids_neg]


__all__ = ["HardClusterMiner"]
