"""Serving a gallery: :class:`GalleryIndex` (build from the items of a dataset component: a dataframe or a folder
of images, a plugin's modality; or from embeddings; search by its component's queries (:mod:`.queries`), image
paths or embeddings; save to a self-contained folder and load, checked against the model that built it:
:mod:`.integrity`; change by id and commit as a new generation: :mod:`.generations`) and the calibration of a
match threshold (:mod:`.calibration`)."""

from oml_core.index.calibration import (
    TARGETS,
    Calibration,
    CalibrationCurve,
    CalibrationError,
    calibrate_rr,
    calibrate_threshold,
)
from oml_core.index.changes import Upserted
from oml_core.index.errors import GalleryIndexError, IndexLockedError, UnknownItemError
from oml_core.index.gallery import GalleryIndex, GalleryItem, SearchHit

__all__ = [
    "TARGETS",
    "Calibration",
    "CalibrationCurve",
    "CalibrationError",
    "GalleryIndex",
    "GalleryIndexError",
    "GalleryItem",
    "IndexLockedError",
    "SearchHit",
    "UnknownItemError",
    "Upserted",
    "calibrate_rr",
    "calibrate_threshold",
]
