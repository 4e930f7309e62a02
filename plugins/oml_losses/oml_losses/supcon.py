"""The supervised contrastive loss of Khosla et al.: :class:`SupConLoss`."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from oml_losses.batch_pairs import check_positive, cosine_similarities, masked_mean, pair_masks
from oml_losses.miners.checks import check_batch
from oml_losses.reduction import check_reduction, get_reduced


class SupConLoss(nn.Module):
    """Supervised contrastive loss from `Supervised Contrastive Learning <https://arxiv.org/abs/2004.11362>`_
    (Khosla et al., NeurIPS 2020), the ``L_out`` form; with one view per sample it is the supervised NT-Xent.

    With ``S[i, j]`` the cosine similarity of the L2-normalised features, ``t`` the temperature and ``P(i)``
    the other samples of ``i``'s label, every anchor ``i`` with ``P(i)`` non-empty has the loss::

        loss_i = -1 / |P(i)| * sum_{p in P(i)} log( exp(S[i, p] / t) / sum_{a != i} exp(S[i, a] / t) )
               = logsumexp_{a != i}(S[i, a] / t) - 1 / |P(i)| * sum_{p in P(i)} S[i, p] / t

    (the denominator runs over all the other samples, positives included). Anchors without positives are
    skipped. The losses of the anchors with positives, in batch order, are reduced with ``reduction``
    (:func:`~oml_losses.reduction.get_reduced`): ``mean`` is their mean and ``0`` (attached to the graph) when
    no anchor has a positive; ``none`` returns them, ``[number of anchors with positives]``. As PML's
    ``SupConLoss`` (``AvgNonZeroReducer``) for batches with both positive and negative pairs; PML returns ``0``
    for a batch without negative pairs, this loss the formula above. ``last_logs`` (every forward pass):
    ``pos_sim`` and ``neg_sim``, the mean similarities of the positive and of the negative pairs (``nan``
    without such pairs).

    Args:
        temperature: The temperature ``t`` (``> 0``).
        reduction: ``mean``, ``sum`` or ``none``.

    Raises:
        ValueError: ``temperature`` is not a positive number, or ``reduction`` is unknown.
    """

    criterion_name = "supcon"

    def __init__(self, temperature: float = 0.1, reduction: str = "mean") -> None:
        super().__init__()
        self.temperature = check_positive(temperature, "temperature")
        self.reduction = check_reduction(reduction)
        self.last_logs: dict[str, Any] = {}

    def forward(self, features: Tensor, labels: Tensor | list[int]) -> Tensor:
        """Return the loss.

        Args:
            features: Features ``[batch_size, feat]``.
            labels: Integer labels ``[batch_size]``.

        Returns:
            A scalar for ``mean``/``sum``, the losses of the anchors with positives for ``none``.

        Raises:
            ValueError: ``features`` is not ``[batch_size, feat]`` or ``labels`` is not ``[batch_size]``.
            TypeError: the labels are not integers.
        """
        labels = check_batch(features, labels)
        sim = cosine_similarities(features)
        pos_mask, neg_mask = pair_masks(labels)
        self_mask = torch.eye(len(sim), dtype=torch.bool, device=sim.device)
        logits = (sim / self.temperature).masked_fill(self_mask, -torch.inf)
        log_prob = logits - logits.logsumexp(dim=1, keepdim=True)
        n_pos = pos_mask.sum(dim=1)
        anchor_loss = -torch.where(pos_mask, log_prob, 0.0).sum(dim=1) / n_pos.clamp(min=1)
        self.last_logs = {"pos_sim": masked_mean(sim, pos_mask), "neg_sim": masked_mean(sim, neg_mask)}
        return get_reduced(anchor_loss[n_pos > 0], self.reduction)


__all__ = ["SupConLoss"]
