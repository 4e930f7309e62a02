"""OML 4.0's names of the mock datasets, constants, text/audio datasets and models resolve at OML's paths
(``oml`` -> ``oml_core``) and behave as OML's; OML's exception types (``AssertionError`` for a dataframe out of its
format, ``RuntimeError`` for retrieval results with unsorted distances) catch oml's errors; the datasets keep the
category under OML's key ``category``."""

from __future__ import annotations

import typing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import DictConfig

import oml_core.const as const
from oml_core.datasets.mock import get_mock_dataset_path
from oml_core.retrieval import RetrievalResults

#: Every public name of OML 4.0's ``oml/const.py`` (its module-level assignments and its one function).
OML_CONST_NAMES = """
get_cache_folder OML_PATH PROJECT_ROOT CACHE_PATH TMP_PATH DOTENV_PATH CONFIGS_PATH CKPT_SAVE_ROOT LOG_IMAGE_FOLDER
LOG_TOPK_ROWS_PER_METRIC LOG_TOPK_IMAGES_PER_ROW N_GT_SHOW_EMBEDDING_METRICS STORAGE_URL STORAGE_CKPTS
MOCK_DATASET_PATH MOCK_DATASET_DEFAULT_CSV MOCK_DATASET_URL_GDRIVE MOCK_DATASET_MD5 REQUESTS_TIMEOUT TColor RED GREEN
BLUE GRAY BLACK PAD_COLOR BS_KNN TCfg TNormParam MEAN STD MEAN_CLIP STD_CLIP TBBox TBBoxes CROP_KEY LABELS_COLUMN
SPLIT_COLUMN IS_QUERY_COLUMN IS_GALLERY_COLUMN CATEGORIES_COLUMN SEQUENCE_COLUMN TEXTS_COLUMN PATHS_COLUMN X1_COLUMN
X2_COLUMN Y1_COLUMN Y2_COLUMN OBLIGATORY_COLUMNS BBOXES_COLUMNS OVERALL_CATEGORIES_KEY INPUT_TENSORS_KEY LABELS_KEY
EMBEDDINGS_KEY INDEX_KEY INPUT_TENSORS_KEY_1 INPUT_TENSORS_KEY_2 IMAGE_EXTENSIONS HYDRA_BEHAVIOUR
MOCK_AUDIO_DATASET_PATH MOCK_AUDIO_DATASET_URL_GDRIVE MOCK_AUDIO_DATASET_MD5 AUDIO_EXTENSIONS START_TIME_COLUMN
MAX_AUDIO_LEN DEFAULT_SAMPLE_RATE DEFAULT_CONVERT_TO_MONO
""".split()


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of oml's (OML's default roots of the mock datasets are in it)."""
    monkeypatch.setenv("OML_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ----------------------------------------------------------------------------------------------- const


def test_every_public_name_of_omls_const_is_importable() -> None:
    namespace: dict[str, object] = {}
    exec(f"from oml_core.const import {', '.join(OML_CONST_NAMES)}", namespace)
    assert set(OML_CONST_NAMES) <= set(const.__all__) and set(OML_CONST_NAMES) <= set(dir(const))


def test_omls_constant_values() -> None:
    # OML 4.0's values, as its const.py has them
    assert const.STORAGE_CKPTS == "https://oml.daloroserver.com/download/checkpoints"
    assert const.MOCK_DATASET_MD5 == "a23478efd4746d18f937fa6c5758c0ed"
    assert const.MOCK_AUDIO_DATASET_MD5 == "45629afad9ff28f9148f3ea60f659d18"
    assert (const.REQUESTS_TIMEOUT, const.BS_KNN) == (120.0, 5000)
    assert const.AUDIO_EXTENSIONS == (".mp3", ".wav", ".ogg", ".flac")
    assert (const.START_TIME_COLUMN, const.MAX_AUDIO_LEN) == ("start_time", 3.0)
    assert (const.DEFAULT_SAMPLE_RATE, const.DEFAULT_CONVERT_TO_MONO) == (16000, True)


def test_tcfg_is_a_dict_or_a_dictconfig() -> None:
    from oml_core.const import TCfg

    # OML's Union[Dict[str, Any], DictConfig]: what annotations of OML's config-taking functions say
    assert set(typing.get_args(TCfg)) == {dict[str, typing.Any], DictConfig}


def test_the_cache_paths_follow_the_environment(cache: Path) -> None:
    assert const.get_cache_folder() == const.CACHE_PATH == cache
    assert const.MOCK_DATASET_PATH == cache / "mock_figures_v2_seed0" == get_mock_dataset_path()
    assert const.MOCK_AUDIO_DATASET_PATH == cache / "mock_audios_v3_seed0"
    assert not cache.exists()  # reading them creates nothing


# ----------------------------------------------------------------------------------- the mock datasets


def test_download_mock_dataset_without_arguments_fills_omls_default_root(cache: Path) -> None:
    from oml_core.utils.download_mock_dataset import download_mock_dataset

    df_train, df_val = download_mock_dataset()
    assert (cache / "mock_figures_v2_seed0" / "images" / "circle_1.jpg").is_file()
    assert (len(df_train), len(df_val)) == (128, 64)
    assert df_val["is_query"].dtype == bool and df_train["path"][0] == "images/circle_1.jpg"


def test_get_mock_images_dataset_takes_omls_arguments_in_omls_order(tmp_path: Path) -> None:
    from oml_core.utils import get_mock_images_dataset

    # OML: (dataset_root, df_name, check_md5, global_paths); download_mock_dataset has check_md5 second
    df_train, df_val = get_mock_images_dataset(tmp_path / "m", "df_with_category.csv", True, True)
    assert "category" in df_train.columns
    assert df_val["path"][0] == str(tmp_path / "m" / df_val["path"][0].split("/m/")[1])
    assert Path(df_val["path"][0]).is_file()
    with pytest.raises(ValueError, match="unknown df_name 'df_with_nothing.csv'"):
        get_mock_images_dataset(tmp_path / "m", "df_with_nothing.csv")


def test_the_mock_functions_of_oml_utils_are_the_core_and_plugins_own() -> None:
    import oml_audio
    import oml_texts
    from oml_core.utils.download_mock_dataset import get_mock_texts_dataset

    from oml_core.datasets.mock import get_mock_images_dataset
    from oml_core.utils import get_mock_audios_dataset as audios
    from oml_core.utils import get_mock_images_dataset as images
    from oml_core.utils import get_mock_texts_dataset as texts

    assert images is get_mock_images_dataset
    assert texts is get_mock_texts_dataset is oml_texts.get_mock_texts_dataset
    assert audios is oml_audio.get_mock_audios_dataset


def test_the_mock_audio_has_omls_file_names_in_omls_default_root(cache: Path) -> None:
    from oml_core.utils import get_mock_audios_dataset

    df_train, df_val = get_mock_audios_dataset()
    root = cache / "mock_audios_v3_seed0"
    assert df_train["path"][:2].tolist() == ["voices/voice0_0.wav", "voices/voice0_1.wav"]
    assert df_val["path"].iloc[-1] == "voices/voice7_5.wav"  # 8 labels of 6 clips
    assert (root / "voices" / "voice0_0.wav").is_file()
    with_start_times = get_mock_audios_dataset(df_name="df_with_start_times.csv")
    pd.testing.assert_frame_equal(with_start_times[0], df_train)
    assert df_train["start_time"].between(0, 0.25).all()


# ------------------------------------------------------------------------------ datasets and models


def test_omls_text_and_audio_datasets_and_models_resolve_to_the_plugins() -> None:
    import oml_audio
    import oml_texts
    from oml_core.datasets.audios import AudioLabeledDataset
    from oml_core.datasets.texts import TextQueryGalleryDataset
    from oml_core.models import ECAPATDNNExtractor, HFWrapper

    import oml_core.datasets as datasets

    for modality, plugin in (("Text", oml_texts), ("Audio", oml_audio)):
        for kind in ("Base", "Labeled", "QueryGallery", "QueryGalleryLabeled"):
            name = f"{modality}{kind}Dataset"
            assert getattr(datasets, name) is getattr(plugin, name), name
            assert name in datasets.__all__
    assert TextQueryGalleryDataset is oml_texts.TextQueryGalleryDataset
    assert AudioLabeledDataset is oml_audio.AudioLabeledDataset
    assert HFWrapper is oml_texts.HFWrapper and ECAPATDNNExtractor is oml_audio.ECAPATDNNExtractor


def test_the_category_is_under_omls_key_too(tmp_path: Path) -> None:
    from oml_core.datasets import ImageLabeledDataset, ImageQueryGalleryLabeledDataset
    from oml_core.utils import get_mock_images_dataset

    df_train, df_val = get_mock_images_dataset(tmp_path, "df_with_category.csv", global_paths=True)
    val = ImageQueryGalleryLabeledDataset(df_val)
    # OML 4.0's examples: np.array(val.extra_data["category"])[val.get_query_ids()]
    assert np.array(val.extra_data["category"])[val.get_query_ids()].tolist() == df_val["category"].tolist()
    assert val.extra_data["categories"] == val.extra_data["category"]
    assert val[5]["category"] == val[5]["categories"] == df_val["category"][5]

    train = ImageLabeledDataset(df_train, categories_key=None)  # oml's opt-out leaves both out
    assert "category" not in train.extra_data and "category" not in train[0]
    with pytest.raises(
        ValueError, match="extra_data has the key 'category' that the column 'category' fills"
    ):
        ImageLabeledDataset(df_train, extra_data={"category": list(df_train["category"])})


# ------------------------------------------------------------------------------------- exception types


def test_a_dataframe_out_of_the_format_raises_omls_assertion_error(tmp_path: Path) -> None:
    from oml_core.utils.dataframe_format import DataFrameFormatError, check_retrieval_dataframe_format

    df = pd.DataFrame(
        {"label": [0, 0], "path": ["a.jpg", "b.jpg"], "split": ["train", "test"], "is_query": [None] * 2}
    )
    df["is_gallery"] = None
    with pytest.raises(AssertionError, match="split") as caught:  # as OML's tests catch it
        check_retrieval_dataframe_format(df)
    assert isinstance(caught.value, DataFrameFormatError) and isinstance(caught.value, ValueError)


def _results(distances: list[list[float]], retrieved: list[list[int]]) -> RetrievalResults:
    return RetrievalResults(
        distances=[torch.tensor(d) for d in distances],
        retrieved_ids=[torch.tensor(r, dtype=torch.long) for r in retrieved],
        gt_ids=[torch.tensor([0]) for _ in distances],
    )


def test_unsorted_distances_and_mismatched_lengths_raise_omls_runtime_error() -> None:
    from oml_core.retrieval.retrieval_results import RetrievalResultsError

    with pytest.raises(RuntimeError, match="query 1: distances must be sorted ascending") as caught:
        _results([[0.0, 1.0], [0.5, 0.2]], [[0, 1], [1, 0]])
    assert isinstance(caught.value, RetrievalResultsError) and isinstance(caught.value, ValueError)
    with pytest.raises(RuntimeError, match="query 0: 2 distances for 3 retrieved ids"):
        _results([[0.0, 1.0]], [[0, 1, 2]])
    with pytest.raises(RuntimeError, match="query 0: distances contain NaN"):
        _results([[0.0, float("nan")]], [[0, 1]])
    assert _results([[0.0, 0.0, 1.0]], [[2, 0, 1]]).n_queries == 1  # equal distances are sorted


def test_drawing_a_dataset_that_cannot_be_drawn_raises_omls_type_error_first() -> None:
    from oml_core.datasets import EmbeddingsQueryGalleryLabeledDataset

    # items of 1-D embeddings: neither visualize() nor image tensors; OML checks the dataset before the query ids
    dataset = EmbeddingsQueryGalleryLabeledDataset(
        torch.eye(4),
        labels=[0, 1, 0, 1],
        is_query=[True, True, False, False],
        is_gallery=[False, False, True, True],
    )
    rr = RetrievalResults.from_embeddings(torch.eye(4), dataset, n_items=2)
    with pytest.raises(TypeError, match="can neither visualize its items nor gives image tensors"):
        rr.visualize(query_ids=[0, 3], dataset=dataset)  # 3 is no query position either
    with pytest.raises(ValueError, match=r"query_ids must be non-empty positions in \[0, 1\], got \[3\]"):
        rr.visualize_with_functions(
            [0, 3], lambda i, c: np.zeros((2, 2, 3)), lambda j, c: np.zeros((2, 2, 3))
        )
