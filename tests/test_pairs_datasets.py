"""EmbeddingPairsDataset and ImagePairsDataset (oml.datasets.pairs)."""

from __future__ import annotations

import inspect
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

from oml_core.datasets import EmbeddingPairsDataset, ImagePairsDataset
from oml_core.interfaces.datasets import IPairsDataset
from oml_core.utils.images import imread_pil

# ----------------------------------------------------------------------------------------- embeddings


def test_embedding_pairs_items_and_length() -> None:
    e1 = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    e2 = torch.tensor([[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]])
    dataset = EmbeddingPairsDataset(e1, e2)
    assert isinstance(dataset, IPairsDataset)
    assert len(dataset) == 3
    item = dataset[1]
    assert set(item) == {"input_tensors_1", "input_tensors_2", "idx"}
    assert item["input_tensors_1"].tolist() == [3.0, 4.0]
    assert item["input_tensors_2"].tolist() == [9.0, 10.0]
    assert item["idx"] == 1
    assert (dataset.pairs_1st_key, dataset.pairs_2nd_key, dataset.index_key) == (
        "input_tensors_1",
        "input_tensors_2",
        "idx",
    )
    assert (dataset.pair_1st_key, dataset.pair_2nd_key) == ("input_tensors_1", "input_tensors_2")

    batch = next(iter(DataLoader(dataset, batch_size=2)))
    assert batch["input_tensors_1"].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert batch["input_tensors_2"].tolist() == [[7.0, 8.0], [9.0, 10.0]]
    assert batch["idx"].tolist() == [0, 1]


def test_embedding_pairs_custom_keys() -> None:
    dataset = EmbeddingPairsDataset(torch.zeros(2, 3), torch.ones(2, 3), "a", "b", "i")
    assert dataset[0]["a"].tolist() == [0.0, 0.0, 0.0]
    assert dataset[0]["b"].tolist() == [1.0, 1.0, 1.0]
    assert dataset[0]["i"] == 0
    assert (dataset.pairs_1st_key, dataset.pair_2nd_key, dataset.index_key) == ("a", "b", "i")


def test_embedding_pairs_bad_inputs() -> None:
    with pytest.raises(ValueError, match=r"embeddings1 has the shape \(3, 2\) and embeddings2 \(2, 2\)"):
        EmbeddingPairsDataset(torch.zeros(3, 2), torch.zeros(2, 2))
    with pytest.raises(ValueError, match=r"\(3, 2\) and embeddings2 \(3, 4\)"):
        EmbeddingPairsDataset(torch.zeros(3, 2), torch.zeros(3, 4))
    with pytest.raises(ValueError, match=r"embeddings2 must be at least 2-d \[N, D\], got the shape \(3,\)"):
        EmbeddingPairsDataset(torch.zeros(3, 2), torch.zeros(3))
    with pytest.raises(TypeError, match="embeddings1 must be a torch.Tensor, got list"):
        EmbeddingPairsDataset([[0.0]], torch.zeros(1, 1))  # type: ignore[arg-type]
    dataset = EmbeddingPairsDataset(torch.zeros(2, 2), torch.zeros(2, 2))
    for idx in (2, -1):
        with pytest.raises(IndexError, match=f"index {idx} is out of range for 2 pairs"):
            dataset[idx]


# --------------------------------------------------------------------------------------------- images

COLOURS = {"a.png": (10, 20, 30), "b.png": (40, 50, 60), "c.png": (70, 80, 90)}


@pytest.fixture()
def images(tmp_path: Path) -> Path:
    """Three 4x6 (HxW) images of one colour each; pixel (0, 0) of ``c.png`` is white."""
    for name, colour in COLOURS.items():
        array = np.empty((4, 6, 3), dtype=np.uint8)
        array[:] = colour
        if name == "c.png":
            array[0, 0] = 255
        Image.fromarray(array).save(tmp_path / name)
    return tmp_path


class CountingReader:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, path: Path | str | bytes) -> Image.Image:
        self.calls.append(Path(str(path)).name)
        return imread_pil(path)


def as_array(image: Image.Image) -> torch.Tensor:
    """A transform that keeps the raw pixels: ``[H, W, 3]`` uint8."""
    return torch.from_numpy(np.array(image))


def test_image_pairs_items(images: Path) -> None:
    paths1 = [images / "a.png", images / "b.png"]
    paths2 = [images / "b.png", images / "c.png"]
    dataset = ImagePairsDataset(paths1, paths2, transform=as_array)
    assert isinstance(dataset, IPairsDataset) and len(dataset) == 2
    item = dataset[1]
    assert set(item) == {"input_tensors_1", "input_tensors_2", "idx"} and item["idx"] == 1
    assert item["input_tensors_1"].shape == (4, 6, 3)
    assert item["input_tensors_1"][2, 3].tolist() == [40, 50, 60]
    assert item["input_tensors_2"][2, 3].tolist() == [70, 80, 90]
    assert item["input_tensors_2"][0, 0].tolist() == [255, 255, 255]


def test_image_pairs_default_transform_normalises(images: Path) -> None:
    dataset = ImagePairsDataset(
        [str(images / "a.png")], [str(images / "c.png")], pair_1st_key="x", index_key="i"
    )
    item = dataset[0]
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    expected = torch.tensor([(v / 255 - m) / s for v, m, s in zip((10, 20, 30), mean, std)])
    assert item["x"].shape == (3, 4, 6) and item["i"] == 0
    torch.testing.assert_close(item["x"][:, 1, 1], expected)
    white = torch.tensor([(1 - m) / s for m, s in zip(mean, std)])
    torch.testing.assert_close(item["input_tensors_2"][:, 0, 0], white)


def test_image_pairs_bboxes_crop_each_side(images: Path) -> None:
    paths = [images / "a.png", images / "c.png"]
    dataset = ImagePairsDataset(paths, paths[::-1], bboxes1=[(1, 0, 4, 2), None], transform=as_array)
    assert dataset[0]["input_tensors_1"].shape == (2, 3, 3)  # x 1..4, y 0..2
    assert dataset[0]["input_tensors_2"].shape == (4, 6, 3)
    dataset = ImagePairsDataset(paths, paths, bboxes2=[None, (0, 0, 1, 1)], transform=as_array)
    assert dataset[1]["input_tensors_1"].shape == (4, 6, 3)
    assert dataset[1]["input_tensors_2"].tolist() == [[[255, 255, 255]]]


def test_image_pairs_read_nothing_at_construction_and_share_one_cache(images: Path) -> None:
    reader = CountingReader()
    paths1 = [images / "a.png", images / "b.png"]
    paths2 = [images / "b.png", images / "c.png"]
    dataset = ImagePairsDataset(paths1, paths2, f_imread=reader, cache_size=4)
    assert reader.calls == []
    dataset[0]
    assert reader.calls == ["a.png", "b.png"]
    dataset[1]  # b.png was read for the 2nd side of pair 0: the cache serves the 1st side of pair 1
    assert reader.calls == ["a.png", "b.png", "c.png"]

    reader = CountingReader()
    dataset = ImagePairsDataset(paths1, paths2, f_imread=reader)
    dataset[0]
    dataset[1]
    assert reader.calls == ["a.png", "b.png", "b.png", "c.png"]


def test_image_pairs_pickle_as_for_dataloader_workers(images: Path) -> None:
    paths1, paths2 = [images / "a.png", images / "b.png"], [images / "b.png", images / "c.png"]
    dataset = ImagePairsDataset(paths1, paths2, f_imread=CountingReader(), cache_size=4, transform=as_array)
    dataset[0]
    clone = pickle.loads(pickle.dumps(dataset))
    clone[0]  # the clone starts with an empty cache, still shared by both sides
    clone[1]
    assert clone._first.f_imread.calls == ["a.png", "b.png", "a.png", "b.png", "c.png"]
    assert torch.equal(clone[1]["input_tensors_2"], dataset[1]["input_tensors_2"])


def test_image_pairs_missing_files_fail_on_getitem(tmp_path: Path) -> None:
    dataset = ImagePairsDataset([tmp_path / "x.png"], [tmp_path / "y.png"])
    assert len(dataset) == 1
    with pytest.raises(FileNotFoundError, match="x.png"):
        dataset[0]


def test_image_pairs_bad_inputs(images: Path) -> None:
    paths = [images / "a.png", images / "b.png"]
    with pytest.raises(ValueError, match="paths1 has 2 paths and paths2 1; they must be equal"):
        ImagePairsDataset(paths, paths[:1])
    with pytest.raises(ValueError, match=r"the 1st images \(paths1, bboxes1\): .*1 bboxes for 2 paths"):
        ImagePairsDataset(paths, paths, bboxes1=[None])
    with pytest.raises(ValueError, match=r"the 2nd images \(paths2, bboxes2\): .*item 1 \(3, 0, 3, 2\)"):
        ImagePairsDataset(paths, paths, bboxes2=[None, (3, 0, 3, 2)])
    with pytest.raises(ValueError, match="cache_size must be >= 0"):
        ImagePairsDataset(paths, paths, cache_size=-1)
    with pytest.raises(IndexError, match="index 2 is out of range for 2 pairs"):
        ImagePairsDataset(paths, paths)[2]


def test_signatures_follow_the_manual() -> None:
    def described(cls: type) -> list[tuple[str, object]]:
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
        return [(p.name, p.default) for p in parameters]

    empty = inspect.Parameter.empty
    assert described(EmbeddingPairsDataset) == [
        ("embeddings1", empty),
        ("embeddings2", empty),
        ("pair_1st_key", "input_tensors_1"),
        ("pair_2nd_key", "input_tensors_2"),
        ("index_key", "idx"),
    ]
    # the manual's f_imread default is OML's imread_pillow; here None stands for imread_pil
    assert described(ImagePairsDataset) == [
        ("paths1", empty),
        ("paths2", empty),
        ("bboxes1", None),
        ("bboxes2", None),
        ("transform", None),
        ("f_imread", None),
        ("pair_1st_key", "input_tensors_1"),
        ("pair_2nd_key", "input_tensors_2"),
        ("index_key", "idx"),
        ("cache_size", 0),
    ]
