"""The changes of a gallery index that :meth:`GalleryIndex.commit <oml_core.index.gallery.GalleryIndex.commit>`
writes as a new generation: records of what was asked, kept until the commit so that they can be made again on
top of a generation that another process committed meanwhile (:meth:`GalleryIndex.refresh
<oml_core.index.gallery.GalleryIndex.refresh>`)."""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from oml_core.index.calibration import Calibration


@dataclass(frozen=True)
class Upsert:
    """Items put into the index: those of an id it has replace it (their vector and item), the others are added
    after its items.

    Attributes:
        embeddings: ``[n, dim]`` float32 embeddings, checked.
        ids: Their ids (distinct).
        paths: Their names (None: none).
        labels: Their labels (None: unknown).
        fresh: The ids were given by the index (:attr:`~oml_core.index.gallery.GalleryIndex.next_id`), not by the
            caller: the items are new, and made again on another process's generation that has one of their ids
            they are a conflict, never a replacement of its item.
    """

    embeddings: Tensor
    ids: list[int]
    paths: list[str | None]
    labels: list[int | None]
    fresh: bool = False


@dataclass(frozen=True)
class Removal:
    """Items removed by id.

    Attributes:
        ids: Their ids (distinct).
    """

    ids: list[int]


@dataclass(frozen=True)
class Recalibration:
    """A calibration made again on the validation split.

    Attributes:
        calibration: The new calibration.
        args: The arguments it was made with (``target``, ``value``, ``top_n``).
    """

    calibration: Calibration
    args: dict[str, Any]


#: A change of an index.
Change = Upsert | Removal | Recalibration


@dataclass(frozen=True)
class Upserted:
    """What :meth:`GalleryIndex.upsert <oml_core.index.gallery.GalleryIndex.upsert>` did.

    Attributes:
        added: Items of new ids.
        updated: Items whose id the index had, replaced.
    """

    added: int
    updated: int


@dataclass(frozen=True)
class NetChange:
    """What a sequence of upserts and removals does, as one removal then one upsert (:func:`net_change`).

    Attributes:
        dropped: The ids of items there before the changes that they removed or replaced, in the order met.
        upsert: The items put in that remain, in the order of their last upsert, each with its last vector,
            name and label (None: none remain).
    """

    dropped: list[int]
    upsert: Upsert | None


def net_change(changes: Sequence[Upsert | Removal], before: Container[int]) -> NetChange:
    """The net effect of ``changes``, made in order on items of the ids ``before``: the same items in the same
    order as the changes made one by one (the survivors of ``before`` in their order, then the items put in, each
    where its last upsert put it), for one removal and one add in a knn backend rather than one of each per change.

    Raises:
        ValueError: a removal of an id that no item has at that point of the changes (named).
    """
    dropped: dict[int, None] = {}
    kept: dict[int, tuple[Tensor, str | None, int | None]] = {}
    for change in changes:
        for row, item in enumerate(change.ids):
            if item in kept:
                del kept[item]
            elif item in before and item not in dropped:
                dropped[item] = None
            elif isinstance(change, Removal):
                raise ValueError(f"the id {item} is removed where no item has it")
            if isinstance(change, Upsert):
                kept[item] = (change.embeddings[row], change.paths[row], change.labels[row])
    if not kept:
        return NetChange(list(dropped), None)
    rows = list(kept.values())
    upsert = Upsert(
        torch.stack([row[0] for row in rows]), list(kept), [row[1] for row in rows], [row[2] for row in rows]
    )
    return NetChange(list(dropped), upsert)


__all__ = ["Change", "NetChange", "Recalibration", "Removal", "Upsert", "Upserted", "net_change"]
