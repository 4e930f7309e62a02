"""The generated mock "figures" dataset: content, determinism, atomic caching."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

import oml_core.datasets.mock as mock
from oml_core.caches.folder import get_cache_dir
from oml_core.datasets import (
    check_retrieval_dataframe_format,
    download_mock_dataset,
    generate_mock_dataset,
    get_mock_dataset_root,
)

BASE_COLUMNS = ["label", "path", "split", "is_query", "is_gallery"]
EXPECTED_COLUMNS = {
    "df.csv": BASE_COLUMNS,
    "df_with_category.csv": [*BASE_COLUMNS, "category"],
    "df_with_bboxes.csv": [*BASE_COLUMNS, "x_1", "x_2", "y_1", "y_2"],
    "df_with_sequence.csv": [*BASE_COLUMNS, "sequence"],
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mock") / "figures"
    generate_mock_dataset(path, seed=0)
    return path


def _all_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_files_columns_and_counts(root: Path) -> None:
    assert sorted(p.name for p in root.iterdir()) == sorted([*EXPECTED_COLUMNS, "images", "manifest.json"])
    assert len(list((root / "images").glob("*.jpg"))) == 192

    for name, columns in EXPECTED_COLUMNS.items():
        df = pd.read_csv(root / name)
        assert list(df.columns) == columns, name
        assert len(df) == 192
        assert (df["split"] == "train").sum() == 128
        assert (df["split"] == "validation").sum() == 64
        assert df["path"].tolist() == pd.read_csv(root / "df.csv")["path"].tolist()

    df = pd.read_csv(root / "df_with_category.csv")
    train, val = df[df["split"] == "train"], df[df["split"] == "validation"]
    assert train["is_query"].isna().all() and train["is_gallery"].isna().all()
    assert (val["is_query"] == True).all() and (val["is_gallery"] == True).all()  # noqa: E712
    assert sorted(train["label"].unique()) == list(range(16))
    assert sorted(val["label"].unique()) == list(range(16, 24))
    assert set(train["label"]).isdisjoint(set(val["label"]))
    assert (df.groupby("label").size() == 8).all()
    # a label is one (shape, colour): one category per label; every shape is in both splits
    assert (df.groupby("label")["category"].nunique() == 1).all()
    assert set(df["category"]) == set(mock.MOCK_SHAPES)
    assert set(train["category"]) == set(val["category"]) == set(mock.MOCK_SHAPES)


def test_image_files_are_named_as_omls(root: Path) -> None:
    # OML's names (its zoo example opens images/circle_1.jpg): <shape>_<n>.jpg, n = 1, 2, ... per shape in row
    # order; the first label is a circle
    df = pd.read_csv(root / "df_with_category.csv")
    paths = df["path"].tolist()
    assert paths[:3] == ["images/circle_1.jpg", "images/circle_2.jpg", "images/circle_3.jpg"]
    assert len(set(paths)) == 192
    for shape in mock.MOCK_SHAPES:
        rows = df[df["category"] == shape]
        assert rows["path"].tolist() == [f"images/{shape}_{n}.jpg" for n in range(1, 33)]
    with Image.open(root / "images/circle_1.jpg") as im:
        assert im.format == "JPEG"


@pytest.mark.parametrize("name", mock.MOCK_DF_NAMES)
def test_every_table_passes_the_format_checker(root: Path, name: str, capsys: pytest.CaptureFixture) -> None:
    check_retrieval_dataframe_format(root / name, dataset_root=root)
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        f"'{root / name}': OK, in OML's retrieval format",
        "  train:      128 rows, 16 labels",
        "  validation: 64 rows, 8 labels, 64 queries, 64 gallery items",
    ]
    optional = {
        "df.csv": [],
        "df_with_category.csv": ["  optional:   category (6 categories)"],
        "df_with_bboxes.csv": ["  optional:   bounding boxes (192 rows with a box)"],
        "df_with_sequence.csv": ["  optional:   sequence (72 sequences)"],
    }
    assert lines[3:] == optional[name]


def test_images_are_rgb_64_with_white_background(root: Path) -> None:
    for name in ("circle_1", "square_20", "diamond_32"):
        with Image.open(root / f"images/{name}.jpg") as im:
            assert im.mode == "RGB" and im.size == (64, 64)
            array = np.asarray(im)
        # white up to JPEG's ringing near a figure (the figure is 3 pixels or more from the border)
        border = np.concatenate([array[0], array[-1], array[:, 0], array[:, -1]])
        assert border.min() >= 230 and np.median(border) == 255
        assert (array < 200).any(axis=2).sum() > 50  # a figure is drawn


def test_images_of_one_label_vary_and_labels_differ_in_colour(root: Path) -> None:
    df = pd.read_csv(root / "df_with_category.csv")
    arrays = [np.asarray(Image.open(root / p), dtype=np.int64) for p in df["path"][:8]]
    assert len({a.tobytes() for a in arrays}) == 8

    def mean_colour(path: str) -> np.ndarray:
        a = np.asarray(Image.open(root / path), dtype=np.float64)
        return a[(a != 255).any(axis=2)].mean(axis=0)

    colours = {label: mean_colour(g["path"].iloc[0]) for label, g in df.groupby("label")}
    # the 4 labels of one shape have 4 different colours (mean of the figure's pixels far apart)
    circle_labels = sorted(df.loc[df["category"] == "circle", "label"].unique())
    assert len(circle_labels) == 4
    for i, a in enumerate(circle_labels):
        for b in circle_labels[i + 1 :]:
            assert np.abs(colours[a] - colours[b]).max() > 40


def test_bboxes_are_tight_inside_and_outside_is_white(root: Path) -> None:
    df = pd.read_csv(root / "df_with_bboxes.csv")
    for column in ("x_1", "x_2", "y_1", "y_2"):
        assert df[column].dtype == np.int64
    for row in df.itertuples():
        assert 0 <= row.x_1 < row.x_2 <= 64 and 0 <= row.y_1 < row.y_2 <= 64
        # a figure's pixel has a channel well below white (its colour's smallest channel is under 100 before
        # noise), which JPEG's ringing around the figure does not reach
        figure = (np.asarray(Image.open(root / row.path)) < 160).any(axis=2)
        inside = figure[row.y_1 : row.y_2, row.x_1 : row.x_2]
        assert inside.sum() == figure.sum() > 0  # all the figure is inside the box
        # tight: every edge of the box touches the figure
        assert inside[0].any() and inside[-1].any() and inside[:, 0].any() and inside[:, -1].any()


def test_sequences_group_consecutive_images_of_a_label(root: Path) -> None:
    df = pd.read_csv(root / "df_with_sequence.csv")
    assert df["sequence"].map(type).eq(str).all()
    sizes = df.groupby("sequence").size()
    assert set(sizes) <= {2, 3}
    assert (df.groupby("sequence")["label"].nunique() == 1).all()
    assert len(sizes) == 24 * 3
    # consecutive rows: each sequence is a contiguous block
    for _, group in df.groupby("sequence"):
        assert list(group.index) == list(range(group.index.min(), group.index.max() + 1))


def test_generation_is_deterministic_and_seeded(tmp_path: Path) -> None:
    generate_mock_dataset(tmp_path / "a", seed=0)
    generate_mock_dataset(tmp_path / "b", seed=0)
    generate_mock_dataset(tmp_path / "c", seed=1)
    a, b, c = (_all_files(tmp_path / n) for n in "abc")
    assert len(a) == 192 + 4 + 1
    assert a == b
    assert a.keys() == c.keys()
    assert a["images/circle_1.jpg"] != c["images/circle_1.jpg"]
    assert a["df_with_bboxes.csv"] != c["df_with_bboxes.csv"]
    assert a["df.csv"] == c["df.csv"]  # the table without image geometry does not depend on the seed
    assert json.loads(c["manifest.json"])["seed"] == 1


def test_generation_is_fast(tmp_path: Path) -> None:
    start = time.perf_counter()
    generate_mock_dataset(tmp_path / "fast")
    assert time.perf_counter() - start < 2.0


def test_download_mock_dataset_returns_train_and_val(tmp_path: Path) -> None:
    root = tmp_path / "mock_dataset"
    df_train, df_val = download_mock_dataset(root)
    assert (root / "manifest.json").is_file()
    assert list(df_train.columns) == BASE_COLUMNS
    assert len(df_train) == 128 and len(df_val) == 64
    assert list(df_train.index) == list(range(128)) and list(df_val.index) == list(range(64))
    assert df_val["is_query"].dtype == bool and df_val["is_query"].all() and df_val["is_gallery"].all()
    assert len(df_val[df_val["is_query"]]) == 64  # boolean indexing works as in OML's examples

    _, df_val = download_mock_dataset(root, df_name="df_with_sequence.csv")
    assert "sequence" in df_val.columns

    df_train, _ = download_mock_dataset(root, df_name="df_with_bboxes.csv", global_paths=True)
    assert Path(df_train["path"][0]) == root / "images/circle_1.jpg"

    with pytest.raises(ValueError, match="df_nope.csv"):
        download_mock_dataset(root, df_name="df_nope.csv")


def test_download_regenerates_a_damaged_dataset(tmp_path: Path) -> None:
    root = tmp_path / "mock_dataset"
    download_mock_dataset(root)
    original = _all_files(root)

    (root / "images/circle_6.jpg").write_bytes(b"garbage")
    download_mock_dataset(root, check_md5=True)
    assert _all_files(root) == original

    (root / "df_with_bboxes.csv").unlink()
    download_mock_dataset(root, check_md5=False)
    assert _all_files(root) == original


def test_download_into_an_existing_folder_keeps_foreign_files(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    (root / "images").mkdir(parents=True)
    (root / "notes.txt").write_text("keep me")
    (root / "images" / "junk.jpg").write_bytes(b"junk")
    df_train, _ = download_mock_dataset(root)
    assert len(df_train) == 128
    assert (root / "notes.txt").read_text() == "keep me"
    assert len(list((root / "images").glob("*.jpg"))) == 192
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no temporary folders left behind
    assert not [p for p in root.iterdir() if p.name.startswith(".")]


def test_get_mock_dataset_root_uses_the_cache_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("OML_CACHE_DIR", str(cache))
    calls = []
    real = mock.MOCK_FIGURES

    def counting_write(root: Path, seed: int) -> list[str]:
        calls.append(seed)
        return real.write(root, seed)

    monkeypatch.setattr(mock, "MOCK_FIGURES", dataclasses.replace(real, write=counting_write))
    root = get_mock_dataset_root()
    assert root == cache / "mock_figures_v2_seed0"
    assert len(list((root / "images").glob("*.jpg"))) == 192
    assert get_mock_dataset_root() == root
    assert calls == [0]
    assert get_mock_dataset_root(seed=3) == cache / "mock_figures_v2_seed3"
    assert calls == [0, 3]
    assert sorted(p.name for p in cache.iterdir()) == ["mock_figures_v2_seed0", "mock_figures_v2_seed3"]

    other = tmp_path / "other"
    assert get_mock_dataset_root(cache_dir=other) == other / "mock_figures_v2_seed0"


def test_cache_dir_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OML_CACHE_DIR", str(tmp_path / "oml_cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert get_cache_dir() == tmp_path / "oml_cache"
    monkeypatch.delenv("OML_CACHE_DIR")
    assert get_cache_dir() == tmp_path / "xdg" / "oml"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert get_cache_dir() == tmp_path / "home" / ".cache" / "oml"


def test_a_concurrent_winner_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process finishes first while we generate: our rename fails, theirs stays, no temp is left."""
    cache = tmp_path / "cache"
    final = cache / "mock_figures_v2_seed0"
    real = mock.MOCK_FIGURES

    def racing_write(root: Path, seed: int) -> list[str]:
        real.generate(final, seed)  # "the other process" completes its dataset first
        (final / "theirs.txt").write_text("winner")
        return real.write(root, seed)

    monkeypatch.setattr(mock, "MOCK_FIGURES", dataclasses.replace(real, write=racing_write))
    assert get_mock_dataset_root(cache_dir=cache) == final
    assert (final / "theirs.txt").read_text() == "winner"
    assert [p.name for p in cache.iterdir()] == ["mock_figures_v2_seed0"]


def test_a_failed_generation_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_write(root: Path, seed: int) -> list[str]:
        (root / "images").mkdir(parents=True)
        raise RuntimeError("disk full")

    monkeypatch.setattr(mock, "MOCK_FIGURES", dataclasses.replace(mock.MOCK_FIGURES, write=failing_write))
    with pytest.raises(RuntimeError, match="disk full"):
        get_mock_dataset_root(cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []
