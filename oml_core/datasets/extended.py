"""``ExtendedLabeledDataset``: the items of any labelled dataset with more values per item (the embeddings that
a post-processor's training reads beside each item's inputs), whatever the dataset's modality."""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Sized
from typing import Any, cast

import numpy as np
from torch import Tensor

from oml_core.interfaces.datasets import ILabeledDataset


class ExtendedLabeledDataset(ILabeledDataset):
    """Item ``i`` is item ``i`` of ``dataset`` and, for every ``key`` of ``extra``, ``extra[key][i]`` under
    ``key``; the labels, categories and item keys are ``dataset``'s.

    Args:
        dataset: A labelled dataset of any modality.
        extra: Values by key, one per item of ``dataset`` (a sequence or a tensor whose first dimension is the
            item).

    Raises:
        ValueError: a value sequence whose length is not the dataset's.
        KeyError: (when an item is read) a key of ``extra`` that the dataset's item has already.
    """

    def __init__(self, dataset: ILabeledDataset, extra: Mapping[str, Sequence[Any] | Tensor]) -> None:
        size = len(cast(Sized, dataset))  # oml's datasets have a length (torch's Dataset declares none)
        for key, values in extra.items():
            if len(values) != size:
                raise ValueError(
                    f"ExtendedLabeledDataset: {len(values)} values of {key!r} for the {size} items of the "
                    f"{type(dataset).__name__}"
                )
        self.dataset = dataset
        self.extra = dict(extra)
        self.index_key = dataset.index_key
        self.input_tensors_key = dataset.input_tensors_key
        self.labels_key = dataset.labels_key

    def __len__(self) -> int:
        return len(cast(Sized, self.dataset))

    def __getitem__(self, item: int) -> dict[str, Any]:
        values = dict(self.dataset[item])
        for key, extra in self.extra.items():
            if key in values:
                raise KeyError(
                    f"ExtendedLabeledDataset: the items of the {type(self.dataset).__name__} have {key!r}"
                )
            values[key] = extra[item]
        return values

    def get_labels(self) -> np.ndarray:
        return self.dataset.get_labels()

    def get_label2category(self) -> dict[int, Any] | None:
        return self.dataset.get_label2category()


__all__ = ["ExtendedLabeledDataset"]
