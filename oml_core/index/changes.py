"""The changes of a gallery index that :meth:`GalleryIndex.commit <oml_core.index.gallery.GalleryIndex.commit>`
writes as a new generation: records of what was asked, kept until the commit so that they can be made again on
top of a generation that another process committed meanwhile (:meth:`GalleryIndex.refresh
<oml_core.index.gallery.GalleryIndex.refresh>`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    """

    embeddings: Tensor
    ids: list[int]
    paths: list[str | None]
    labels: list[int | None]


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


__all__ = ["Change", "Recalibration", "Removal", "Upsert", "Upserted"]
