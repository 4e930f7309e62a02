"""The image queries of ``oml search`` (image files, folders of images and CSVs of queries, resolved to the
images to embed, each named by its path), and the probe picture that a gallery index of images keeps."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from oml_core.const import PATHS_COLUMN, TBBox
from oml_core.datasets.dataframe_format import (
    DataFrameFormatError,
    empty_mask,
    format_rows,
    missing_columns_problem,
    parse_bboxes,
)
from oml_core.registry import ConfigError
from oml_core.utils.atomic import atomic_write_bytes
from oml_core.utils.images import IMAGE_SUFFIXES, find_images

#: The suffix (any case) of a file of queries.
QUERIES_CSV_SUFFIX = ".csv"
#: The file name and size (width, height) of the probe picture.
PROBE_FILE = "probe.png"
PROBE_SIZE = (40, 32)


@dataclass(frozen=True)
class ImageQueries:
    """Images to search by, in the order they were given.

    Attributes:
        paths: The image files; a query is named by its path.
        bboxes: The box of each (None: the whole image), or None when no query has one.
    """

    paths: list[str]
    bboxes: list[TBBox | None] | None


def collect_image_queries(sources: Sequence[str | Path], root: str | Path | None = None) -> ImageQueries:
    """The images of ``sources``, in order: a folder stands for its images (:data:`IMAGE_SUFFIXES`, any case,
    searched recursively, sorted by path); a ``.csv`` file for the rows of a CSV of queries in OML's format (a
    ``path`` column, joined to ``root`` or, when None, to the CSV's folder; the boxes ``x_1, x_2, y_1, y_2`` when
    it has them; other columns are not read); anything else is an image file, as given.

    Raises:
        ConfigError: a folder without images; a CSV that cannot be read, lacks the ``path`` column, has no rows,
            an empty path or a path that is no file (naming the CSV and its rows, 0-based), or bad boxes; ``root``
            without a CSV among ``sources``, or not a folder.
    """
    root = None if root is None else Path(root)
    csvs = [Path(s) for s in sources if _is_csv(Path(s))]
    if root is not None and not csvs:
        raise ConfigError("--dataset-root is the folder of a CSV's paths, and no query is a CSV")
    if root is not None and not root.is_dir():
        raise ConfigError(f"dataset root '{root}' is not a folder")
    paths: list[str] = []
    bboxes: list[TBBox | None] = []
    has_boxes = False
    for source in map(Path, sources):
        if source.is_dir():
            images = [str(p) for p in find_images(source)]
            if not images:
                raise ConfigError(f"{source}: holds no image files ({', '.join(IMAGE_SUFFIXES)})")
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
    return ImageQueries(paths, bboxes if has_boxes else None)


def check_image_files(paths: Sequence[str]) -> None:
    """Raise a ``ConfigError`` naming the first of ``paths`` that is a folder or does not exist."""
    missing = next((p for p in paths if not Path(p).is_file()), None)
    if missing is not None:
        if Path(missing).is_dir():
            raise ConfigError(f"'{missing}' is a directory, not an image file")
        raise ConfigError(f"image file not found: '{missing}'")


def write_probe_image(path: Path) -> None:
    """The probe picture, a fixed pattern of :data:`PROBE_SIZE` (colour ramps across and down, stripes), as PNG,
    written atomically.

    Its pixel ``(x, y)`` is ``(255 x // (W - 1), 255 y // (H - 1), 4 ((7 x + 13 y) mod 64))``.
    """
    width, height = PROBE_SIZE
    y, x = np.mgrid[0:height, 0:width]
    pixels = np.stack([255 * x // (width - 1), 255 * y // (height - 1), 4 * ((7 * x + 13 * y) % 64)], axis=-1)
    buffer = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8)).save(buffer, format="PNG")
    atomic_write_bytes(path, buffer.getbuffer())


def _is_csv(path: Path) -> bool:
    return path.suffix.lower() == QUERIES_CSV_SUFFIX and not path.is_dir()


def _read_csv(path: Path, root: Path) -> tuple[list[str], list[TBBox | None] | None]:
    """The image paths (``root / path``) and boxes of a CSV of queries."""
    if not path.is_file():
        raise ConfigError(f"the CSV of queries '{path}' does not exist")
    try:
        df = pd.read_csv(path, index_col=False)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise ConfigError(f"'{path}': cannot be read as a csv of queries: {e}") from e
    missing = missing_columns_problem(df, [PATHS_COLUMN])
    if missing is not None:
        raise ConfigError(f"'{path}': {missing}")
    if len(df) == 0:
        raise ConfigError(f"'{path}': the CSV of queries has no rows")
    column = df[PATHS_COLUMN]
    empty = empty_mask(column)
    if empty.any():
        raise ConfigError(
            f"'{path}': column {PATHS_COLUMN!r}: an empty path at {format_rows(np.flatnonzero(empty))}"
        )
    images = [str(root / str(p)) for p in column]
    absent = np.array([not Path(p).is_file() for p in images])
    if absent.any():
        raise ConfigError(
            f"'{path}': column {PATHS_COLUMN!r}: no such image file under '{root}' at "
            f"{format_rows(np.flatnonzero(absent), column)}"
        )
    try:
        boxes = parse_bboxes(df, owner=f"'{path}'")
    except DataFrameFormatError as e:
        raise ConfigError(str(e)) from e
    return images, boxes


__all__ = [
    "PROBE_FILE",
    "PROBE_SIZE",
    "QUERIES_CSV_SUFFIX",
    "ImageQueries",
    "check_image_files",
    "collect_image_queries",
    "write_probe_image",
]
