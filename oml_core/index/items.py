"""The small datasets a gallery index embeds beside its dataset component's own: some items of a dataset (the
part of a validation split that is not in the gallery), and the probe's input tensor; and the probe itself."""

from __future__ import annotations

from collections.abc import Sequence, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from torch import Tensor
from torch.utils.data import Dataset

from oml_core.datasets.items import ItemInput, is_item_input
from oml_core.interfaces.datasets import IBaseDataset


def size_of(dataset: Dataset) -> int:
    """``len(dataset)``: every oml dataset has ``__len__``, which torch's ``Dataset`` does not declare."""
    return len(cast(Sized, dataset))


class SomeItems(IBaseDataset):
    """The items ``positions`` of ``dataset``, in that order.

    Args:
        dataset: An oml dataset.
        positions: Indices of its items.
    """

    def __init__(self, dataset: IBaseDataset, positions: Sequence[int]) -> None:
        self.dataset, self.positions = dataset, list(positions)
        self.input_tensors_key = dataset.input_tensors_key
        self.index_key = dataset.index_key

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, item: int) -> dict[str, Any]:
        return self.dataset[self.positions[item]]


class OneInput(IBaseDataset):
    """One item whose extractor input is ``inputs``.

    Args:
        inputs: The input of one item, as a dataset's item holds it (not batched).
    """

    def __init__(self, inputs: ItemInput) -> None:
        self.inputs = inputs

    def __len__(self) -> int:
        return 1

    def __getitem__(self, item: int) -> dict[str, Any]:
        if item != 0:
            raise IndexError(f"{type(self).__name__} has one item, not {item + 1}")
        return {self.input_tensors_key: self.inputs, self.index_key: 0}


@dataclass(frozen=True)
class Probe:
    """An item whose embedding at build time a gallery index keeps, to check its model
    (:mod:`oml_core.index.integrity`).

    Attributes:
        embedding: ``[dim]``: its embedding at build time.
        item: A file of the index's folder that the dataset component reads as a query (its probe query), or the
            extractor input of an item (a gallery item's).
        name: What names it in messages.
    """

    embedding: Tensor
    item: Path | ItemInput
    name: str


__all__ = ["ItemInput", "OneInput", "Probe", "SomeItems", "is_item_input", "size_of"]
