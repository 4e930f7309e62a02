"""The mock "figures" dataset, generated in code (nothing is downloaded).

Small RGB images (64x64 JPEG, white background) of one filled figure each. A label is one (shape, colour)
combination, its category the shape's name; the images of one label differ in position, size, rotation,
colour jitter and per-pixel noise. 6 shapes x 4 colours = 24 labels: 16 for ``split == "train"`` (labels
0..15) and 8 for ``split == "validation"`` (labels 16..23), 8 images per label, so 192 rows (128 train, 64
validation). Every validation row is both a query and in the gallery ("1 vs rest"); train rows leave
``is_query`` and ``is_gallery`` empty. Every shape appears in both splits, as the categories of SOP do.

Files under the root, named as OML's mock dataset names them (``images/circle_1.jpg``, the image that OML's
zoo example opens)::

    images/<shape>_<n>.jpg  n = 1..32: the images of one shape, in row order (circle_1.jpg ... star_32.jpg)
    df.csv                 label, path, split, is_query, is_gallery
    df_with_category.csv   + category (the shape)
    df_with_bboxes.csv     + x_1, x_2, y_1, y_2 (the tight box of the figure; right and bottom exclusive)
    df_with_sequence.csv   + sequence (consecutive images of a label in groups of 3, 3, 2; string ids)
    manifest.json          version, seed and the md5 of every file above; written last

Generation is deterministic (the same seed gives byte-identical files with one libjpeg) and, through
:func:`get_mock_dataset_root`, :func:`get_mock_images_dataset` and :func:`download_mock_dataset`, atomic: it
happens in a temporary folder next to the target, which is then renamed into place; a concurrent process that
finished first wins.

A target that cannot be written (no permission, a missing or read-only parent, a full disk) raises the
``OSError`` of the system, of the same type and errno, with a message that names the target, the system's reason
and the path that failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from oml_core.caches.folder import get_cache_dir
from oml_core.const import (
    BBOXES_COLUMNS,
    CATEGORIES_COLUMN,
    IS_GALLERY_COLUMN,
    IS_QUERY_COLUMN,
    LABELS_COLUMN,
    MOCK_DATASET_DEFAULT_CSV,
    MOCK_DATASET_NAME,
    MOCK_DATASET_VERSION,
    OBLIGATORY_COLUMNS,
    PATHS_COLUMN,
    SEQUENCE_COLUMN,
    SPLIT_COLUMN,
    X1_COLUMN,
    X2_COLUMN,
    Y1_COLUMN,
    Y2_COLUMN,
    mock_dataset_dirname,
)
from oml_core.datasets.generated import GeneratedDataset

MOCK_IMAGE_SIZE = 64
MOCK_N_IMAGES_PER_LABEL = 8
MOCK_SHAPES = ("circle", "square", "triangle", "star", "cross", "diamond")
MOCK_COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (205, 35, 35),
    "green": (35, 145, 45),
    "blue": (35, 65, 205),
    "purple": (135, 45, 165),
}
MOCK_DF_NAMES = (
    MOCK_DATASET_DEFAULT_CSV,
    "df_with_category.csv",
    "df_with_bboxes.csv",
    "df_with_sequence.csv",
)
_SEQUENCE_LENGTHS = (3, 3, 2)
#: The JPEG encoder's settings: high quality, no chroma subsampling (the figures' colours stay close).
_JPEG_OPTIONS: dict[str, Any] = {"format": "JPEG", "quality": 95, "subsampling": 0}
_MARGIN = 3  # white pixels kept between a figure and the image border

# (shape index, colour index) pairs of the validation labels: (s + c) % 3 == 0 picks 8 of the 24 so that
# every shape is in both splits with 2-3 train labels.
_VALIDATION_COMBOS = tuple(
    (s, c) for s in range(len(MOCK_SHAPES)) for c in range(len(MOCK_COLOURS)) if (s + c) % 3 == 0
)


def _label_combos() -> list[tuple[int, int, str]]:
    """``(shape index, colour index, split)`` for labels 0..23: train labels first."""
    combos = [(s, c) for s in range(len(MOCK_SHAPES)) for c in range(len(MOCK_COLOURS))]
    train = [(s, c, "train") for s, c in combos if (s, c) not in _VALIDATION_COMBOS]
    val = [(s, c, "validation") for s, c in combos if (s, c) in _VALIDATION_COMBOS]
    return train + val


def _unit_polygon(shape: str) -> np.ndarray:
    """Vertices ``[N, 2]`` of the shape centred at 0, with outer radius about 1."""
    if shape == "circle":
        t = np.linspace(0.0, 2 * np.pi, 48, endpoint=False)
        return np.stack([np.cos(t), np.sin(t)], axis=1)
    if shape == "square":
        t = np.pi / 4 + np.arange(4) * np.pi / 2
        return np.stack([np.cos(t), np.sin(t)], axis=1)
    if shape == "triangle":
        t = -np.pi / 2 + np.arange(3) * 2 * np.pi / 3
        return np.stack([np.cos(t), np.sin(t)], axis=1)
    if shape == "star":
        t = -np.pi / 2 + np.arange(10) * np.pi / 5
        r = np.where(np.arange(10) % 2 == 0, 1.0, 0.42)
        return np.stack([r * np.cos(t), r * np.sin(t)], axis=1)
    if shape == "cross":
        a, w = 0.95, 0.3
        return np.array(
            [
                [-w, -a],
                [w, -a],
                [w, -w],
                [a, -w],
                [a, w],
                [w, w],
                [w, a],
                [-w, a],
                [-w, w],
                [-a, w],
                [-a, -w],
                [-w, -w],
            ]
        )
    if shape == "diamond":
        return np.array([[0.0, -1.0], [0.6, 0.0], [0.0, 1.0], [-0.6, 0.0]])
    raise ValueError(f"unknown shape {shape!r}; known: {MOCK_SHAPES}")


def _draw_figure(
    rng: np.random.Generator, shape: str, colour: tuple[int, int, int]
) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """Draw one figure; return the ``HxWx3`` uint8 image and its tight box ``(x_1, x_2, y_1, y_2)``."""
    size = MOCK_IMAGE_SIZE
    radius = rng.uniform(12.0, 21.0)
    angle = rng.uniform(0.0, 2 * np.pi)
    jitter = rng.integers(-20, 21, size=3)
    noise = rng.normal(0.0, 6.0, size=(size, size, 3))
    pos = rng.uniform(0.0, 1.0, size=2)

    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    points = (_unit_polygon(shape) @ rotation.T) * radius
    low, high = points.min(axis=0), points.max(axis=0)
    # the centre is drawn so that the whole figure stays _MARGIN pixels away from every border
    centre_min = _MARGIN - low
    centre_max = size - 1 - _MARGIN - high
    centre = centre_min + pos * np.maximum(centre_max - centre_min, 0.0)
    points = np.round(points + centre, 2)

    mask_image = Image.new("L", (size, size), 0)
    ImageDraw.Draw(mask_image).polygon([(float(x), float(y)) for x, y in points], fill=255)
    mask = np.asarray(mask_image) > 0

    base = np.clip(np.array(colour) + jitter, 0, 225).astype(np.float64)
    image = np.full((size, size, 3), 255, dtype=np.uint8)
    image[mask] = np.clip(base + noise[mask], 0, 235).round().astype(np.uint8)

    ys, xs = np.nonzero(mask)
    bbox = int(xs.min()), int(xs.max()) + 1, int(ys.min()), int(ys.max()) + 1
    return image, bbox


def generate_mock_dataset(root: Path | str, seed: int = 0) -> None:
    """Write the mock figures dataset into ``root`` (created if needed; existing files of the same names are
    overwritten), its manifest last. Not atomic by itself: use :func:`get_mock_dataset_root` or
    :func:`download_mock_dataset` for a folder that other processes may read.

    The output is a function of ``seed`` alone (a ``numpy.random.Generator``): the same seed gives
    byte-identical images, CSVs and manifest. See the module's docstring for the content.

    Raises:
        OSError: ``root`` cannot be written; the message names it and the system's reason.
    """
    MOCK_FIGURES.generate(root, seed)


def _write(root: Path, seed: int) -> list[str]:
    """Write the files of the dataset of ``seed`` into ``root`` and return their names (the manifest is
    :data:`MOCK_FIGURES`'s)."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    colour_names = list(MOCK_COLOURS)

    rows: list[dict[str, Any]] = []
    n_of_shape = dict.fromkeys(MOCK_SHAPES, 0)
    for label, (shape_idx, colour_idx, split) in enumerate(_label_combos()):
        shape, colour_name = MOCK_SHAPES[shape_idx], colour_names[colour_idx]
        sequence_of = [j for j, n in enumerate(_SEQUENCE_LENGTHS) for _ in range(n)]
        for k in range(MOCK_N_IMAGES_PER_LABEL):
            image, (x1, x2, y1, y2) = _draw_figure(rng, shape, MOCK_COLOURS[colour_name])
            n_of_shape[shape] += 1
            rel_path = f"images/{shape}_{n_of_shape[shape]}.jpg"
            Image.fromarray(image, mode="RGB").save(root / rel_path, **_JPEG_OPTIONS)
            is_val = split == "validation"
            rows.append(
                {
                    LABELS_COLUMN: label,
                    PATHS_COLUMN: rel_path,
                    SPLIT_COLUMN: split,
                    IS_QUERY_COLUMN: True if is_val else None,
                    IS_GALLERY_COLUMN: True if is_val else None,
                    CATEGORIES_COLUMN: shape,
                    X1_COLUMN: x1,
                    X2_COLUMN: x2,
                    Y1_COLUMN: y1,
                    Y2_COLUMN: y2,
                    SEQUENCE_COLUMN: f"seq_{label:02d}_{sequence_of[k]}",
                }
            )

    df = pd.DataFrame(rows)
    base = list(OBLIGATORY_COLUMNS)
    tables = {
        MOCK_DATASET_DEFAULT_CSV: base,
        "df_with_category.csv": [*base, CATEGORIES_COLUMN],
        "df_with_bboxes.csv": [*base, *BBOXES_COLUMNS],
        "df_with_sequence.csv": [*base, SEQUENCE_COLUMN],
    }
    for name, columns in tables.items():
        df[columns].to_csv(root / name, index=False, lineterminator="\n")

    return [*tables, *(row[PATHS_COLUMN] for row in rows)]


def get_mock_dataset_path(cache_dir: Path | str | None = None, seed: int = 0) -> Path:
    """The folder of the mock dataset of ``seed`` in the cache, ``<cache>/mock_figures_v<version>_seed<seed>``,
    where ``<cache>`` is ``cache_dir`` or, when it is ``None``, :func:`~oml_core.caches.folder.get_cache_dir`.

    Only the path: nothing is created or generated (see :func:`get_mock_dataset_root`). With the defaults it is
    :data:`oml_core.const.MOCK_DATASET_PATH`.
    """
    cache = Path(cache_dir).expanduser() if cache_dir is not None else get_cache_dir()
    return cache / mock_dataset_dirname(seed)


def get_mock_dataset_root(cache_dir: Path | str | None = None, seed: int = 0) -> Path:
    """Return the folder of the mock dataset of ``seed`` in the cache, generating it there on first use.

    The folder is :func:`get_mock_dataset_path` ``(cache_dir, seed)``. Generation is atomic (see the module's
    docstring), so concurrent callers all get a complete dataset.
    """
    root = get_mock_dataset_path(cache_dir, seed)
    return MOCK_FIGURES.materialise(root, seed=seed, check_md5=False)


def get_mock_images_dataset(
    dataset_root: Path | str | None = None,
    df_name: str = MOCK_DATASET_DEFAULT_CSV,
    check_md5: bool = True,
    global_paths: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """OML's function of the mock images dataset, with OML's arguments and their order: nothing is downloaded,
    the dataset of seed 0 is generated (atomically) into ``dataset_root`` when it is absent, incomplete, of
    another version, or (with ``check_md5``) when a file's md5 differs from the manifest.

    Args:
        dataset_root: The folder of the dataset; None (OML's default): :data:`oml_core.const.MOCK_DATASET_PATH`,
            :func:`get_mock_dataset_path` in oml's cache.
        df_name: Which table to read: one of ``df.csv``, ``df_with_category.csv``, ``df_with_bboxes.csv``,
            ``df_with_sequence.csv``.
        check_md5: Check every file against the manifest's md5 (regenerate on a mismatch).
        global_paths: Make the ``path`` column absolute (joined to ``dataset_root``).

    Returns:
        ``(df_train, df_val)``: the rows of ``split == "train"`` and ``split == "validation"``, each with a
        fresh index; ``df_val``'s ``is_query`` and ``is_gallery`` are bool columns.

    Raises:
        ValueError: ``df_name`` is none of the tables (before anything is written).
        OSError: ``dataset_root`` cannot be written (the message names it).
    """
    return download_mock_dataset(dataset_root, check_md5, df_name, global_paths)


def download_mock_dataset(
    dataset_root: Path | str | None = None,
    check_md5: bool = True,
    df_name: str = MOCK_DATASET_DEFAULT_CSV,
    global_paths: bool = False,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """OML's older name of :func:`get_mock_images_dataset`, with its argument order (``check_md5`` second), and
    oml's ``seed``: the dataset of ``seed`` is generated into ``dataset_root`` (None: OML's default,
    :func:`get_mock_dataset_path` of ``seed`` in oml's cache) as :func:`get_mock_images_dataset` says.
    """
    root = Path(dataset_root) if dataset_root is not None else get_mock_dataset_path(seed=seed)
    return MOCK_FIGURES.load_splits(root, seed, check_md5, df_name, global_paths)


#: The mock figures dataset as a generated dataset (its manifest, completeness and atomic materialisation).
MOCK_FIGURES = GeneratedDataset(
    name=MOCK_DATASET_NAME,
    version=MOCK_DATASET_VERSION,
    tables=MOCK_DF_NAMES,
    write=_write,
    description="the mock dataset",
)

__all__ = [
    "MOCK_COLOURS",
    "MOCK_DATASET_NAME",
    "MOCK_DATASET_VERSION",
    "MOCK_DF_NAMES",
    "MOCK_FIGURES",
    "MOCK_SHAPES",
    "download_mock_dataset",
    "generate_mock_dataset",
    "get_mock_dataset_path",
    "get_mock_dataset_root",
    "get_mock_images_dataset",
]
