"""The queries of ``oml search``: image files, folders of images and CSVs of queries, resolved to the images
to embed, each named by its path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from oml_core.const import PATHS_COLUMN, TBBox
from oml_core.datasets.dataframe_format import (
    DataFrameFormatError,
    empty_mask,
    format_rows,
    missing_columns_problem,
    parse_bboxes,
)
from oml_core.index.errors import GalleryIndexError
from oml_core.utils.images import IMAGE_SUFFIXES, find_images

#: The suffix (any case) of a file of queries.
QUERIES_CSV_SUFFIX = ".csv"


@dataclass(frozen=True)
class Queries:
    """Images to search by, in the order they were given.

    Attributes:
        paths: The image files; a query is named by its path.
        bboxes: The box of each (None: the whole image), or None when no query has one.
    """

    paths: list[str]
    bboxes: list[TBBox | None] | None


def collect_queries(sources: Sequence[str | Path], dataset_root: str | Path | None = None) -> Queries:
    """The images of ``sources``, in order: a folder stands for its images (:data:`IMAGE_SUFFIXES`, any case,
    searched recursively, sorted by path); a ``.csv`` file for the rows of a CSV of queries in OML's format (a
    ``path`` column, joined to ``dataset_root`` or, when None, to the CSV's folder; the boxes ``x_1, x_2, y_1,
    y_2`` when it has them; other columns are not read); anything else is an image file, as given.

    Raises:
        GalleryIndexError: a folder without images; a CSV that cannot be read, lacks the ``path`` column, has
            no rows, an empty path or a path that is no file (naming the CSV and its rows, 0-based), or bad
            boxes; ``dataset_root`` without a CSV among ``sources``, or not a folder.
    """
    root = None if dataset_root is None else Path(dataset_root)
    csvs = [Path(s) for s in sources if _is_csv(Path(s))]
    if root is not None and not csvs:
        raise GalleryIndexError("--dataset-root is the folder of a CSV's paths, and no query is a CSV")
    if root is not None and not root.is_dir():
        raise GalleryIndexError(f"dataset root '{root}' is not a folder")
    paths: list[str] = []
    bboxes: list[TBBox | None] = []
    has_boxes = False
    for source in map(Path, sources):
        if source.is_dir():
            images = [str(p) for p in find_images(source)]
            if not images:
                raise GalleryIndexError(f"{source}: holds no image files ({', '.join(IMAGE_SUFFIXES)})")
            paths += images
            bboxes += [None] * len(images)
        elif _is_csv(source):
            rows, boxes = _read_csv(source, source.parent if root is None else root)
            paths += rows
            bboxes += [None] * len(rows) if boxes is None else boxes
            has_boxes = has_boxes or boxes is not None
        else:
            paths.append(str(source))
            bboxes.append(None)
    return Queries(paths, bboxes if has_boxes else None)


def _is_csv(path: Path) -> bool:
    return path.suffix.lower() == QUERIES_CSV_SUFFIX and not path.is_dir()


def _read_csv(path: Path, root: Path) -> tuple[list[str], list[TBBox | None] | None]:
    """The image paths (``root / path``) and boxes of a CSV of queries."""
    if not path.is_file():
        raise GalleryIndexError(f"the CSV of queries '{path}' does not exist")
    try:
        df = pd.read_csv(path, index_col=False)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise GalleryIndexError(f"'{path}': cannot be read as a csv of queries: {e}") from e
    missing = missing_columns_problem(df, [PATHS_COLUMN])
    if missing is not None:
        raise GalleryIndexError(f"'{path}': {missing}")
    if len(df) == 0:
        raise GalleryIndexError(f"'{path}': the CSV of queries has no rows")
    column = df[PATHS_COLUMN]
    empty = empty_mask(column)
    if empty.any():
        raise GalleryIndexError(
            f"'{path}': column {PATHS_COLUMN!r}: an empty path at {format_rows(np.flatnonzero(empty))}"
        )
    images = [str(root / str(p)) for p in column]
    absent = np.array([not Path(p).is_file() for p in images])
    if absent.any():
        raise GalleryIndexError(
            f"'{path}': column {PATHS_COLUMN!r}: no such image file under '{root}' at "
            f"{format_rows(np.flatnonzero(absent), column)}"
        )
    try:
        boxes = parse_bboxes(df, owner=f"'{path}'")
    except DataFrameFormatError as e:
        raise GalleryIndexError(str(e)) from e
    return images, boxes


__all__ = ["QUERIES_CSV_SUFFIX", "Queries", "collect_queries"]
