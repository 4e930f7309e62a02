"""OML's constants module (``oml.const``): folders, colours, the dataframe format's column names and the keys of
the items and metrics that oml's classes exchange.

This module is the single source of these strings in the core: the datasets, the dataframe format checker and
the retrieval results import them from here.

Three paths depend on the environment and are computed each time they are read (``from oml_core.const import
MOCK_DATASET_PATH`` reads the environment of that moment), so that setting ``OML_CACHE_DIR`` or
``OML_WEIGHTS_DIR`` after the import is honoured; reading them creates no folder and generates nothing:

- :data:`CACHE_PATH`: oml's cache folder, :func:`oml_core.utils.cache.get_cache_dir` (``$OML_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/oml``, else ``~/.cache/oml``).
- :data:`MOCK_DATASET_PATH`: the folder of the mock "figures" dataset of seed 0 in that cache, the folder that
  :func:`oml_core.datasets.mock.get_mock_dataset_root` fills on first use (``download_mock_dataset(
  MOCK_DATASET_PATH)`` fills the same one).
- :data:`CKPT_SAVE_ROOT`: the weights cache of the pretrained zoo,
  :func:`oml_core.utils.cache.weights_cache_dir` (``$OML_WEIGHTS_DIR``, else ``<CACHE_PATH>/weights``).

Some of OML's constants have no counterpart here: the urls of OML's download server and of the mock dataset
on Google Drive (oml generates its mock dataset locally), and the audio and text ones (oml has image datasets
only).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from oml_core.utils.cache import get_cache_dir, weights_cache_dir

# ----------------------------------------------------------------------------------------------- folders
#: The folder of the ``oml_core`` package.
OML_PATH = Path(__file__).parent
#: The folder that holds the ``oml_core`` package (the repository root in a source checkout).
PROJECT_ROOT = OML_PATH.parent
#: The default pipeline configs (hydra yaml) of the core.
CONFIGS_PATH = OML_PATH / "configs"
#: The system's temporary folder.
TMP_PATH = Path(tempfile.gettempdir())
#: The ``.env`` file that OML's pipelines read, at the project root.
DOTENV_PATH = PROJECT_ROOT / ".env"

#: The table of the mock dataset that is used when none is named.
MOCK_DATASET_DEFAULT_CSV = "df.csv"
#: The name and the version of oml's mock "figures" dataset (:mod:`oml_core.datasets.mock`).
MOCK_DATASET_NAME = "mock_figures"
MOCK_DATASET_VERSION = 1


def mock_dataset_dirname(seed: int = 0) -> str:
    """The name of the folder of the mock dataset of ``seed`` in the cache: ``mock_figures_v<version>_seed<seed>``."""
    return f"{MOCK_DATASET_NAME}_v{MOCK_DATASET_VERSION}_seed{int(seed)}"


# ------------------------------------------------------------------------------------------ visualisation
#: The folder (under a run's logs) of the images of the worst queries.
LOG_IMAGE_FOLDER = "image_logs"
#: Worst queries drawn per metric.
LOG_TOPK_ROWS_PER_METRIC = 5
#: Retrieved items drawn per query.
LOG_TOPK_IMAGES_PER_ROW = 5
#: Ground-truth items drawn per query, after the retrieved ones.
N_GT_SHOW_EMBEDDING_METRICS = 2

#: An RGB colour, every channel in ``0..255``.
TColor = tuple[int, int, int]
#: A retrieved item that is not relevant to its query.
RED: TColor = (255, 0, 0)
#: A retrieved item that is relevant to its query.
GREEN: TColor = (0, 255, 0)
#: A query.
BLUE: TColor = (0, 0, 255)
#: A ground-truth item of a query (shown for reference).
GRAY: TColor = (120, 120, 120)
#: A retrieved item whose relevance is unknown (no ground truth), and the default bounding box colour.
BLACK: TColor = (0, 0, 0)
#: The padding around images.
PAD_COLOR: TColor = (255, 255, 255)

# ---------------------------------------------------------------------------------------- normalisation
#: A mean or std per RGB channel.
TNormParam = tuple[float, float, float]
#: ImageNet's channel means and standard deviations (pixels in ``[0, 1]``).
MEAN: TNormParam = (0.485, 0.456, 0.406)
STD: TNormParam = (0.229, 0.224, 0.225)
#: Those of OpenAI's CLIP.
MEAN_CLIP: TNormParam = (0.48145466, 0.4578275, 0.40821073)
STD_CLIP: TNormParam = (0.26862954, 0.26130258, 0.27577711)

#: A bounding box ``(x1, y1, x2, y2)``.
TBBox = tuple[int, int, int, int]
#: One optional bounding box per item.
TBBoxes = Sequence[TBBox | None]
#: The key of a crop ``[x1, y1, x2, y2]``.
CROP_KEY = "crop"

# ------------------------------------------------------------------------------- the dataframe format
LABELS_COLUMN = "label"
PATHS_COLUMN = "path"
#: The column of a text dataframe that takes the place of ``path`` (OML's ``TEXTS_COLUMN``).
TEXTS_COLUMN = "text"
SPLIT_COLUMN = "split"
IS_QUERY_COLUMN = "is_query"
IS_GALLERY_COLUMN = "is_gallery"
CATEGORIES_COLUMN = "category"
SEQUENCE_COLUMN = "sequence"
X1_COLUMN = "x_1"
X2_COLUMN = "x_2"
Y1_COLUMN = "y_1"
Y2_COLUMN = "y_2"

#: The columns every table of images must have (as in the manual: the path included).
OBLIGATORY_COLUMNS = (LABELS_COLUMN, PATHS_COLUMN, SPLIT_COLUMN, IS_QUERY_COLUMN, IS_GALLERY_COLUMN)
#: The bounding box columns: all four or none (left, right, top, bottom).
BBOXES_COLUMNS = (X1_COLUMN, X2_COLUMN, Y1_COLUMN, Y2_COLUMN)

# ------------------------------------------------------------ keys of the items, batches and metrics
#: The key of the metrics over all the queries (the others are the categories).
OVERALL_CATEGORIES_KEY = "OVERALL"
#: Suffix of the keyword arguments that request a retrieval metric: ``<name>_top_k`` (``cmc_top_k``).
TOP_K_SUFFIX = "_top_k"
INPUT_TENSORS_KEY = "input_tensors"
LABELS_KEY = "labels"
EMBEDDINGS_KEY = "embeddings"
INDEX_KEY = "idx"
IS_QUERY_KEY = "is_query"
IS_GALLERY_KEY = "is_gallery"
CATEGORIES_KEY = "categories"
SEQUENCE_KEY = "sequence"
PATHS_KEY = "paths"
X1_KEY = "x1"
X2_KEY = "x2"
Y1_KEY = "y1"
Y2_KEY = "y2"
#: The two members of a pair (pairs datasets, pairwise models).
INPUT_TENSORS_KEY_1 = "input_tensors_1"
INPUT_TENSORS_KEY_2 = "input_tensors_2"
#: OML's older names of the two keys above.
PAIR_1ST_KEY = INPUT_TENSORS_KEY_1
PAIR_2ND_KEY = INPUT_TENSORS_KEY_2

#: The extensions of the image files OML looks for.
IMAGE_EXTENSIONS = ("jpg", "jpeg", "JPG", "JPEG", "png")

#: The behaviour (``version_base``) of hydra that OML's configs are written for.
HYDRA_BEHAVIOUR = "1.1"

# ------------------------------------------------------------------- paths read from the environment
_DYNAMIC_PATHS = ("CACHE_PATH", "MOCK_DATASET_PATH", "CKPT_SAVE_ROOT")
# declared (for readers and type checkers) but not assigned, so that reading them goes to ``__getattr__``
#: oml's cache folder (see the module's docstring).
CACHE_PATH: Path
#: The folder of the mock dataset of seed 0 in the cache (see the module's docstring).
MOCK_DATASET_PATH: Path
#: The weights cache of the pretrained zoo (see the module's docstring).
CKPT_SAVE_ROOT: Path


def __getattr__(name: str) -> Any:
    """The paths of :data:`_DYNAMIC_PATHS`, computed from the environment when read (PEP 562); no folder is
    created and nothing is generated."""
    if name == "CACHE_PATH":
        return get_cache_dir()
    if name == "MOCK_DATASET_PATH":
        return get_cache_dir() / mock_dataset_dirname(0)
    if name == "CKPT_SAVE_ROOT":
        return weights_cache_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_DYNAMIC_PATHS])


__all__ = [
    "BBOXES_COLUMNS",
    "BLACK",
    "BLUE",
    "CACHE_PATH",
    "CATEGORIES_COLUMN",
    "CATEGORIES_KEY",
    "CKPT_SAVE_ROOT",
    "CONFIGS_PATH",
    "CROP_KEY",
    "DOTENV_PATH",
    "EMBEDDINGS_KEY",
    "GRAY",
    "GREEN",
    "HYDRA_BEHAVIOUR",
    "IMAGE_EXTENSIONS",
    "INDEX_KEY",
    "INPUT_TENSORS_KEY",
    "INPUT_TENSORS_KEY_1",
    "INPUT_TENSORS_KEY_2",
    "IS_GALLERY_COLUMN",
    "IS_GALLERY_KEY",
    "IS_QUERY_COLUMN",
    "IS_QUERY_KEY",
    "LABELS_COLUMN",
    "LABELS_KEY",
    "LOG_IMAGE_FOLDER",
    "LOG_TOPK_IMAGES_PER_ROW",
    "LOG_TOPK_ROWS_PER_METRIC",
    "MEAN",
    "MEAN_CLIP",
    "MOCK_DATASET_DEFAULT_CSV",
    "MOCK_DATASET_NAME",
    "MOCK_DATASET_PATH",
    "MOCK_DATASET_VERSION",
    "N_GT_SHOW_EMBEDDING_METRICS",
    "OBLIGATORY_COLUMNS",
    "OML_PATH",
    "OVERALL_CATEGORIES_KEY",
    "TOP_K_SUFFIX",
    "PAD_COLOR",
    "PAIR_1ST_KEY",
    "PAIR_2ND_KEY",
    "PATHS_COLUMN",
    "PATHS_KEY",
    "PROJECT_ROOT",
    "RED",
    "SEQUENCE_COLUMN",
    "SEQUENCE_KEY",
    "SPLIT_COLUMN",
    "STD",
    "STD_CLIP",
    "TBBox",
    "TBBoxes",
    "TColor",
    "TMP_PATH",
    "TNormParam",
    "mock_dataset_dirname",
    "X1_COLUMN",
    "X1_KEY",
    "X2_COLUMN",
    "X2_KEY",
    "Y1_COLUMN",
    "Y1_KEY",
    "Y2_COLUMN",
    "Y2_KEY",
]
