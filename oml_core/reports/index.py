"""What ``oml index build|add|remove|calibrate`` say: the summary of a built index, and the one line of each change
of an index (written durably before it is said)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from oml_core.reports.answer import Answer

if TYPE_CHECKING:  # the results' classes, for annotations: the answers import no torch
    from oml_core.index.build import IndexBuildResult


@dataclass(frozen=True)
class IndexBuilt(Answer):
    """A gallery index built by ``oml index build`` (see :func:`index_built`): its number of ``items``, their
    ``source``, its knn ``backend`` and ``distance``, its ``calibration`` (the one-line summary; None: not
    calibrated, ``not_calibrated`` says why), its folder ``index_dir`` and the ``embeddings_out`` file written
    beside (None: none)."""

    items: int
    source: str
    backend: str
    distance: str
    calibration: str | None
    not_calibrated: str | None
    index_dir: str
    embeddings_out: str | None

    def as_text(self) -> str:
        """A line each: the index, its calibration, its folder, its embeddings file (when written) and the command
        that searches it."""
        lines = [
            f"Gallery index:    {self.items} items of {self.source} (knn backend {self.backend!r}, {self.distance})"
        ]
        if self.calibration is not None:
            lines.append(f"Calibration:      {self.calibration}")
        else:
            lines.append(
                f"Calibration:      none ({self.not_calibrated}): oml search answers with distances only"
            )
        lines.append(f"Index folder:     {self.index_dir}")
        if self.embeddings_out is not None:
            lines.append(f"Embeddings file:  {self.embeddings_out}")
        lines.append(f"Search it:        oml search {shlex.quote(self.index_dir)} QUERY...")
        return "\n".join(lines)


def index_built(result: IndexBuildResult) -> IndexBuilt:
    """The answer of ``oml index build`` from the result of :func:`~oml_core.index.build.build_gallery_index`."""
    index = result.index
    return IndexBuilt(
        items=len(index),
        source=str(result.source),
        backend=index.config["knn_backend"]["name"],
        distance=index.distance,
        calibration=None if index.calibration is None else index.calibration.summary(),
        not_calibrated=result.not_calibrated,
        index_dir=str(result.index_dir),
        embeddings_out=None if result.embeddings_out is None else str(result.embeddings_out),
    )


@dataclass(frozen=True)
class ItemsAdded(Answer):
    """Items put into an index (``oml index add``): ``added`` of new ids, ``updated`` replaced by id, in the
    committed ``generation``."""

    added: int
    updated: int
    generation: int

    def as_text(self) -> str:
        """``added N, updated M, generation G``."""
        return f"added {self.added}, updated {self.updated}, generation {self.generation}"


@dataclass(frozen=True)
class ItemsRemoved(Answer):
    """Items removed from an index by id (``oml index remove``): how many, in the committed ``generation``."""

    removed: int
    generation: int

    def as_text(self) -> str:
        """``removed N, generation G``."""
        return f"removed {self.removed}, generation {self.generation}"


@dataclass(frozen=True)
class Recalibrated(Answer):
    """An index's match threshold calibrated again (``oml index calibrate``): the calibration's one-line summary
    (:meth:`Calibration.summary <oml_core.index.calibration.Calibration.summary>`), in the committed
    ``generation``."""

    calibration: str
    generation: int

    def as_text(self) -> str:
        """``calibrated: <the calibration>; generation G``."""
        return f"calibrated: {self.calibration}; generation {self.generation}"


__all__ = ["IndexBuilt", "ItemsAdded", "ItemsRemoved", "Recalibrated", "index_built"]
