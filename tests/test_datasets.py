"""Image datasets and image reading."""

from __future__ import annotations

import inspect
import io
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from oml_core.builtins.transforms import NormaliseResize
from oml_core.datasets import (
    ImageBaseDataset,
    ImageLabeledDataset,
    ImageQueryGalleryDataset,
    ImageQueryGalleryLabeledDataset,
    generate_mock_dataset,
    get_retrieval_images_datasets,
)
from oml_core.interfaces.datasets import (
    ILabeledDataset,
    IQueryGalleryDataset,
    IQueryGalleryLabeledDataset,
    IVisualizableDataset,
)
from oml_core.utils.images import imread_pil


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("datasets") / "figures"
    generate_mock_dataset(path, seed=0)
    return path


def _read_csv(root: Path, name: str, split: str | None = None) -> pd.DataFrame:
    df = pd.read_csv(root / name)
    if split is not None:
        df = df[df["split"] == split].reset_index(drop=True)
    if split == "validation":
        df["is_query"] = df["is_query"].astype(bool)
        df["is_gallery"] = df["is_gallery"].astype(bool)
    return df


IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _normalised(image: np.ndarray) -> torch.Tensor:
    """The naive transform=None of OML: ``(pixel / 255 - mean[c]) / std[c]``, channels first."""
    out = np.empty((3, *image.shape[:2]), dtype=np.float32)
    for c in range(3):
        out[c] = (image[:, :, c].astype(np.float32) / 255 - IMAGENET_MEAN[c]) / IMAGENET_STD[c]
    return torch.from_numpy(out)


class CountingReader:
    """An ``f_imread`` that counts its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, path: Path | str | bytes) -> Image.Image:
        self.calls.append(str(path))
        return imread_pil(path)


# ----------------------------------------------------------------------------------------------- imread


def test_imread_pil_reads_paths_and_bytes_as_rgb(tmp_path: Path) -> None:
    rgba = np.zeros((5, 7, 4), dtype=np.uint8)
    rgba[..., 0] = 200
    rgba[..., 3] = 255
    Image.fromarray(rgba, mode="RGBA").save(tmp_path / "a.png")
    Image.fromarray(np.full((4, 3), 77, dtype=np.uint8), mode="L").save(tmp_path / "g.png")

    image = imread_pil(tmp_path / "a.png")
    assert image.mode == "RGB" and image.size == (7, 5)
    assert np.asarray(image)[0, 0].tolist() == [200, 0, 0]
    assert np.asarray(imread_pil(str(tmp_path / "g.png")))[0, 0].tolist() == [77, 77, 77]
    from_bytes = imread_pil((tmp_path / "a.png").read_bytes())
    assert np.array_equal(np.asarray(from_bytes), np.asarray(image))


def test_imread_pil_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.png"):
        imread_pil(tmp_path / "nope.png")
    (tmp_path / "broken.png").write_bytes(b"not an image at all")
    with pytest.raises(OSError, match="broken.png"):
        imread_pil(tmp_path / "broken.png")
    (tmp_path / "folder").mkdir()
    with pytest.raises(OSError, match="folder"):
        imread_pil(tmp_path / "folder")
    with pytest.raises(OSError, match="19 bytes"):
        imread_pil(b"not an image at all")
    with pytest.raises(TypeError):
        imread_pil(123)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------------- labeled


def test_labeled_dataset_items(root: Path) -> None:
    df = _read_csv(root, "df_with_category.csv", "train")
    dataset = ImageLabeledDataset(df, dataset_root=root)
    assert isinstance(dataset, ILabeledDataset) and isinstance(dataset, IVisualizableDataset)
    assert len(dataset) == 128

    item = dataset[9]
    keys = {"input_tensors", "idx", "labels", "paths", "categories", "category", "x1", "y1", "x2", "y2"}
    assert set(item) == keys  # the category under oml's key and OML's
    tensor = item["input_tensors"]
    assert tensor.dtype == torch.float32 and tensor.shape == (3, 64, 64)
    # transform=None: "only normalisation and casting to tensor" (ImageNet mean/std, as OML does)
    expected = _normalised(np.asarray(Image.open(root / df["path"][9])))
    torch.testing.assert_close(tensor, expected)
    white = [(1 - m) / s for m, s in zip(IMAGENET_MEAN, IMAGENET_STD)]
    torch.testing.assert_close(tensor[:, 0, 0], torch.tensor(white))  # the white background
    assert item["idx"] == 9
    assert item["labels"] == 1 and isinstance(item["labels"], int)
    assert item["paths"] == str(root / "images/circle_10.jpg")
    assert item["categories"] == item["category"] == df["category"][9]
    assert (item["x1"], item["y1"], item["x2"], item["y2"]) == (0, 0, 64, 64)

    assert np.array_equal(dataset.get_labels(), np.repeat(np.arange(16), 8))
    label2category = dataset.get_label2category()
    assert label2category is not None and len(label2category) == 16
    assert label2category[1] == df["category"][9]


def test_labeled_dataset_without_optional_columns(root: Path) -> None:
    dataset = ImageLabeledDataset(_read_csv(root, "df.csv", "train"), dataset_root=root)
    assert "categories" not in dataset[0] and "sequence" not in dataset[0]
    assert dataset.get_label2category() is None

    df = _read_csv(root, "df_with_sequence.csv", "train")
    dataset = ImageLabeledDataset(df, dataset_root=root, sequence_key="seq", labels_key="y", index_key="i")
    item = dataset[4]
    assert item["seq"] == "seq_00_1" and item["y"] == 0 and item["i"] == 4
    assert "sequence" not in ImageLabeledDataset(df, dataset_root=root, sequence_key=None)[0]


def test_transform_and_custom_keys(root: Path) -> None:
    df = _read_csv(root, "df.csv", "train")
    dataset = ImageLabeledDataset(df, dataset_root=root, transform=NormaliseResize(32), input_tensors_key="x")
    assert dataset[0]["x"].shape == (3, 32, 32)
    assert float(dataset[0]["x"].max()) > 2.0  # normalised: white becomes (1 - mean) / std


def test_global_paths_and_index_not_starting_at_zero(root: Path) -> None:
    df = _read_csv(root, "df.csv")
    df = df[df["split"] == "validation"]  # index 128..191, not reset
    df["path"] = [str(root / p) for p in df["path"]]
    dataset = ImageQueryGalleryLabeledDataset(df)
    assert dataset[0]["labels"] == 16 and dataset[0]["paths"] == str(root / "images/circle_17.jpg")
    assert np.array_equal(dataset.get_labels(), np.repeat(np.arange(16, 24), 8))


def test_dataloader_collates_items(root: Path) -> None:
    df = _read_csv(root, "df_with_sequence.csv", "validation")
    dataset = ImageQueryGalleryLabeledDataset(df, dataset_root=root)
    batch = next(iter(DataLoader(dataset, batch_size=4, shuffle=False)))
    assert batch["input_tensors"].shape == (4, 3, 64, 64)
    assert batch["labels"].tolist() == [16, 16, 16, 16]
    assert batch["idx"].tolist() == [0, 1, 2, 3]
    assert batch["is_query"].tolist() == [True] * 4
    assert batch["sequence"] == ["seq_16_0", "seq_16_0", "seq_16_0", "seq_16_1"]


# ------------------------------------------------------------------------------------ query / gallery


def test_query_gallery_labeled_ids_and_items(root: Path) -> None:
    df = _read_csv(root, "df_with_category.csv", "validation")
    dataset = ImageQueryGalleryLabeledDataset(df, dataset_root=root)
    assert isinstance(dataset, IQueryGalleryLabeledDataset)
    assert torch.equal(dataset.get_query_ids(), torch.arange(64))
    assert dataset.get_gallery_ids().dtype == torch.int64

    df = df.copy()
    df["is_query"] = [i % 2 == 0 for i in range(64)]
    df["is_gallery"] = [1 if i < 10 else 0 for i in range(64)]  # 1/0 are accepted as well
    dataset = ImageQueryGalleryLabeledDataset(df, dataset_root=root)
    assert torch.equal(dataset.get_query_ids(), torch.arange(0, 64, 2))
    assert torch.equal(dataset.get_gallery_ids(), torch.arange(10))
    item = dataset[11]
    assert item["is_query"] is False and item["is_gallery"] is False
    assert item["labels"] == 17 and item["categories"] == df["category"][11]
    assert dataset[10]["is_query"] is True


def test_query_gallery_flags_read_from_csv_strings(root: Path) -> None:
    df = pd.read_csv(root / "df.csv").iloc[128:132].reset_index(drop=True)
    df["is_query"] = ["True", "False", "1", "0"]
    dataset = ImageQueryGalleryLabeledDataset(df, dataset_root=root)
    assert dataset.get_query_ids().tolist() == [0, 2]
    assert dataset.get_gallery_ids().tolist() == [0, 1, 2, 3]


def test_query_gallery_unlabeled(root: Path) -> None:
    df = _read_csv(root, "df_with_bboxes.csv", "validation").drop(columns=["label"])
    dataset = ImageQueryGalleryDataset(df, dataset_root=root)
    assert isinstance(dataset, IQueryGalleryDataset) and not isinstance(dataset, ILabeledDataset)
    item = dataset[3]
    assert "labels" not in item
    assert item["is_query"] is True and item["idx"] == 3
    assert item["input_tensors"].shape == (3, df["y_2"][3] - df["y_1"][3], df["x_2"][3] - df["x_1"][3])
    assert torch.equal(dataset.get_gallery_ids(), torch.arange(64))
    assert dataset.visualize(3, (255, 0, 0)).shape == (64, 64, 3)


# ------------------------------------------------------------------------------------------- bboxes


def test_bbox_cropping(root: Path) -> None:
    df = _read_csv(root, "df_with_bboxes.csv", "train")
    df.loc[5, ["x_1", "x_2", "y_1", "y_2"]] = np.nan  # a row without a box uses the whole image
    dataset = ImageLabeledDataset(df, dataset_root=root)
    for i in (0, 7, 100):
        row = df.iloc[i]
        x1, x2, y1, y2 = (int(row[c]) for c in ("x_1", "x_2", "y_1", "y_2"))
        item = dataset[i]
        assert item["input_tensors"].shape == (3, y2 - y1, x2 - x1)
        full = np.asarray(Image.open(root / row["path"]))
        torch.testing.assert_close(item["input_tensors"], _normalised(full[y1:y2, x1:x2]))
        assert (item["x1"], item["y1"], item["x2"], item["y2"]) == (x1, y1, x2, y2)
    assert dataset[5]["input_tensors"].shape == (3, 64, 64)
    assert dataset.bboxes is not None and dataset.bboxes[5] is None


def test_bbox_cropping_with_an_array_reader(root: Path) -> None:
    df = _read_csv(root, "df_with_bboxes.csv", "train")

    def imread_array(path: Path | str | bytes) -> np.ndarray:
        return np.asarray(imread_pil(path))

    dataset = ImageLabeledDataset(df, dataset_root=root, f_imread=imread_array)
    reference = ImageLabeledDataset(df, dataset_root=root)
    assert torch.equal(dataset[3]["input_tensors"], reference[3]["input_tensors"])
    assert dataset.visualize(3).dtype == np.uint8


def test_visualize_draws_the_bbox(root: Path) -> None:
    df = _read_csv(root, "df_with_bboxes.csv", "train")
    with_box = ImageLabeledDataset(df, dataset_root=root)
    image = with_box.visualize(2, color=(255, 0, 0))
    assert image.shape == (64, 64, 3) and image.dtype == np.uint8
    x1, x2, y1, y2 = (int(df[c][2]) for c in ("x_1", "x_2", "y_1", "y_2"))
    assert image[y1, x1].tolist() == [255, 0, 0] and image[y2 - 1, x2 - 1].tolist() == [255, 0, 0]
    assert image[y1, (x1 + x2) // 2].tolist() == [255, 0, 0]

    without_box = ImageLabeledDataset(_read_csv(root, "df.csv", "train"), dataset_root=root)
    plain = without_box.visualize(2, color=(255, 0, 0))
    assert np.array_equal(plain, np.asarray(Image.open(root / df["path"][2])))


def test_base_dataset_from_paths(root: Path) -> None:
    paths = ["images/circle_1.jpg", "images/circle_2.jpg"]
    dataset = ImageBaseDataset(
        paths, dataset_root=root, bboxes=[(1, 2, 11, 7), None], extra_data={"weights": [0.5, 2.0]}
    )
    assert isinstance(dataset, IVisualizableDataset)
    assert dataset[0]["input_tensors"].shape == (3, 5, 10)
    assert dataset[1]["input_tensors"].shape == (3, 64, 64)
    assert dataset[1]["weights"] == 2.0
    assert dataset.paths == [root / p for p in paths]
    with pytest.raises(IndexError):
        dataset[2]
    with pytest.raises(ValueError, match="2 paths"):
        ImageBaseDataset(paths, bboxes=[None])
    with pytest.raises(ValueError, match="extra_data\\['w'\\]"):
        ImageBaseDataset(paths, extra_data={"w": [1]})
    with pytest.raises(ValueError, match="item 1"):
        ImageBaseDataset(paths, bboxes=[None, (5, 0, 5, 3)])
    with pytest.raises(ValueError, match="outside the image"):
        ImageBaseDataset(paths, dataset_root=root, bboxes=[(70, 0, 80, 10), None])[0]


# ---------------------------------------------------------------------------------- lazy and cache


def test_construction_reads_no_image_and_a_missing_file_fails_on_getitem(tmp_path: Path) -> None:
    df = pd.DataFrame(
        {
            "label": [0, 0, 1],
            "path": ["a.png", "b.png", "c.png"],
            "is_query": [True, True, True],
            "is_gallery": [True, True, True],
        }
    )
    reader = CountingReader()
    dataset = ImageQueryGalleryLabeledDataset(df, dataset_root=tmp_path / "nowhere", f_imread=reader)
    assert len(dataset) == 3 and reader.calls == []
    assert dataset.get_labels().tolist() == [0, 0, 1]
    with pytest.raises(FileNotFoundError, match="b.png"):
        dataset[1]

    def bad_reader(path: Path | str | bytes) -> Image.Image:
        raise ValueError("boom")

    dataset = ImageLabeledDataset(df, dataset_root=tmp_path, f_imread=bad_reader)
    with pytest.raises(OSError, match="c.png.*boom"):
        dataset[2]


def test_lru_cache_counts_reads(root: Path) -> None:
    df = _read_csv(root, "df.csv", "train")

    reader = CountingReader()
    dataset = ImageLabeledDataset(df, dataset_root=root, f_imread=reader, cache_size=2)
    for i in (0, 0, 1, 0, 2, 0, 1):
        dataset[i]
    # 0 (read), 0 (hit), 1 (read), 0 (hit), 2 (read, evicts 1), 0 (hit), 1 (read)
    assert [Path(p).name for p in reader.calls] == [
        "circle_1.jpg",
        "circle_2.jpg",
        "circle_3.jpg",
        "circle_2.jpg",
    ]
    first = dataset[0]["input_tensors"].clone()
    first_again = dataset[0]["input_tensors"]
    assert torch.equal(first, first_again)  # the cached image is not altered by the crop or transform

    reader = CountingReader()
    dataset = ImageLabeledDataset(df, dataset_root=root, f_imread=reader, cache_size=0)
    for i in (0, 0, 1):
        dataset[i]
    dataset.visualize(0)
    assert len(reader.calls) == 4


def test_dataset_with_a_cache_pickles_without_its_content(root: Path) -> None:
    dataset = ImageLabeledDataset(_read_csv(root, "df.csv", "train"), dataset_root=root, cache_size=4)
    dataset[0]
    clone = pickle.loads(pickle.dumps(dataset))
    assert clone._cache is not None and len(clone._cache) == 0 and clone._cache.maxsize == 4
    assert torch.equal(clone[0]["input_tensors"], dataset[0]["input_tensors"])


# ------------------------------------------------------------------------------------------ errors


def _df(**columns: Any) -> pd.DataFrame:
    base = {
        "label": [0, 1],
        "path": ["a.png", "b.png"],
        "is_query": [True, False],
        "is_gallery": [True, True],
    }
    base.update(columns)
    return pd.DataFrame({k: v for k, v in base.items() if v is not None})


def test_missing_columns_are_named() -> None:
    with pytest.raises(ValueError, match="'label'"):
        ImageLabeledDataset(_df(label=None))
    with pytest.raises(ValueError, match="'path'"):
        ImageLabeledDataset(_df(path=None))
    with pytest.raises(ValueError, match="'is_query'"):
        ImageQueryGalleryLabeledDataset(_df(is_query=None))
    with pytest.raises(ValueError, match="'is_gallery'"):
        ImageQueryGalleryDataset(_df(is_gallery=None))
    with pytest.raises(ValueError, match="'path'"):
        ImageQueryGalleryDataset(_df(path=None))
    with pytest.raises(TypeError, match="DataFrame"):
        ImageLabeledDataset({"label": [0], "path": ["a"]})  # type: ignore[arg-type]


def test_bad_values_are_named() -> None:
    with pytest.raises(ValueError, match="ImageLabeledDataset: column 'label': an empty value at row 1$"):
        ImageLabeledDataset(_df(label=[0, None]))
    with pytest.raises(ValueError, match="'path'.*at row 0$"):
        ImageLabeledDataset(_df(path=["", "b.png"]))
    with pytest.raises(ValueError, match="'path'.*in 2 rows: rows 0, 1$"):
        ImageLabeledDataset(_df(path=["  ", None]))
    with pytest.raises(ValueError, match="'is_query'.*at row 1 \\(None\\)"):
        ImageQueryGalleryLabeledDataset(_df(is_query=[True, None]))
    with pytest.raises(ValueError, match="'is_gallery'.*at row 0 \\('yes'\\)"):
        ImageQueryGalleryDataset(_df(is_gallery=["yes", True]).drop(columns=["label"]))
    with pytest.raises(ValueError, match="'y_2' missing"):
        ImageLabeledDataset(_df(x_1=[0, 0], x_2=[5, 5], y_1=[0, 0]))
    with pytest.raises(ValueError, match="'x_1', 'x_2'.*at row 1 \\(x_1=9, x_2=5\\)"):
        ImageLabeledDataset(_df(x_1=[0, 9], x_2=[5, 5], y_1=[0, 0], y_2=[3, 3]))
    with pytest.raises(ValueError, match="incomplete.*in 2 rows: rows 0 \\(empty y_1\\), 1 \\(empty x_2\\)"):
        ImageLabeledDataset(_df(x_1=[0, 0], x_2=[5, None], y_1=[None, 0], y_2=[3, 3]))
    with pytest.raises(ValueError, match="'categories'"):
        ImageLabeledDataset(_df(category=["a", "b"]), extra_data={"categories": [1, 2]})


# ----------------------------------------------------------------------------------------- helpers


def test_get_retrieval_images_datasets(root: Path) -> None:
    train, valid = get_retrieval_images_datasets(root, dataframe_name="df_with_category.csv")
    assert isinstance(train, ImageLabeledDataset) and isinstance(valid, ImageQueryGalleryLabeledDataset)
    assert len(train) == 128 and len(valid) == 64
    assert sorted(set(train.get_labels().tolist())) == list(range(16))
    assert sorted(set(valid.get_labels().tolist())) == list(range(16, 24))
    assert valid.get_query_ids().tolist() == list(range(64))
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        get_retrieval_images_datasets(root, dataframe_name="nope.csv")


def test_get_retrieval_images_datasets_checks_the_format(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    get_retrieval_images_datasets(root, dataframe_name="df_with_bboxes.csv")
    assert capsys.readouterr().out.startswith(
        f"'{root / 'df_with_bboxes.csv'}': OK, in OML's retrieval format"
    )
    get_retrieval_images_datasets(root, verbose=False)
    assert capsys.readouterr().out == ""

    df = pd.read_csv(root / "df.csv")
    df.loc[130, "is_gallery"] = "maybe"
    df.to_csv(tmp_path / "df_bad.csv", index=False)  # an absolute dataframe_name is taken as it is
    with pytest.raises(
        ValueError, match="df_bad.csv': column 'is_gallery': a non-boolean value at row 130 \\('maybe'\\)"
    ):
        get_retrieval_images_datasets(root, dataframe_name=str(tmp_path / "df_bad.csv"))


def _described(cls: type) -> list[tuple[str, object]]:
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    return [(p.name, p.default) for p in parameters]


_EMPTY = inspect.Parameter.empty
_BOX_KEYS = [("x1_key", "x1"), ("x2_key", "x2"), ("y1_key", "y1"), ("y2_key", "y2")]
_READING = [("transform", None), ("f_imread", None), ("cache_size", 0)]
# the manual's parameters, in its order, with its defaults (oml.datasets.images)
MANUAL_SIGNATURES: dict[type, list[tuple[str, object]]] = {
    ImageBaseDataset: [
        ("paths", _EMPTY),
        ("dataset_root", None),
        ("bboxes", None),
        ("extra_data", None),
        *_READING,
        ("input_tensors_key", "input_tensors"),
        ("index_key", "idx"),
        ("paths_key", "paths"),
        *_BOX_KEYS,
    ],
    ImageLabeledDataset: [
        ("df", _EMPTY),
        ("extra_data", None),
        ("dataset_root", None),
        *_READING,
        ("input_tensors_key", "input_tensors"),
        ("labels_key", "labels"),
        ("index_key", "idx"),
        ("paths_key", "paths"),
        ("categories_key", "categories"),
        ("sequence_key", "sequence"),
        *_BOX_KEYS,
    ],
    ImageQueryGalleryLabeledDataset: [
        ("df", _EMPTY),
        ("extra_data", None),
        ("dataset_root", None),
        *_READING,
        ("input_tensors_key", "input_tensors"),
        ("labels_key", "labels"),
        ("paths_key", "paths"),
        ("categories_key", "categories"),
        ("sequence_key", "sequence"),
        *_BOX_KEYS,
        ("is_query_key", "is_query"),
        ("is_gallery_key", "is_gallery"),
    ],
    ImageQueryGalleryDataset: [
        ("df", _EMPTY),
        ("extra_data", None),
        ("dataset_root", None),
        *_READING,
        ("input_tensors_key", "input_tensors"),
        ("paths_key", "paths"),
        ("categories_key", "categories"),
        ("sequence_key", "sequence"),
        *_BOX_KEYS,
        ("is_query_key", "is_query"),
        ("is_gallery_key", "is_gallery"),
    ],
}


@pytest.mark.parametrize("cls", list(MANUAL_SIGNATURES), ids=lambda cls: cls.__name__)
def test_signatures_follow_the_manual(cls: type) -> None:
    """The manual's parameters come first, in its order and with its defaults (positional calls work); the
    query/gallery datasets add ``index_key="idx"`` at the end."""
    expected = MANUAL_SIGNATURES[cls]
    actual = _described(cls)
    assert actual[: len(expected)] == expected
    assert actual[len(expected) :] == (
        [] if cls in (ImageBaseDataset, ImageLabeledDataset) else [("index_key", "idx")]
    )


def test_custom_keys_of_the_query_gallery_datasets(root: Path) -> None:
    df = _read_csv(root, "df_with_category.csv", "validation")
    keys = {
        "labels_key": "y",
        "categories_key": "c",
        "is_query_key": "q",
        "is_gallery_key": "g",
        "paths_key": "p",
    }
    item = ImageQueryGalleryLabeledDataset(df, dataset_root=root, index_key="i", x1_key="left", **keys)[5]
    # the category under the custom key and OML's "category"
    assert set(item) == {"input_tensors", "i", "y", "p", "c", "category", "q", "g", "left", "y1", "x2", "y2"}
    assert item["y"] == 16 and item["i"] == 5 and item["q"] is True and item["left"] == 0
    del keys["labels_key"]
    item = ImageQueryGalleryDataset(df, dataset_root=root, input_tensors_key="x", **keys)[5]
    assert set(item) == {"x", "idx", "p", "c", "category", "q", "g", "x1", "y1", "x2", "y2"}


def test_pil_image_round_trip_through_bytes_reader(root: Path) -> None:
    data = (root / "images/circle_1.jpg").read_bytes()
    dataset = ImageBaseDataset(["x"], f_imread=lambda _: imread_pil(io.BytesIO(data).getvalue()))
    assert dataset[0]["input_tensors"].shape == (3, 64, 64)
