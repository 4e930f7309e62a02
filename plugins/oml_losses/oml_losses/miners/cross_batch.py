"""The miner of a batch's triplets and of more triplets that combine the batch with a memory bank."""

from __future__ import annotations

import torch
from torch import Tensor

from oml_core.interfaces.miners import ITripletsMiner
from oml_losses.miners.checks import check_batch, check_positive_int
from oml_losses.miners.inbatch_all_tri import make_generator
from oml_losses.miners.memory_bank import FeatureBank
from oml_losses.miners.positive_pairs import sample_positive_pairs
from oml_losses.miners.triplet_masks import get_available_triplets_ids


class TripletMinerWithMemory(ITripletsMiner):
    """This miner has a memory bank that allows to sample not only the triplets from the original batch, but
    also add batches obtained from both the bank and the original batch.

    ``sample(features, labels)`` returns, in this order:

    1. the ``n_original`` triplets of the batch (those of ``AllTripletsMiner``, sorted by ``(a, p, n)``);
    2. ``n_extra = (tri_expand_k - 1) * n_original // 2`` triplets whose anchor and positive come from the
       bank (a random positive pair, see :func:`~oml_losses.miners.positive_pairs.sample_positive_pairs`) and
       whose negative is a uniformly random batch item;
    3. ``n_extra`` triplets whose anchor and positive are a random positive pair of the batch and whose
       negative is a uniformly random bank item;

    where the triplets of parts 2 and 3 whose "negative" has the anchor's label are dropped. Then the batch
    (detached) replaces the oldest batch of the bank.

    The bank holds ``bank_size_in_batches`` batches; it starts full of placeholders whose labels are negative
    (see :class:`~oml_losses.miners.memory_bank.FeatureBank`), so the labels must be non-negative. As long as
    the bank's labels differ from the batch's (the first epoch of a sampler that uses each label once per
    epoch) nothing is dropped and ``tri_expand_k * n_original`` triplets come out (when ``(tri_expand_k - 1)
    * n_original`` is even, as for every ``n_labels x n_instances`` batch). The random draws use
    ``generator`` (never the global RNG).

    Args:
        bank_size_in_batches: The size of the bank calculated in the number batches.
        tri_expand_k: This parameter defines how many triplets we sample from the bank. Specifically, we return
            ``tri_expand_k * number of original triplets``. In particular, if ``tri_expand_k == 1`` we sample
            no triplets from the bank.
        generator: The random generator of the draws.
        seed: Seed of a new CPU generator when ``generator`` is not given (``0`` by default).
    """

    def __init__(
        self,
        bank_size_in_batches: int,
        tri_expand_k: int,
        generator: torch.Generator | None = None,
        seed: int | None = None,
    ) -> None:
        self.tri_expand_k = check_positive_int(tri_expand_k, "tri_expand_k")
        self.bank = FeatureBank(bank_size_in_batches, placeholders=True)
        self.bank_size_in_batches = self.bank.size_in_batches
        self.generator = make_generator(generator, seed)

    def _draw_ids(self, high: int, n: int, device: torch.device) -> Tensor:
        """``n`` uniform indices in ``[0, high)``, drawn with the miner's generator, moved to ``device``."""
        return torch.randint(high, (n,), generator=self.generator, device=self.generator.device).to(device)

    def sample(  # type: ignore[override]
        self, features: Tensor, labels: Tensor | list[int]
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Mine the triplets of the batch and those combined from the bank and the batch.

        Args:
            features: Features with the shape of ``(batch_size, feat_dim)``; every call the same shape.
            labels: Non-negative labels with the size of ``batch_size``.

        Returns:
            ``(anchor, positive, negative, is_original_tri)``: three ``[n_triplets, feat_dim]`` tensors (the
            batch rows keep their gradients, the bank rows have none) and a bool ``[n_triplets]`` tensor on the
            features' device, ``True`` for the triplets of the batch alone (the first ones).

        Raises:
            ValueError: bad shapes, a negative label, or a bank without any positive pair.
        """
        labels_t = check_batch(features, labels)
        if bool((labels_t < 0).any()):
            raise ValueError(
                "labels must be non-negative: the memory bank's placeholders have negative labels"
            )
        self.bank.prepare(features)
        assert self.bank.features is not None and self.bank.labels is not None
        batch_size, bank_size = len(labels_t), len(self.bank.labels)

        # indices into the pool: the batch, then the bank
        ids_a, ids_p, ids_n = get_available_triplets_ids(labels_t)
        n_original = len(ids_a)
        n_extra = (self.tri_expand_k - 1) * n_original // 2
        bank_a, bank_p = sample_positive_pairs(self.bank.labels, n_extra, self.generator)
        batch_a, batch_p = sample_positive_pairs(labels_t, n_extra, self.generator)
        batch_n, bank_n = (self._draw_ids(size, n_extra, features.device) for size in (batch_size, bank_size))
        ids_a = torch.cat([ids_a, bank_a + batch_size, batch_a])
        ids_p = torch.cat([ids_p, bank_p + batch_size, batch_p])
        ids_n = torch.cat([ids_n, batch_n, bank_n + batch_size])

        pool_labels = torch.cat([labels_t, self.bank.labels])
        keep = pool_labels[ids_a] != pool_labels[ids_n]
        is_original_tri = (torch.arange(len(ids_a), device=features.device) < n_original)[keep]
        pool = torch.cat([features, self.bank.features])
        anchor, positive, negative = pool[ids_a[keep]], pool[ids_p[keep]], pool[ids_n[keep]]

        self.bank.push(features, labels_t)
        return anchor, positive, negative, is_original_tri


__all__ = ["TripletMinerWithMemory"]
