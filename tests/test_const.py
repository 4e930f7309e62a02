"""``oml_core.const`` (OML's ``oml.const``): the values, the modules that take them from it, and the paths
read from the environment without creating anything."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import oml_core.const as const
import oml_core.datasets.dataframe_format as dataframe_format
import oml_core.datasets.images as images
import oml_core.datasets.mock as mock
import oml_core.retrieval.retrieval_results as retrieval_results
from oml_core.datasets import download_mock_dataset, get_mock_dataset_root


def test_column_names_and_keys_are_omls() -> None:
    columns = {
        "LABELS_COLUMN": "label",
        "PATHS_COLUMN": "path",
        "SPLIT_COLUMN": "split",
        "IS_QUERY_COLUMN": "is_query",
        "IS_GALLERY_COLUMN": "is_gallery",
        "CATEGORIES_COLUMN": "category",
        "SEQUENCE_COLUMN": "sequence",
        "X1_COLUMN": "x_1",
        "X2_COLUMN": "x_2",
        "Y1_COLUMN": "y_1",
        "Y2_COLUMN": "y_2",
    }
    keys = {
        "OVERALL_CATEGORIES_KEY": "OVERALL",
        "INPUT_TENSORS_KEY": "input_tensors",
        "LABELS_KEY": "labels",
        "EMBEDDINGS_KEY": "embeddings",
        "INDEX_KEY": "idx",
        "IS_QUERY_KEY": "is_query",
        "IS_GALLERY_KEY": "is_gallery",
        "CATEGORIES_KEY": "categories",
        "SEQUENCE_KEY": "sequence",
        "PATHS_KEY": "paths",
        "X1_KEY": "x1",
        "X2_KEY": "x2",
        "Y1_KEY": "y1",
        "Y2_KEY": "y2",
        "INPUT_TENSORS_KEY_1": "input_tensors_1",
        "INPUT_TENSORS_KEY_2": "input_tensors_2",
        "PAIR_1ST_KEY": "input_tensors_1",
        "PAIR_2ND_KEY": "input_tensors_2",
        "CROP_KEY": "crop",
    }
    assert {name: getattr(const, name) for name in {**columns, **keys}} == {**columns, **keys}
    assert const.OBLIGATORY_COLUMNS == ("label", "path", "split", "is_query", "is_gallery")
    assert const.BBOXES_COLUMNS == ("x_1", "x_2", "y_1", "y_2")
    assert (const.RED, const.GREEN, const.BLUE) == ((255, 0, 0), (0, 255, 0), (0, 0, 255))
    assert (const.GRAY, const.BLACK, const.PAD_COLOR) == ((120, 120, 120), (0, 0, 0), (255, 255, 255))
    assert (const.MEAN, const.STD) == ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    assert const.MEAN_CLIP == (0.48145466, 0.4578275, 0.40821073)
    assert const.STD_CLIP == (0.26862954, 0.26130258, 0.27577711)
    assert (
        const.LOG_TOPK_ROWS_PER_METRIC,
        const.LOG_TOPK_IMAGES_PER_ROW,
        const.N_GT_SHOW_EMBEDDING_METRICS,
    ) == (
        5,
        5,
        2,
    )
    assert const.IMAGE_EXTENSIONS == ("jpg", "jpeg", "JPG", "JPEG", "png")
    assert const.MOCK_DATASET_DEFAULT_CSV == "df.csv" and const.CONFIGS_PATH.is_dir()


def test_the_format_modules_take_their_names_from_const() -> None:
    for name in [
        *("LABELS_COLUMN", "PATHS_COLUMN", "SPLIT_COLUMN", "IS_QUERY_COLUMN", "IS_GALLERY_COLUMN"),
        *("CATEGORIES_COLUMN", "SEQUENCE_COLUMN", "X1_COLUMN", "X2_COLUMN", "Y1_COLUMN", "Y2_COLUMN"),
        *("OBLIGATORY_COLUMNS", "BBOXES_COLUMNS"),
    ]:
        assert getattr(dataframe_format, name) is getattr(const, name), name
        if name in images.__all__:
            assert getattr(images, name) is getattr(const, name), name
    assert retrieval_results.SEQUENCE_COLUMN is const.SEQUENCE_COLUMN
    assert retrieval_results.N_GT_TO_SHOW == const.N_GT_SHOW_EMBEDDING_METRICS


def test_the_datasets_defaults_are_the_const_keys() -> None:
    expected = {
        "input_tensors_key": const.INPUT_TENSORS_KEY,
        "labels_key": const.LABELS_KEY,
        "index_key": const.INDEX_KEY,
        "paths_key": const.PATHS_KEY,
        "categories_key": const.CATEGORIES_KEY,
        "sequence_key": const.SEQUENCE_KEY,
        "x1_key": const.X1_KEY,
        "x2_key": const.X2_KEY,
        "y1_key": const.Y1_KEY,
        "y2_key": const.Y2_KEY,
        "is_query_key": const.IS_QUERY_KEY,
        "is_gallery_key": const.IS_GALLERY_KEY,
    }
    parameters = inspect.signature(images.ImageQueryGalleryLabeledDataset).parameters
    assert {name: parameters[name].default for name in expected} == expected
    base = inspect.signature(images.ImageBaseDataset).parameters
    assert base["index_key"].default == const.INDEX_KEY and base["paths_key"].default == const.PATHS_KEY


def test_the_other_modules_agree_with_const() -> None:
    """Modules that keep their own copy of a value (they are not the const's to change) hold the same one."""
    from oml_core.builtins.transforms import IMAGENET_MEAN, IMAGENET_STD
    from oml_core.functional.metrics import OVERALL_CATEGORIES_KEY
    from oml_core.interfaces.datasets import IBaseDataset, ILabeledDataset, IPairsDataset
    from oml_core.metrics import embeddings

    assert (IMAGENET_MEAN, IMAGENET_STD) == (const.MEAN, const.STD)
    assert OVERALL_CATEGORIES_KEY == const.OVERALL_CATEGORIES_KEY
    assert (IBaseDataset.index_key, IBaseDataset.input_tensors_key) == (
        const.INDEX_KEY,
        const.INPUT_TENSORS_KEY,
    )
    assert ILabeledDataset.labels_key == const.LABELS_KEY
    assert (IPairsDataset.pairs_1st_key, IPairsDataset.pairs_2nd_key) == (
        const.INPUT_TENSORS_KEY_1,
        const.INPUT_TENSORS_KEY_2,
    )
    assert embeddings.LOG_TOPK_ROWS_PER_METRIC == const.LOG_TOPK_ROWS_PER_METRIC
    assert embeddings.LOG_TOPK_IMAGES_PER_ROW == const.LOG_TOPK_IMAGES_PER_ROW
    assert embeddings.N_GT_SHOW_EMBEDDING_METRICS == const.N_GT_SHOW_EMBEDDING_METRICS


def test_the_mock_tables_have_the_const_columns(oml_cache_dir: Path) -> None:
    root = get_mock_dataset_root(cache_dir=oml_cache_dir)
    assert mock.MOCK_DF_NAMES[0] == const.MOCK_DATASET_DEFAULT_CSV
    assert tuple(pd.read_csv(root / "df.csv").columns) == const.OBLIGATORY_COLUMNS
    assert tuple(pd.read_csv(root / "df_with_bboxes.csv").columns) == (
        *const.OBLIGATORY_COLUMNS,
        *const.BBOXES_COLUMNS,
    )
    assert tuple(pd.read_csv(root / "df_with_sequence.csv").columns)[-1] == const.SEQUENCE_COLUMN
    assert tuple(pd.read_csv(root / "df_with_category.csv").columns)[-1] == const.CATEGORIES_COLUMN


def test_paths_follow_the_environment_and_create_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "no" / "cache"
    monkeypatch.setenv("OML_CACHE_DIR", str(cache))
    monkeypatch.delenv("OML_WEIGHTS_DIR", raising=False)
    from oml_core.const import CACHE_PATH, CKPT_SAVE_ROOT, MOCK_DATASET_PATH

    assert CACHE_PATH == cache
    assert MOCK_DATASET_PATH == cache / "mock_figures_v2_seed0" == mock.get_mock_dataset_path()
    assert CKPT_SAVE_ROOT == cache / "weights"
    assert not (tmp_path / "no").exists()  # reading them created nothing
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(tmp_path / "w"))
    assert const.CKPT_SAVE_ROOT == tmp_path / "w"  # read again: the environment of now
    monkeypatch.delenv("OML_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert const.MOCK_DATASET_PATH == tmp_path / "xdg" / "oml" / "mock_figures_v2_seed0"
    assert not (tmp_path / "xdg").exists()
    with pytest.raises(AttributeError, match="has no attribute 'NOT_A_CONSTANT'"):
        const.NOT_A_CONSTANT  # noqa: B018
    assert {"CACHE_PATH", "MOCK_DATASET_PATH", "CKPT_SAVE_ROOT"} <= set(dir(const))


def test_mock_dataset_path_is_where_the_mock_dataset_is_made(
    oml_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    assert get_mock_dataset_root() == const.MOCK_DATASET_PATH
    # the manual: _, df_val = download_mock_dataset(MOCK_DATASET_PATH)
    #             df_val["path"] = df_val["path"].apply(lambda x: MOCK_DATASET_PATH / x)
    from oml_core.const import MOCK_DATASET_PATH

    _, df_val = download_mock_dataset(MOCK_DATASET_PATH)
    df_val["path"] = df_val["path"].apply(lambda x: MOCK_DATASET_PATH / x)
    queries = df_val[df_val["is_query"]]["path"].tolist()
    assert len(queries) == 64 and all(path.is_file() for path in queries)


def test_importing_const_is_light_and_creates_nothing(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from oml_core.const import *\n"
        "print(MOCK_DATASET_PATH, CKPT_SAVE_ROOT, CACHE_PATH)\n"
        "heavy = sorted(m for m in ('torch', 'numpy', 'pandas', 'PIL') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    env = {**os.environ, "OML_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("OML_WEIGHTS_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=120
    ).stdout.splitlines()
    cache = tmp_path / "cache"
    assert out[0] == f"{cache / 'mock_figures_v2_seed0'} {cache / 'weights'} {cache}"
    assert out[1] == "[]"  # reading the paths imports the mock module lazily, but only when asked for
    assert not cache.exists()
