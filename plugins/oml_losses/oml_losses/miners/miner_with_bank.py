"""Cross-batch memory: anchors from the batch, positives and negatives from the batch and a memory bank."""

from __future__ import annotations

import torch
from torch import Tensor

from oml_core.interfaces.miners import ITripletsMiner
from oml_losses.miners.checks import check_batch
from oml_losses.miners.distances import l2_dist
from oml_losses.miners.inbatch_nhard_tri import NHardTripletsMiner
from oml_losses.miners.memory_bank import FeatureBank


def bank_logs(ids_a: Tensor, ids_p: Tensor, ids_n: Tensor, from_bank: Tensor) -> dict[str, float]:
    """Where the positives and negatives of the anchors come from, averaged over the anchors.

    ``from_bank`` ``[n_items]`` tells which items are the bank's (the others are the batch's). For every anchor
    with at least one triplet, the numbers of its distinct positives (negatives) in the batch and in the bank
    are counted; the logs are their means over those anchors: ``positives_from_batch``, ``positives_from_bank``,
    ``negatives_from_batch``, ``negatives_from_bank`` (an empty dict when there is no triplet).
    """
    if len(ids_a) == 0:
        return {}
    from_bank = torch.as_tensor(from_bank, device=ids_a.device).bool()
    anchors, rows = torch.unique(ids_a, return_inverse=True)
    logs = {}
    for kind, ids in (("positives", ids_p), ("negatives", ids_n)):
        chosen = torch.zeros(len(anchors), len(from_bank), dtype=torch.bool, device=ids_a.device)
        chosen[rows, ids] = True
        in_bank = (chosen & from_bank).sum(dim=1).double()
        in_batch = (chosen & ~from_bank).sum(dim=1).double()
        logs[f"{kind}_from_bank"], logs[f"{kind}_from_batch"] = in_bank.mean().item(), in_batch.mean().item()
    return logs


class MinerWithBank(ITripletsMiner):
    """This is a class for cross-batch memory. This implementation uses only samples from the current batch as
    anchors and finds positive and negative pairs from the bank and the current batch using miner.

    The bank holds the detached features and the labels of the last ``bank_size_in_batches`` batches. Until it
    is full the miner mines in the batch alone; from then on the candidates are the batch and the whole bank,
    the anchors still only the batch items. The batch is pushed into the bank after the mining. Every batch
    must have the shape of the first one.

    Args:
        bank_size_in_batches: Size of the bank (in batches).
        miner: Miner, for now we only support ``NHardTripletsMiner``.
        need_logs: Set ``True`` if you want to track logs (see :attr:`last_logs`).
    """

    def __init__(self, bank_size_in_batches: int, miner: NHardTripletsMiner, need_logs: bool = True) -> None:
        if not isinstance(miner, NHardTripletsMiner):
            raise TypeError(f"miner must be a NHardTripletsMiner, got {type(miner).__qualname__}")
        self.bank = FeatureBank(bank_size_in_batches, placeholders=False)
        self.bank_size_in_batches = self.bank.size_in_batches
        self.miner = miner
        self.need_logs = need_logs
        self._last_logs: dict[str, float] = {}

    @property
    def last_logs(self) -> dict[str, float]:
        """The logs of the last :meth:`sample` (empty if ``need_logs`` is off or nothing was mined).

        The mean over the anchors with triplets of the numbers of their distinct positives and negatives
        taken from the bank and from the batch: ``positives_from_bank``, ``positives_from_batch``,
        ``negatives_from_bank``, ``negatives_from_batch``.
        """
        return dict(self._last_logs)

    def sample(self, features: Tensor, labels: Tensor | list[int]) -> tuple[Tensor, Tensor, Tensor]:
        """Mine triplets whose anchors are batch items.

        Args:
            features: Features with the shape ``[batch_size, features_dim]``; every call the same shape.
            labels: Labels with the size of ``batch_size``.

        Returns:
            Batch of triplets in the following order: anchor, positive, negative; each ``[n_triplets,
            features_dim]``, sorted by (anchor, positive, negative) index with the bank after the batch. The
            batch rows keep their gradients, the bank rows have none.
        """
        labels_t = check_batch(features, labels)
        self.bank.prepare(features)
        pool, pool_labels = features, labels_t
        if self.bank.is_full:
            assert self.bank.features is not None and self.bank.labels is not None
            pool = torch.cat([features, self.bank.features])
            pool_labels = torch.cat([labels_t, self.bank.labels])

        ids_a, ids_p, ids_n = self.miner.sample_from_distmat(l2_dist(features, pool), pool_labels)
        if self.need_logs:
            from_bank = torch.arange(len(pool), device=pool.device) >= len(features)
            self._last_logs = bank_logs(ids_a, ids_p, ids_n, from_bank)
        self.bank.push(features, labels_t)
        return pool[ids_a], pool[ids_p], pool[ids_n]

    @staticmethod
    def _prepare_logs(
        ids_a: Tensor | list[int],
        ids_p: Tensor | list[int],
        ids_n: Tensor | list[int],
        ignore_anchor_mask: Tensor,
    ) -> dict[str, float]:
        """OML's name of :func:`bank_logs`, whose ``ignore_anchor_mask`` marks the bank's items (non-zero)."""
        ids = (torch.as_tensor(i, dtype=torch.long) for i in (ids_a, ids_p, ids_n))
        return bank_logs(*ids, from_bank=torch.as_tensor(ignore_anchor_mask) != 0)


__all__ = ["MinerWithBank", "bank_logs"]
