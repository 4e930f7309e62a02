"""oml_core.inference: features of a dataset, of image paths and of a dataframe (with its cache file)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
import torch
from oml_models import ConcatSiamese, ResnetExtractor
from oml_postprocessors import PairwiseImagesPostprocessor
from torch import Tensor, nn
from torch.utils.data import Dataset

from oml_core.builtins.transforms import get_normalisation_resize
from oml_core.caches.embeddings import CACHE_FORMAT, CACHE_MARKER, NotAnEmbeddingsCacheError
from oml_core.datasets import ImageBaseDataset, download_mock_dataset, get_mock_dataset_root
from oml_core.inference import (
    batched_inference,
    inference,
    inference_on_dataframe,
    inference_on_images,
    model_device,
)
from oml_core.registry import ConfigError
from oml_core.utils.images import imread_pil
from oml_core.utils.misc_torch import pairwise_dist

IM_SIZE = 32
TOP_N = 3


def make_extractor(seed: int = 0) -> ResnetExtractor:
    """A randomly initialised ResNet-18 extractor (seeded without touching the global RNG's state)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return ResnetExtractor(
            weights=None, arch="resnet18", gem_p=None, remove_fc=True, normalise_features=True
        )


class Counting(nn.Module):
    """Wraps an extractor and counts the images it is called on."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.n_images = 0

    def forward(self, x: Tensor) -> Tensor:
        self.n_images += len(x)
        return self.inner(x)


class Failing(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        raise RuntimeError("boom")


class NoKeyDataset(Dataset):
    """A plain torch dataset: no ``input_tensors_key`` attribute."""

    def __len__(self) -> int:
        return 2

    def __getitem__(self, item: int) -> Tensor:
        return torch.zeros(3)


@pytest.fixture()
def mock_root(oml_cache_dir: Path) -> Path:
    return get_mock_dataset_root(oml_cache_dir)


@pytest.fixture()
def extractor() -> ResnetExtractor:
    return make_extractor()


@pytest.fixture()
def transform():
    return get_normalisation_resize(im_size=IM_SIZE)


def reference_features(model: nn.Module, paths: list[Path], transform) -> Tensor:
    """Every image read, transformed and stacked; one forward pass in eval mode."""
    batch = torch.stack([transform(imread_pil(path)) for path in paths])
    was_training = model.training
    model.eval()
    with torch.no_grad():
        features = model(batch)
    model.train(was_training)
    return features


def mock_paths(root: Path) -> list[Path]:
    """20 images of the mock dataset, not in the order of their names."""
    return sorted((root / "images").glob("*.jpg"))[::-9][:20]


@pytest.mark.parametrize("batch_size", [1, 3, 128])
def test_inference_on_images_equals_one_forward_pass(batch_size, mock_root, extractor, transform) -> None:
    paths = mock_paths(mock_root)
    extractor.train()
    features = inference_on_images(extractor, paths, transform, batch_size=batch_size)
    assert extractor.training  # the mode is restored
    assert features.dtype == torch.float32 and features.device.type == "cpu"
    assert features.shape == (len(paths), extractor.feat_dim)
    torch.testing.assert_close(features, reference_features(extractor, paths, transform), atol=1e-5, rtol=0)


def test_inference_on_a_dataset(mock_root, extractor, transform) -> None:
    paths = mock_paths(mock_root)
    dataset = ImageBaseDataset(paths, transform=transform, input_tensors_key="images")
    expected = reference_features(extractor, paths, transform)
    features = inference(extractor, dataset, batch_size=7)
    torch.testing.assert_close(features, expected, atol=1e-5, rtol=0)
    on_device = inference(extractor, dataset, batch_size=7, accumulate_on_cpu=False)
    assert on_device.device == model_device(extractor)
    torch.testing.assert_close(on_device, features, atol=0, rtol=0)
    fp16_on_cpu = inference(extractor, dataset, batch_size=7, use_fp16=True)
    assert fp16_on_cpu.dtype == torch.float32
    torch.testing.assert_close(fp16_on_cpu, features, atol=0, rtol=0)  # no autocast off CUDA


def test_inference_shows_a_progress_bar_when_verbose(mock_root, extractor, transform, capsys) -> None:
    inference_on_images(extractor, mock_paths(mock_root)[:2], transform, verbose=True)
    assert "Inference" in capsys.readouterr().err
    inference_on_images(extractor, mock_paths(mock_root)[:2], transform)
    assert capsys.readouterr().err == ""


def test_an_empty_dataset_gives_no_features(extractor, transform) -> None:
    assert inference_on_images(extractor, [], transform).shape == (0, 0)


def test_the_mode_is_restored_when_the_model_fails(mock_root, transform) -> None:
    model = Failing().train()
    with pytest.raises(RuntimeError, match="boom"):
        inference_on_images(model, mock_paths(mock_root)[:2], transform)
    assert model.training
    model.eval()
    with pytest.raises(RuntimeError, match="boom"):
        inference_on_images(model, mock_paths(mock_root)[:2], transform)
    assert not model.training


def test_batched_inference_keeps_the_outputs_of_each_batch() -> None:
    outputs = batched_inference(
        nn.Identity(), list(range(5)), lambda batch, device: batch.to(device) * 2, batch_size=2
    )
    assert [out.tolist() for out in outputs] == [[0.0, 2.0], [4.0, 6.0], [8.0]]
    assert all(out.dtype == torch.float32 for out in outputs)


def test_model_device() -> None:
    from oml_postprocessors import inference as plugin_inference

    assert plugin_inference.model_device is model_device  # the plugin uses the core's
    assert model_device(nn.Identity()) == torch.device("cpu")
    assert model_device(nn.BatchNorm1d(2).to(torch.float64)) == torch.device("cpu")


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, True, None])
def test_a_bad_batch_size_is_refused(batch_size, mock_root, extractor, transform) -> None:
    paths = mock_paths(mock_root)[:2]
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1"):
        inference_on_images(extractor, paths, transform, batch_size=batch_size)
    with pytest.raises(ValueError, match=r"batch_size must be an int >= 1"):
        inference_on_dataframe(mock_root, "df.csv", extractor, transform, batch_size=batch_size)


def test_a_dataset_without_input_tensors_key_is_refused(extractor) -> None:
    with pytest.raises(TypeError, match=r"input_tensors_key attribute.*NoKeyDataset"):
        inference(extractor, NoKeyDataset(), batch_size=2)
    dataset = NoKeyDataset()
    dataset.input_tensors_key = "images"
    with pytest.raises(KeyError, match=r"no 'images' \(its input_tensors_key\)"):
        inference(extractor, dataset, batch_size=2)


class Summing(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.sum()


def test_a_model_must_return_one_row_per_item(mock_root, transform) -> None:
    paths = mock_paths(mock_root)[:2]
    with pytest.raises(
        ValueError, match=r"Summing must return one row of features per item, got the shape \(\)"
    ):
        inference_on_images(Summing(), paths, transform)
    with pytest.raises(ValueError, match=r"got the shape \(6144,\) for a batch of 2 items"):
        inference_on_images(nn.Flatten(0), paths, transform)


def test_inference_on_dataframe(mock_root, extractor, transform) -> None:
    emb_train, emb_val, df_train, df_val = inference_on_dataframe(
        mock_root, "df.csv", extractor, transform, batch_size=64
    )
    expected_train, expected_val = download_mock_dataset(mock_root, check_md5=False)
    assert emb_train.shape == (len(expected_train), extractor.feat_dim) == (128, 512)
    assert emb_val.shape == (len(expected_val), extractor.feat_dim) == (64, 512)
    for df, expected in ((df_train, expected_train), (df_val, expected_val)):
        assert isinstance(df.index, pd.RangeIndex) and df.index.start == 0
        assert df["path"].tolist() == [str(mock_root.absolute() / path) for path in expected["path"]]
        assert all(Path(path).is_absolute() for path in df["path"])
        assert df["label"].tolist() == expected["label"].tolist()
    assert set(df_train["split"]) == {"train"} and set(df_val["split"]) == {"validation"}
    features = inference_on_images(extractor, [*df_train["path"], *df_val["path"]], transform)
    torch.testing.assert_close(torch.cat([emb_train, emb_val]), features, atol=1e-5, rtol=0)


def test_inference_on_dataframe_crops_the_bounding_boxes(mock_root, extractor, transform) -> None:
    emb_train, _, df_train, _ = inference_on_dataframe(mock_root, "df_with_bboxes.csv", extractor, transform)
    boxes = [(int(r.x_1), int(r.y_1), int(r.x_2), int(r.y_2)) for r in df_train.head(5).itertuples()]
    cropped = ImageBaseDataset(df_train["path"].head(5), bboxes=boxes, transform=transform)
    torch.testing.assert_close(emb_train[:5], inference(extractor, cropped, batch_size=5), atol=1e-5, rtol=0)


def test_the_cache_file_is_written_read_back_and_recomputed_when_stale(
    tmp_path, mock_root, extractor, transform
) -> None:
    counting = Counting(extractor)
    cache = tmp_path / "cache" / "embeddings.pt"  # the folder is created

    def run(dataframe_name: str = "df.csv", root: Path = mock_root) -> tuple[Tensor, int]:
        counting.n_images = 0
        emb_train, emb_val, _, _ = inference_on_dataframe(
            root, dataframe_name, counting, transform, output_cache_path=cache, batch_size=64
        )
        return torch.cat([emb_train, emb_val]), counting.n_images

    computed, n_images = run()
    assert n_images == 192 and cache.is_file()
    assert sorted(path.name for path in cache.parent.iterdir()) == ["embeddings.pt"]  # no partial file left
    read_back, n_images = run()
    assert n_images == 0  # the extractor was not called
    assert torch.equal(read_back, computed)

    with torch.no_grad():
        extractor.model.conv1.weight.add_(0.05)  # the same class, other weights
    with pytest.warns(
        UserWarning,
        match=re.escape(
            f"{cache}: the embeddings cache was written for other data, another extractor or other transforms "
            "(another key); computing the embeddings again"
        ),
    ):
        updated, n_images = run()
    assert n_images == 192 and not torch.allclose(updated, computed)
    assert run()[1] == 0  # the file now holds the new key

    other_root = tmp_path / "dataset"  # the same dataframe in another folder: another key
    other_root.mkdir()
    (other_root / "images").symlink_to(mock_root / "images", target_is_directory=True)
    (other_root / "df.csv").write_bytes((mock_root / "df.csv").read_bytes())
    with pytest.warns(UserWarning, match=re.escape(str(cache))):
        assert run(root=other_root)[1] == 192
    assert run(root=other_root)[1] == 0
    pd.read_csv(mock_root / "df.csv").iloc[::-1].to_csv(other_root / "df.csv", index=False)  # other bytes
    with pytest.warns(UserWarning, match=re.escape(str(cache))):
        assert run(root=other_root)[1] == 192


def foreign_files(tmp_path: Path) -> dict[str, bytes]:
    """Files that are not embeddings caches: a model checkpoint, a text file, a torch file of a tensor, a
    truncated cache, and a dict of a key and embeddings with more entries."""
    checkpoint = tmp_path / "checkpoint.pt"
    torch.save(make_extractor(seed=1).state_dict(), checkpoint)
    other_dict = tmp_path / "other_dict.pt"
    torch.save({"key": "k", "embeddings": torch.zeros(192, 4), "optimizer": {}}, other_dict)
    tensor = tmp_path / "tensor.pt"
    torch.save(torch.zeros(192, 4), tensor)
    return {
        "state dict": checkpoint.read_bytes(),
        "text": b"not a torch file\n",
        "tensor": tensor.read_bytes(),
        "dict": other_dict.read_bytes(),
    }


def test_a_file_that_is_not_an_embeddings_cache_is_never_overwritten(
    tmp_path, mock_root, extractor, transform
) -> None:
    counting = Counting(extractor)
    cache = tmp_path / "model.pt"
    files = foreign_files(tmp_path)
    # a cache truncated by something else than oml (oml writes atomically): not readable as one either
    inference_on_dataframe(mock_root, "df.csv", extractor, transform, output_cache_path=tmp_path / "full.pt")
    files["truncated cache"] = (tmp_path / "full.pt").read_bytes()[:1000]
    expected_reason = {
        "state dict": "it holds a dict of 120 entries: model.bn1.bias, model.bn1.num_batches_tracked, "
        "model.bn1.running_mean, model.bn1.running_var, model.bn1.weight, ...",
        "text": "cannot be read as one: UnpicklingError: ",
        "tensor": "it holds a Tensor",
        "dict": "it holds a dict of 3 entries: embeddings, key, optimizer",
        "truncated cache": "cannot be read as one: ",
    }
    for what, content in files.items():
        cache.write_bytes(content)
        with pytest.raises(NotAnEmbeddingsCacheError) as error:
            inference_on_dataframe(mock_root, "df.csv", counting, transform, output_cache_path=cache)
        message = str(error.value)
        assert message.startswith(
            f"{cache} exists and is not an oml embeddings cache ({expected_reason[what]}"
        ), what
        assert message.endswith(
            "; it was left untouched: choose another cache path, or delete the file if it is a damaged cache"
        )
        assert isinstance(error.value, FileExistsError)
        assert cache.read_bytes() == content, what  # not a byte changed
        assert counting.n_images == 0  # refused before the extractor ran
        assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".")) == []

    folder = tmp_path / "folder.pt"
    folder.mkdir()
    with pytest.raises(
        NotAnEmbeddingsCacheError, match=re.escape(f"{folder} exists and is not an oml embeddings")
    ):
        inference_on_dataframe(mock_root, "df.csv", counting, transform, output_cache_path=folder)
    assert counting.n_images == 0 and list(folder.iterdir()) == []


def test_a_stale_cache_is_replaced_atomically(tmp_path, mock_root, extractor, transform, monkeypatch) -> None:
    cache = tmp_path / "embeddings.pt"
    old = {"key": "an older key", "embeddings": torch.ones(192, 3)}  # the format before the marker: a cache
    torch.save(old, cache)
    counting = Counting(extractor)
    with pytest.warns(
        UserWarning, match=re.escape(f"{cache}: the embeddings cache was written for other data")
    ):
        emb_train, emb_val, _, _ = inference_on_dataframe(
            mock_root, "df.csv", counting, transform, output_cache_path=cache
        )
    assert counting.n_images == 192
    written = torch.load(cache, weights_only=True)
    assert written["format"] == CACHE_MARKER and written["version"] == CACHE_FORMAT
    assert torch.equal(written["embeddings"], torch.cat([emb_train, emb_val]))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["embeddings.pt"]  # no temporary file left

    # a crash while the new cache is written leaves the old one whole, and no temporary file
    before = cache.read_bytes()
    real_save = torch.save

    def crash(obj, file, *args, **kwargs):
        real_save(obj, file, *args, **kwargs)  # written into the temporary file, not yet renamed
        raise KeyboardInterrupt

    monkeypatch.setattr("oml_core.caches.embeddings.torch.save", crash)
    with pytest.warns(UserWarning, match="another key"), pytest.raises(KeyboardInterrupt):
        inference_on_dataframe(
            mock_root, "df.csv", counting, get_normalisation_resize(40), output_cache_path=cache
        )
    assert cache.read_bytes() == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["embeddings.pt"]


def test_the_cache_key_depends_on_the_transforms(tmp_path, mock_root, extractor) -> None:
    cache = tmp_path / "embeddings.pt"
    inference_on_dataframe(
        mock_root, "df.csv", extractor, get_normalisation_resize(32), output_cache_path=cache
    )
    counting = Counting(extractor)
    with pytest.warns(UserWarning, match=re.escape(str(cache))):
        inference_on_dataframe(
            mock_root, "df.csv", counting, get_normalisation_resize(40), output_cache_path=cache
        )
    assert counting.n_images == 192


def test_inference_on_dataframe_checks_the_dataframe(tmp_path, mock_root, extractor, transform) -> None:
    with pytest.raises(ConfigError, match=r"nope\.csv.*does not exist"):
        inference_on_dataframe(mock_root, "nope.csv", extractor, transform)
    (tmp_path / "images").symlink_to(mock_root / "images", target_is_directory=True)
    pd.read_csv(mock_root / "df.csv").drop(columns=["split"]).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ConfigError, match=r"bad\.csv.*split"):
        inference_on_dataframe(tmp_path, "bad.csv", extractor, transform)


def test_the_manuals_reranking_example(mock_root, extractor, transform) -> None:
    """The manual's example of re-ranking with a (random) pairwise postprocessor, with a random-weight extractor.

    Every validation row of the mock dataset is both a query and in the gallery, so the galleries are taken by
    ``is_gallery`` (the manual's ``~is_query`` would leave none).
    """
    _, emb_val, _, df_val = inference_on_dataframe(mock_root, "df.csv", extractor, transforms=transform)

    is_query = df_val["is_query"].astype("bool").to_numpy(copy=True)
    is_gallery = df_val["is_gallery"].astype("bool").to_numpy(copy=True)
    distances = pairwise_dist(x1=emb_val[is_query], x2=emb_val[is_gallery])
    top_before = torch.topk(distances, dim=1, k=TOP_N, largest=False)[1]

    siamese = ConcatSiamese(extractor=extractor, mlp_hidden_dims=[100])
    postprocessor = PairwiseImagesPostprocessor(
        top_n=TOP_N, pairwise_model=siamese, transforms=transform, verbose=False
    )
    query_paths = df_val["path"][is_query].values
    gallery_paths = df_val["path"][is_gallery].values
    distances_upd = postprocessor.process(distances=distances, queries=query_paths, galleries=gallery_paths)

    assert distances_upd.shape == distances.shape
    top_after = torch.topk(distances_upd, dim=1, k=TOP_N, largest=False)[1]
    assert torch.equal(top_after.sort(dim=1).values, top_before.sort(dim=1).values)  # a permutation of each
    is_rest = torch.ones_like(distances, dtype=torch.bool).scatter_(1, top_before, False)
    rest_before = distances[is_rest].view(len(distances), -1)
    rest_after = distances_upd[is_rest].view(len(distances), -1)
    offsets = rest_after - rest_before  # one offset per row: the rest keeps its order
    torch.testing.assert_close(offsets, offsets[:, :1].expand_as(offsets), atol=1e-5, rtol=0)
    new_top = distances_upd.gather(1, top_before)
    assert ((new_top >= 0) & (new_top <= 1)).all()  # ConcatSiamese.predict: sigmoid scores
    assert (rest_after.min(dim=1).values > new_top.max(dim=1).values).all()
