"""``PairDataset``: pairs of items of one dataset, given by their indices (what a re-ranker scores)."""

from __future__ import annotations

from typing import Any

import torch
from torch import LongTensor

from oml_core.interfaces.datasets import IBaseDataset, IPairDataset


class PairDataset(IPairDataset):
    """Pairs of items of ``base_dataset``: pair ``k`` is the items ``pair_ids[k, 0]`` and ``pair_ids[k, 1]``.

    The inputs of an item are ``base_dataset[i][base_dataset.input_tensors_key]`` (the image tensors of an image
    dataset, the embedding of an embeddings dataset), so a pairwise model scores what the dataset feeds an
    extractor. Nothing is read at construction. The first item of the last pair asked for is kept, so that a
    query paired with its retrieved items in consecutive pairs is read once, not once per pair.

    Args:
        base_dataset: Dataset of the items (``__getitem__`` returns a dict with ``input_tensors_key``).
        pair_ids: ``[n_pairs, 2]`` dataset indices of the two items of every pair.
        input_tensors_key_1: Key of the 1st items in the batches (OML's name; the attribute ``pairs_1st_key``).
        input_tensors_key_2: Key of the 2nd items in the batches (``pairs_2nd_key``).
        index_key: Key of the pairs' indices in the batches.

    Raises:
        ValueError: ``pair_ids`` is not ``[n_pairs, 2]`` integers within ``[0, len(base_dataset) - 1]``.
    """

    def __init__(
        self,
        base_dataset: IBaseDataset,
        pair_ids: LongTensor,
        input_tensors_key_1: str = "input_tensors_1",
        input_tensors_key_2: str = "input_tensors_2",
        index_key: str = "idx",
    ) -> None:
        pair_ids = torch.as_tensor(pair_ids)
        if pair_ids.ndim != 2 or pair_ids.shape[1] != 2 or pair_ids.dtype.is_floating_point:
            raise ValueError(
                f"pair_ids must be [n_pairs, 2] integers, got {pair_ids.dtype} {tuple(pair_ids.shape)}"
            )
        if pair_ids.numel() and (int(pair_ids.min()) < 0 or int(pair_ids.max()) >= len(base_dataset)):
            raise ValueError(
                f"pair_ids must be indices of base_dataset within [0, {len(base_dataset) - 1}], got values in "
                f"[{int(pair_ids.min())}, {int(pair_ids.max())}]"
            )
        self.base_dataset = base_dataset
        self.pair_ids = pair_ids.long().cpu()
        self.pairs_1st_key = input_tensors_key_1
        self.pairs_2nd_key = input_tensors_key_2
        self.index_key = index_key
        self._input_key = getattr(base_dataset, "input_tensors_key", IBaseDataset.input_tensors_key)
        self._kept: tuple[int, Any] | None = None

    def __len__(self) -> int:
        return len(self.pair_ids)

    def __getitem__(self, idx: int) -> dict[str, Any]:
        """``{pairs_1st_key: inputs of item pair_ids[idx, 0], pairs_2nd_key: inputs of item pair_ids[idx, 1],
        index_key: idx}``."""
        first, second = self.pair_ids[idx].tolist()
        if self._kept is None or self._kept[0] != first:
            self._kept = (first, self._inputs(first))
        return {
            self.pairs_1st_key: self._kept[1],
            self.pairs_2nd_key: self._inputs(second),
            self.index_key: idx,
        }

    def _inputs(self, item: int) -> Any:
        return self.base_dataset[item][self._input_key]


__all__ = ["PairDataset"]
