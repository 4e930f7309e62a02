"""``GalleryIndex`` (:mod:`oml_core.index`): search equals a naive search; items, ids and labels; images through a
registered extractor; a dataframe's rows and the calibration on its validation split (against oml's own
retrieval); self and sequence exclusion in the calibration (worked by hand); save and load round trips; a
folder never written over; foreign or corrupt folders as one-line errors naming the file; and a knn backend of
a plugin (a brute-force ``IKnnIndex`` defined here, registered on a fresh ``Registry``)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import torch
from PIL import Image
from torch import LongTensor, Tensor, nn

from oml_core import hookimpl
from oml_core.datasets import ImageQueryGalleryLabeledDataset
from oml_core.index import CalibrationError, GalleryIndex, GalleryIndexError, calibrate_rr
from oml_core.index.integrity import first_difference, rebuilt_spec
from oml_core.index.manifest import file_digest
from oml_core.index.queries import collect_queries
from oml_core.interfaces.datasets import IDatasetComponent, ILabeledDataset
from oml_core.interfaces.knn import IKnnIndex, KnnSearchResult
from oml_core.interfaces.models import IExtractor
from oml_core.knn.exact import ExactKnnIndex
from oml_core.registry import Registry, UnknownNameError
from oml_core.retrieval import RetrievalResults
from oml_core.utils.atomic import TEMPORARY_PREFIX
from oml_core.utils.checkpoints import load_checkpoint
from tests.scripts.old_indexes import as_whole_files


# ------------------------------------------------------------------------------------- the test plugin
class BruteForceIndex(IKnnIndex):
    """A trivial knn backend: every distance computed and sorted; saved as one weights-only torch file."""

    FILE = "brute.pt"

    def __init__(self, distance: str = "l2") -> None:
        self.distance = distance
        self.x, self.ids, self.groups = torch.zeros(0, 0), torch.zeros(0, dtype=torch.long), torch.zeros(0)

    def __len__(self) -> int:
        return len(self.ids)

    def add(
        self, embeddings: Tensor, ids: LongTensor | None = None, groups: LongTensor | None = None
    ) -> None:
        n = len(embeddings)
        ids = torch.arange(len(self), len(self) + n) if ids is None else torch.as_tensor(ids).long()
        groups = ids.clone() if groups is None else torch.as_tensor(groups).long()
        self.x = embeddings.float() if not len(self) else torch.cat([self.x, embeddings.float()])
        self.ids = torch.cat([self.ids, ids])
        self.groups = groups if not len(self.groups) else torch.cat([self.groups, groups])

    def search(self, queries: Tensor, k: int, exclude: LongTensor | None = None) -> KnnSearchResult:
        d = naive_distances(queries, self.x, self.distance).float()
        if exclude is not None:
            d[self.groups[None, :] == exclude[:, None]] = float("inf")
        d, order = torch.sort(d, dim=1, stable=True)
        d, order = d[:, :k], order[:, :k]
        ids = torch.where(torch.isfinite(d), self.ids[order], -1)
        pad = k - d.shape[1]
        return KnnSearchResult(
            torch.nn.functional.pad(d, (0, pad), value=float("inf")),
            torch.nn.functional.pad(ids, (0, pad), value=-1),
        )

    def save(self, folder) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        state = {"distance": self.distance, "x": self.x, "ids": self.ids, "groups": self.groups}
        torch.save(state, Path(folder) / self.FILE)

    @classmethod
    def load(cls, folder) -> BruteForceIndex:
        state = torch.load(Path(folder) / cls.FILE, weights_only=True)
        index = cls(state["distance"])
        index.x, index.ids, index.groups = state["x"], state["ids"], state["groups"]
        return index


def make_brute(distance: str = "l2") -> BruteForceIndex:
    """A factory that is a function, not the class (the index finds the class to load through what it builds)."""
    return BruteForceIndex(distance)


class MeanColour(IExtractor):
    """A tiny extractor: a linear map of an image's mean colour (random weights from the seed, or a checkpoint's
    ``weights``)."""

    def __init__(self, dim: int = 4, weights: str | None = None) -> None:
        super().__init__()
        self.head = nn.Linear(3, dim)
        if weights is not None:
            load_checkpoint(self, weights)

    @property
    def feat_dim(self) -> int:
        return self.head.out_features

    def forward(self, x: Tensor) -> Tensor:
        return self.head(x.mean(dim=(2, 3)))


class IndexTestPlugin:
    @hookimpl
    def oml_register_knn_backends(self, register):
        register("brute", BruteForceIndex, description="brute force, for the tests")
        register("brute_fn", make_brute)

    @hookimpl
    def oml_register_extractors(self, register):
        register("mean_colour", MeanColour)


@pytest.fixture()
def registry() -> Registry:
    """The core's built-ins and the test plugin only."""
    return Registry([("index_test_plugin", IndexTestPlugin())], load_entrypoints=False)


EXTRACTOR = {"name": "mean_colour", "args": {"dim": 4}}
TRANSFORMS = {"name": "norm_resize", "args": {"im_size": 8}}


def naive_distances(queries: Tensor, gallery: Tensor, distance: str) -> Tensor:
    """``[Q, n]`` distances in float64, from their definitions."""
    q, g = queries.double(), gallery.double()
    if not len(g):
        return torch.zeros(len(q), 0, dtype=torch.float64)
    if distance == "l2":
        return ((q[:, None, :] - g[None, :, :]) ** 2).sum(-1).sqrt()
    return 1 - torch.nn.functional.normalize(q, dim=1) @ torch.nn.functional.normalize(g, dim=1).T


def solid_images(folder: Path, colours: dict[str, tuple[int, int, int]]) -> dict[str, Path]:
    """One 8x8 PNG of a single colour per name."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, colour in colours.items():
        paths[name] = folder / f"{name}.png"
        Image.new("RGB", (8, 8), colour).save(paths[name])
    return paths


COLOURS = {
    "red": (220, 20, 20),
    "green": (20, 200, 40),
    "blue": (30, 40, 210),
    "red2": (210, 30, 25),
    "teal": (20, 180, 190),
}


# ------------------------------------------------------------------------------------------- search
@pytest.mark.parametrize("distance", ["l2", "cosine"])
@pytest.mark.parametrize("backend", ["exact", "brute", "brute_fn"])
def test_search_by_embeddings_equals_a_naive_search(registry, distance, backend):
    generator = torch.Generator().manual_seed(0)
    gallery, queries = torch.randn(40, 6, generator=generator), torch.randn(7, 6, generator=generator)
    ids = torch.randperm(1000, generator=generator)[:40].tolist()
    labels = torch.randint(0, 5, (40,), generator=generator).tolist()
    index = GalleryIndex(knn_backend=backend, distance=distance, registry=registry)
    index.add(gallery[:25], labels=labels[:25], ids=ids[:25])
    index.add(gallery[25:], labels=labels[25:], ids=ids[25:])  # in two parts

    hits = index.search(queries, top_k=5)
    expected_d, expected_pos = torch.sort(naive_distances(queries, gallery, distance), dim=1)
    for q, row in enumerate(hits):
        assert [hit.rank for hit in row] == [1, 2, 3, 4, 5]
        assert [hit.id for hit in row] == [ids[p] for p in expected_pos[q, :5]]
        assert [hit.label for hit in row] == [labels[p] for p in expected_pos[q, :5]]
        assert [hit.distance for hit in row] == pytest.approx(expected_d[q, :5].tolist(), abs=1e-5)
        assert all(hit.path is None and hit.match is None for hit in row)
    assert [len(row) for row in index.search(queries[:2], top_k=100)] == [40, 40]  # all there is


def test_ids_labels_and_paths_of_added_items(registry):
    index = GalleryIndex(registry=registry)
    index.add(torch.zeros(2, 3), labels=[7, None])
    index.add(torch.ones(2, 3), ids=[10, 11], paths=["a.png", Path("b.png")])
    index.add(torch.full((1, 3), 2.0))
    assert index.ids == [0, 1, 10, 11, 12]  # defaults go on after the largest id
    assert index.labels == [7, None, None, None, None]
    assert index.paths == [None, None, "a.png", "b.png", None]
    assert torch.equal(index.embeddings, torch.tensor([[0.0] * 3] * 2 + [[1.0] * 3] * 2 + [[2.0] * 3]))

    for bad, message in [
        (dict(items=torch.zeros(1, 3), ids=[11]), "id 11 is given to two items"),
        (dict(items=torch.zeros(2, 3), ids=[20, 20]), "id 20 is given to two items"),
        (dict(items=torch.zeros(1, 3), labels=["cat"]), "labels must be integers"),
        (dict(items=torch.zeros(1, 3), labels=[1, 2]), "one entry per item"),
        (dict(items=torch.zeros(1, 4)), "dimension 4, the index has 3"),
        (dict(items=torch.tensor([[float("nan")] * 3])), "finite"),
    ]:
        with pytest.raises(ValueError, match=message):
            index.add(**bad)
    assert len(index) == 5 and index.ids == [0, 1, 10, 11, 12]  # nothing of a refused add is kept


def test_images_through_a_registered_extractor_spec(tmp_path, registry):
    images = solid_images(tmp_path / "gallery", COLOURS)
    index = GalleryIndex.from_folder(
        tmp_path / "gallery", extractor=EXTRACTOR, transforms=TRANSFORMS, registry=registry
    )
    assert index.paths == sorted(str(p) for p in images.values()) and index.labels == [None] * 5
    assert index.ids == [0, 1, 2, 3, 4]

    query = solid_images(tmp_path / "queries", {"also_blue": COLOURS["blue"]})["also_blue"]
    (nearest, second), *_ = index.search([query], top_k=2)
    assert nearest.path == str(images["blue"]) and nearest.distance < 1e-5
    assert second.distance > 0.01
    assert torch.equal(
        index.embed([images["red"]]), index.embeddings[index.paths.index(str(images["red"]))][None]
    )


def test_the_extractor_is_seeded_so_random_weights_are_the_same_at_every_build(registry):
    first = GalleryIndex(extractor=EXTRACTOR, registry=registry, seed=3).extractor
    again = GalleryIndex(extractor=EXTRACTOR, registry=registry, seed=3).extractor
    other = GalleryIndex(extractor=EXTRACTOR, registry=registry, seed=4).extractor
    assert torch.equal(first.head.weight, again.head.weight)
    assert not torch.equal(first.head.weight, other.head.weight)


def test_images_that_cannot_be_read_are_named(tmp_path, registry):
    index = GalleryIndex(extractor=EXTRACTOR, transforms=TRANSFORMS, registry=registry)
    with pytest.raises(GalleryIndexError, match="image file not found: '.*missing.png'"):
        index.add([tmp_path / "missing.png"])
    (tmp_path / "folder.png").mkdir()
    with pytest.raises(GalleryIndexError, match="'.*folder.png' is a directory, not an image file"):
        index.add([tmp_path / "folder.png"])
    (tmp_path / "text.png").write_text("not an image")
    with pytest.raises(GalleryIndexError, match="cannot read the image file '.*text.png'"):
        index.search([tmp_path / "text.png"])
    with pytest.raises(GalleryIndexError, match="has no extractor"):
        GalleryIndex(registry=registry).search([tmp_path / "text.png"])


# --------------------------------------------------------------------------------- dataframe, calibration
@pytest.fixture()
def colour_dataset(tmp_path) -> tuple[pd.DataFrame, Path]:
    """Train rows (labels 0-2, no flags) and a "1 vs rest" validation split of two labels of two near colours
    each, and a fifth colour whose label has no other image: a query only."""
    root = tmp_path / "colours"
    colours = {**COLOURS, "green2": (25, 190, 50), "blue2": (35, 45, 200), "grey": (128, 128, 128)}
    solid_images(root / "images", colours)
    rows = [
        (0, "red", "train", None, None),
        (1, "green", "train", None, None),
        (2, "teal", "train", None, None),
        (3, "blue", "validation", True, True),
        (3, "blue2", "validation", True, True),
        (4, "green2", "validation", True, True),
        (4, "red2", "validation", True, True),
        (5, "grey", "validation", False, True),
    ]
    df = pd.DataFrame(rows, columns=["label", "path", "split", "is_query", "is_gallery"])
    return df.assign(path=[f"images/{name}.png" for name in df["path"]]), root


def test_a_dataframes_rows_and_its_calibration_on_the_validation_split(colour_dataset, registry):
    df, root = colour_dataset
    args = dict(extractor=EXTRACTOR, transforms=TRANSFORMS, registry=registry)
    index = GalleryIndex.from_dataframe(df, root, calibration={"target": "f1"}, **args)
    assert index.ids == list(range(8)) and index.labels == df["label"].tolist()
    assert index.paths == [str(root.absolute() / p) for p in df["path"]]

    # the calibration equals oml's own retrieval of the validation split (exact search) through calibrate_rr
    df_val = df[df["split"] == "validation"].reset_index(drop=True)
    dataset = ImageQueryGalleryLabeledDataset(df_val, dataset_root=root)
    embeddings = index.embeddings[torch.tensor((df["split"] == "validation").to_numpy())]
    expected = calibrate_rr(RetrievalResults.from_embeddings(embeddings, dataset, n_items=5), "f1")
    assert index.calibration.threshold == expected.threshold
    assert index.calibration.curve.precision == pytest.approx(expected.curve.precision)
    assert index.calibration.n_queries == 4 and index.calibration.n_with_match == 4

    gallery_only = GalleryIndex.from_dataframe(df, root, rows="gallery", **args)
    assert gallery_only.ids == [3, 4, 5, 6, 7] and gallery_only.calibration is None
    with pytest.raises(ValueError, match="no split=validation rows"):
        GalleryIndex.from_dataframe(df[df["split"] == "train"], root, calibration={}, **args)
    with pytest.raises(ValueError, match="rows must be one of"):
        GalleryIndex.from_dataframe(df, root, rows="queries", **args)


def test_calibration_excludes_the_query_itself_and_its_sequence(registry):
    """1-D embeddings, "1 vs rest", worked by hand. Items: 0 at 0.00 (label 0, sequence A), 1 at 0.05 (label
    1, sequence A), 2 at 0.30 (label 0, B), 3 at 0.40 (label 1, C).

    Without sequences every query's nearest other item has the other label (0<->1 at 0.05, 2<->3 at 0.10):
    F1 is 0 everywhere. With them, 0 and 1 cannot retrieve each other: 0's nearest is 2 at 0.30 (a true match),
    1's is 2 at 0.25 (false), 2's and 3's stay false at 0.10; all four have a true match. The curve: 0.10 ->
    TP 0/2, 0.25 -> 0/3, 0.30 -> 1/4 (P = R = F1 = 1/4): the threshold is just above 0.30."""
    x = torch.tensor([[0.0], [0.05], [0.30], [0.40]])
    index = GalleryIndex(registry=registry)
    with pytest.raises(CalibrationError, match="F1 is 0 at every threshold"):
        index.calibrate(x, [0, 1, 0, 1], target="f1")
    calibration = index.calibrate(x, [0, 1, 0, 1], sequences=["A", "A", "B", "C"], target="f1")
    assert calibration is index.calibration
    assert calibration.threshold == pytest.approx(0.30, abs=1e-5) and calibration.threshold > 0.30 - 1e-7
    assert (calibration.precision, calibration.recall, calibration.f1) == pytest.approx((0.25, 0.25, 0.25))
    assert calibration.curve.precision == pytest.approx((0.0, 0.0, 0.25))
    assert calibration.n_with_match == 4

    index.add(x, labels=[0, 1, 0, 1])
    hits = index.search(torch.tensor([[0.29], [0.9]]), top_k=1)
    assert [row[0].match for row in hits] == [True, False]  # 0.01 from item 2; 0.5 from item 3


# ------------------------------------------------------------------------------------ save and load
@pytest.mark.parametrize("backend", ["exact", "brute", "brute_fn"])
def test_save_and_load_give_the_same_index(tmp_path, colour_dataset, registry, backend):
    df, root = colour_dataset
    index = GalleryIndex.from_dataframe(
        df, root, extractor=EXTRACTOR, transforms=TRANSFORMS, knn_backend=backend, registry=registry,
        calibration={"target": "precision", "value": 0.5},
    )  # fmt: skip
    assert index.save(tmp_path / "saved") == tmp_path / "saved"
    loaded = GalleryIndex.load(tmp_path / "saved", registry=registry)

    assert torch.equal(loaded.embeddings, index.embeddings)
    assert (loaded.ids, loaded.paths, loaded.labels) == (index.ids, index.paths, index.labels)
    assert loaded.config == index.config and loaded.config["knn_backend"]["name"] == backend
    assert loaded.calibration == index.calibration
    assert type(loaded._backend) is type(index._backend)
    queries = [root / "images" / "red.png", root / "images" / "grey.png"]
    assert loaded.search(queries, top_k=8) == index.search(
        queries, top_k=8
    )  # extractor rebuilt from the spec

    files = {p.name for p in (tmp_path / "saved").iterdir()}
    assert files == {"index.json", "weights.pt", "probe.png", "gen-1"}  # the model's files, the generation's
    generation = tmp_path / "saved" / "gen-1"
    assert {p.name for p in generation.iterdir()} == {
        "generation.json",
        "items.arrow",
        "embeddings.pt",
        "embeddings.npy",
        "backend",
        "calibration.json",
        "calibration.png",
    }
    assert np.load(generation / "embeddings.npy").shape == (8, 4)
    assert (generation / "calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(f"{TEMPORARY_PREFIX}*"))


def test_an_index_of_embeddings_without_extractor_round_trips(tmp_path):
    index = GalleryIndex(distance="cosine")
    index.add(torch.randn(6, 3), labels=[0, 0, 1, 1, 2, 2], paths=[f"{i}.png" for i in range(6)])
    index.save(tmp_path / "saved")
    loaded = GalleryIndex.load(tmp_path / "saved")
    assert loaded.calibration is None and loaded.config["extractor"] is None and loaded.distance == "cosine"
    queries = torch.randn(2, 3)
    assert loaded.search(queries, top_k=3) == index.search(queries, top_k=3)
    GalleryIndex().save(tmp_path / "empty")  # an empty index too
    assert len(GalleryIndex.load(tmp_path / "empty")) == 0


def test_a_folder_is_never_written_over(tmp_path):
    index = GalleryIndex()
    index.add(torch.zeros(1, 2))
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="taken exists and is not an empty folder"):
        index.save(tmp_path / "taken")
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    index.save(tmp_path / "empty")  # an empty folder is fine
    assert len(GalleryIndex.load(tmp_path / "empty")) == 1


def test_a_failed_save_leaves_no_folder(tmp_path, registry):
    class FailingSave(BruteForceIndex):
        def save(self, folder) -> None:
            raise OSError(28, "No space left on device")

    index = GalleryIndex(knn_backend="brute", registry=registry)
    index.add(torch.zeros(1, 2))
    index._backend = FailingSave()
    with pytest.raises(OSError, match="No space left"):
        index.save(tmp_path / "saved")
    assert list(tmp_path.iterdir()) == []  # neither the folder nor its temporary folder


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _write_items(path: Path, edit) -> None:
    """Write the items of ``path`` again as ``edit`` makes their table (with their metadata)."""
    with pa.ipc.open_file(pa.memory_map(str(path))) as reader:
        table = reader.read_all()
    edited = edit(table)
    path.unlink()  # the mapping of the old file stays valid
    with pa.ipc.new_file(str(path), edited.schema) as writer:
        writer.write_table(edited)


class Foreign:
    """Not a tensor: weights_only loading refuses it."""


CORRUPTIONS = {
    "a folder of something else": ("index.json", lambda f: (f / "index.json").unlink()),
    "index.json is not json": ("index.json", lambda f: _write(f / "index.json", "{oops")),
    "index.json of another format": ("index.json", lambda f: _write(f / "index.json", '{"format": "other"}')),
    "index.json of a newer version": (
        "index.json",
        lambda f: _edit_json(f / "index.json", lambda d: d.update(version=9)),
    ),
    "index.json without its config": (
        "index.json",
        lambda f: _edit_json(f / "index.json", lambda d: d.pop("config")),
    ),
    "items.arrow of other lengths": (
        "items.arrow",
        lambda f: _write_items(f / "gen-1" / "items.arrow", lambda t: t.slice(1)),
    ),
    "items.arrow missing": ("items.arrow", lambda f: (f / "gen-1" / "items.arrow").unlink()),
    "items.arrow of garbage": ("items.arrow", lambda f: _write(f / "gen-1" / "items.arrow", "garbage")),
    "embeddings.npy missing": ("embeddings.npy", lambda f: (f / "gen-1" / "embeddings.npy").unlink()),
    "embeddings.pt of garbage": ("embeddings.pt", lambda f: _write(f / "gen-1" / "embeddings.pt", "garbage")),
    "embeddings.pt with code": (
        "embeddings.pt",
        lambda f: torch.save({"format": "x", "e": Foreign()}, f / "gen-1" / "embeddings.pt"),
    ),
    "embeddings.pt of another shape": (
        "embeddings.pt",
        lambda f: torch.save(
            {"format": "oml-gallery-embeddings", "embeddings": torch.zeros(2, 2)},
            f / "gen-1" / "embeddings.pt",
        ),
    ),
    "backend state missing": (
        "exact_index.pt",
        lambda f: (f / "gen-1" / "backend" / "exact_index.pt").unlink(),
    ),
    "backend of another size": ("backend", lambda f: _replace_backend(f / "gen-1" / "backend")),
    "calibration.json corrupt": (
        "calibration.json",
        lambda f: _write(f / "gen-1" / "calibration.json", '{"threshold": 1}'),
    ),
    "calibration.json of wrong types": (
        "calibration.json",
        lambda f: _edit_json(f / "gen-1" / "calibration.json", lambda d: d.update(threshold="low")),
    ),
}


def _replace_backend(folder: Path) -> None:
    shutil.rmtree(folder)
    other = ExactKnnIndex()
    other.add(torch.zeros(1, 2))
    other.save(folder)


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_a_foreign_or_corrupt_folder_is_one_line_naming_the_file(tmp_path, case):
    index = GalleryIndex()
    index.add(torch.randn(4, 2), labels=[0, 0, 1, 1])
    index.calibrate(torch.tensor([[0.0, 0], [0.1, 0], [1, 0], [1.1, 0]]), [0, 0, 1, 1], target="f1")
    folder = index.save(tmp_path / "saved")
    file, corrupt = CORRUPTIONS[case]
    corrupt(folder)
    with pytest.raises(GalleryIndexError) as raised:
        GalleryIndex.load(folder)
    assert file in str(raised.value) and "\n" not in str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(GalleryIndexError, match="nowhere: no such gallery index folder"):
        GalleryIndex.load(tmp_path / "nowhere")


def test_an_index_of_a_backend_that_is_not_installed_names_it(tmp_path, registry):
    index = GalleryIndex(knn_backend="brute", registry=registry)
    index.add(torch.zeros(2, 2))
    index.save(tmp_path / "saved")
    assert registry.names("knn_backend") == ["brute", "brute_fn", "exact"]
    with pytest.raises(UnknownNameError, match="Unknown knn_backend 'brute'"):
        GalleryIndex.load(tmp_path / "saved", registry=Registry(load_entrypoints=False))


def test_a_relative_weights_file_is_saved_absolute(tmp_path, monkeypatch, registry):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "best.ckpt").write_bytes(b"")
    for weights, saved in [
        ("best.ckpt", str(tmp_path / "best.ckpt")),
        ("missing.ckpt", "missing.ckpt"),
        ("vits16_dino", "vits16_dino"),  # a zoo key
        (None, None),
    ]:
        spec = {"name": "mean_colour", "args": {"weights": weights}}
        assert GalleryIndex(extractor=spec, registry=registry).config["extractor"]["args"]["weights"] == saved


def test_bad_constructor_arguments(registry):
    with pytest.raises(ValueError, match="distance must be one of"):
        GalleryIndex(distance="dot")
    with pytest.raises(ValueError, match="args.distance is 'cosine' but the index's distance is 'l2'"):
        GalleryIndex(knn_backend={"name": "exact", "args": {"distance": "cosine"}})
    with pytest.raises(ValueError, match="JSON values only"):
        GalleryIndex(extractor={"name": "mean_colour", "args": {"dim": np.int64(4)}}, registry=registry)
    with pytest.raises(UnknownNameError, match="Did you mean: exact"):
        GalleryIndex(knn_backend="exakt", registry=registry)


# ------------------------------------------------------------------------ a self-contained, checked index
def save_checkpoint(path: Path, seed: int, dim: int = 4) -> Path:
    """A checkpoint of a ``MeanColour`` whose weights are drawn from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    state = {
        "head.weight": torch.randn(dim, 3, generator=generator),
        "head.bias": torch.randn(dim, generator=generator),
    }
    torch.save(state, path)
    return path


def checkpoint_spec(checkpoint: Path) -> dict:
    return {"name": "mean_colour", "args": {"dim": 4, "weights": str(checkpoint)}}


@pytest.fixture()
def saved_with_weights(tmp_path, registry) -> Path:
    """An index of the five colours, its extractor loaded from a checkpoint, saved to ``tmp_path / saved``."""
    solid_images(tmp_path / "gallery", COLOURS)
    spec = checkpoint_spec(save_checkpoint(tmp_path / "best.ckpt", seed=1))
    index = GalleryIndex.from_folder(
        tmp_path / "gallery", extractor=spec, transforms=TRANSFORMS, registry=registry
    )
    return index.save(tmp_path / "saved")


@pytest.fixture()
def query(tmp_path) -> Path:
    return solid_images(tmp_path / "queries", {"orange": (200, 90, 30)})["orange"]


def test_a_saved_index_carries_its_weights_so_its_checkpoint_may_change_or_go(
    tmp_path, registry, saved_with_weights, query
):
    checkpoint = tmp_path / "best.ckpt"
    built = GalleryIndex(extractor=checkpoint_spec(checkpoint), transforms=TRANSFORMS, registry=registry)
    expected = GalleryIndex.load(saved_with_weights, registry=registry).search([query], top_k=5)
    gallery = sorted(str(p) for p in (tmp_path / "gallery").iterdir())
    distances, order = torch.sort(naive_distances(built.embed([query]), built.embed(gallery), "l2")[0])
    assert [hit.path for hit in expected[0]] == [gallery[i] for i in order]
    assert [hit.distance for hit in expected[0]] == pytest.approx(distances.tolist(), abs=1e-5)

    save_checkpoint(checkpoint, seed=2)  # other weights under the checkpoint's name
    replaced = GalleryIndex(extractor=checkpoint_spec(checkpoint), transforms=TRANSFORMS, registry=registry)
    assert not torch.allclose(
        replaced.embed([query]), built.embed([query]), atol=1e-2
    )  # the path means another model
    assert GalleryIndex.load(saved_with_weights, registry=registry).search([query], top_k=5) == expected

    (tmp_path / "elsewhere").mkdir()
    moved = Path(shutil.move(saved_with_weights, tmp_path / "elsewhere" / "moved"))
    checkpoint.unlink()
    loaded = GalleryIndex.load(moved, registry=registry)
    assert loaded.search([query], top_k=5) == expected
    assert torch.equal(loaded.extractor.head.weight, built.extractor.head.weight)
    assert loaded.config["extractor"]["args"]["weights"] == str(checkpoint)  # kept as a record, never read


def test_a_loaded_index_saved_again_keeps_its_weights_and_probe(
    tmp_path, registry, saved_with_weights, query
):
    loaded = GalleryIndex.load(saved_with_weights, registry=registry)
    expected = loaded.search([query], top_k=3)
    (tmp_path / "best.ckpt").unlink()
    again = loaded.save(tmp_path / "again")
    assert {"weights.pt", "probe.png"} <= {p.name for p in again.iterdir()}
    assert torch.equal(
        torch.load(again / "gen-1" / "embeddings.pt", weights_only=True)["probe"],
        torch.load(saved_with_weights / "gen-1" / "embeddings.pt", weights_only=True)["probe"],
    )
    assert GalleryIndex.load(again, registry=registry).search([query], top_k=3) == expected


def test_an_index_saved_before_its_dataset_component_was_recorded_is_an_index_of_images(
    registry, saved_with_weights, query
):
    """What oml wrote before the dataset kind: no ``dataset`` and ``data`` in index.json's config, no
    ``probe_query`` and ``probe_input`` in embeddings.pt (its probe is ``probe.png``), in version 3 (no manifest)."""
    expected = GalleryIndex.load(saved_with_weights, registry=registry).search([query], top_k=3)
    _edit_json(
        saved_with_weights / "index.json",
        lambda d: (d["config"].pop("dataset"), d["config"].pop("data"), as_version_3(d)),
    )
    as_whole_files(saved_with_weights / "gen-1")
    stored = torch.load(saved_with_weights / "gen-1" / "embeddings.pt", weights_only=True)
    assert stored["probe_query"] == "probe.png" and stored["probe_input"] is None
    old = {key: value for key, value in stored.items() if key not in ("probe_query", "probe_input")}
    torch.save(old, saved_with_weights / "gen-1" / "embeddings.pt")
    loaded = GalleryIndex.load(saved_with_weights, registry=registry)
    assert loaded.config["dataset"] is None and loaded.config["data"] == {}
    assert loaded.search([query], top_k=3) == expected
    with pytest.raises(GalleryIndexError, match="probe.png: the index's extractor and transforms embed it"):
        GalleryIndex.load(saved_with_weights, registry=registry, extractor=MeanColour(4)).search([query])


def as_version_3(meta: dict) -> None:
    """``index.json``'s content ``meta`` as version 3 wrote it: without the manifest."""
    meta.update(version=3)
    meta.pop("manifest")


def record_in_manifest(folder: Path, name: str) -> None:
    """Record the digest of the file ``name`` of the index ``folder`` as it is now in its manifest: as if the index
    had been written with it."""
    _edit_json(
        folder / "index.json", lambda d: d["manifest"]["files"].update({name: file_digest(folder / name)})
    )


def flip_a_byte(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def test_weights_tampered_with_are_one_line_naming_both_digests(
    tmp_path, registry, saved_with_weights, query
):
    weights = saved_with_weights / "weights.pt"
    built_with = json.loads((saved_with_weights / "index.json").read_text())["weights_sha256"]
    assert built_with == hashlib.sha256(weights.read_bytes()).hexdigest()
    flip_a_byte(weights, weights.stat().st_size // 2)
    found = hashlib.sha256(weights.read_bytes()).hexdigest()

    loaded = GalleryIndex.load(saved_with_weights, registry=registry)
    assert len(loaded.search(torch.zeros(1, 4), top_k=2)[0]) == 2  # embeddings need no model
    with pytest.raises(GalleryIndexError) as raised:
        loaded.search([query])
    assert str(raised.value) == (
        f"the weights of the index {weights} have sha256 {found}, the index was built with {built_with}: the file "
        f"was changed; rebuild the index (oml index build)"
    )
    with pytest.raises(GalleryIndexError, match="have sha256"):  # nor is it saved again
        loaded.save(tmp_path / "again")
    assert not (tmp_path / "again").exists()


EDITS = {
    "transforms size": (
        lambda c: c["transforms"]["args"].update(im_size=16),
        "its transforms.args.im_size is 16, the embeddings of embeddings.pt were built with 8",
    ),
    "extractor name": (
        lambda c: c["extractor"].update(name="other_model"),
        "its extractor.name is 'other_model', the embeddings of embeddings.pt were built with 'mean_colour'",
    ),
    "extractor argument": (
        lambda c: c["extractor"]["args"].update(dim=5),
        "its extractor.args.dim is 5, the embeddings of embeddings.pt were built with 4",
    ),
    "extractor removed": (
        lambda c: c.update(extractor=None),
        "its extractor is None, the embeddings of embeddings.pt were built with {'args': {'dim': 4, 'weights': None}, "
        "'name': 'mean_colour'}",
    ),
    "distance": (
        lambda c: (c.update(distance="cosine"), c["knn_backend"]["args"].update(distance="cosine")),
        "its distance is 'cosine', the embeddings of embeddings.pt were built with 'l2'",
    ),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_edited_config_is_refused_at_load_naming_the_key(registry, saved_with_weights, edit):
    change, message = EDITS[edit]
    _edit_json(saved_with_weights / "index.json", lambda d: change(d["config"]))
    with pytest.raises(GalleryIndexError) as raised:
        GalleryIndex.load(saved_with_weights, registry=registry)
    assert str(raised.value) == (
        f"{saved_with_weights / 'index.json'}: {message}: the index's config no longer matches what built its "
        f"embeddings; rebuild the index (oml index build)"
    )


def test_an_edited_weights_digest_is_refused_and_the_weights_path_is_only_a_record(
    tmp_path, registry, saved_with_weights, query
):
    index_json = saved_with_weights / "index.json"
    built_with = json.loads(index_json.read_text())["weights_sha256"]
    _edit_json(
        index_json, lambda d: d["config"]["extractor"]["args"].update(weights=str(tmp_path / "gone.ckpt"))
    )
    assert len(GalleryIndex.load(saved_with_weights, registry=registry).search([query])[0]) == 5
    _edit_json(index_json, lambda d: d.update(weights_sha256="0" * 64))
    with pytest.raises(
        GalleryIndexError, match=f"its weights_sha256 is '{'0' * 64}', .* built with '{built_with}'"
    ):
        GalleryIndex.load(saved_with_weights, registry=registry)
    _edit_json(index_json, lambda d: d.update(weights_sha256="not a digest"))
    with pytest.raises(
        GalleryIndexError, match="index.json: weights_sha256 must be null or a sha256 hex digest"
    ):
        GalleryIndex.load(saved_with_weights, registry=registry)


def swap_channels(transforms):
    """``transforms``, then the colour channels in BGR order: a silent mistake the probe must catch."""
    return lambda image: transforms(image)[[2, 1, 0]]


def test_the_probe_catches_another_model_or_transforms(registry, saved_with_weights, query):
    loaded = GalleryIndex.load(saved_with_weights, registry=registry)
    expected = loaded.search([query])
    transforms = loaded.transforms
    same = GalleryIndex.load(
        saved_with_weights, registry=registry, extractor=loaded.extractor, transforms=transforms
    )
    assert same.search([query]) == expected

    probe = saved_with_weights / "probe.png"
    for other in [
        dict(extractor=MeanColour(4)),  # random weights
        dict(transforms=swap_channels(transforms)),
        dict(extractor=loaded.extractor, transforms=swap_channels(transforms)),
    ]:
        index = GalleryIndex.load(saved_with_weights, registry=registry, **other)
        with pytest.raises(GalleryIndexError) as raised:
            index.search([query])
        assert re.fullmatch(
            rf"{re.escape(str(probe))}: the index's extractor and transforms embed it \d\S* away \(relative L2\) "
            rf"from its embedding at build time \(tolerance 0\.001\): they are not the model that built the index; "
            rf"rebuild the index \(oml index build\), or give the extractor and transforms it was built with",
            str(raised.value),
        ), str(raised.value)
    with pytest.raises(
        GalleryIndexError, match="embeds it into dimension 5, the index was built with dimension 4"
    ):
        GalleryIndex.load(saved_with_weights, registry=registry, extractor=MeanColour(5)).search([query])


def test_an_index_of_an_extractor_object_is_checked_by_its_probe(tmp_path, registry, query):
    solid_images(tmp_path / "gallery", COLOURS)
    model, transforms = MeanColour(4), registry.build("transforms", TRANSFORMS)
    index = GalleryIndex.from_folder(
        tmp_path / "gallery", extractor=model, transforms=transforms, registry=registry
    )
    folder = index.save(tmp_path / "saved")
    assert "weights.pt" not in {p.name for p in folder.iterdir()} and (folder / "probe.png").is_file()

    assert GalleryIndex.load(folder, extractor=model, transforms=transforms).search([query]) == index.search(
        [query]
    )
    with pytest.raises(GalleryIndexError, match="has no extractor"):
        GalleryIndex.load(folder).search([query])
    with pytest.raises(GalleryIndexError, match="probe.png: the index's extractor and transforms embed it"):
        GalleryIndex.load(folder, extractor=MeanColour(4), transforms=transforms).search([query])
    GalleryIndex.load(folder).save(tmp_path / "again")  # without its model, the probe is kept as it was
    assert GalleryIndex.load(tmp_path / "again", extractor=model, transforms=transforms).search([query]) == (
        index.search([query])
    )


def test_an_index_of_version_1_is_refused_with_rebuild(registry, saved_with_weights):
    """What version 1 wrote: no weights.pt, no probe.png, no model in embeddings.pt, version 1."""
    (saved_with_weights / "weights.pt").unlink()
    (saved_with_weights / "probe.png").unlink()
    as_whole_files(saved_with_weights / "gen-1")
    embeddings = torch.load(saved_with_weights / "gen-1" / "embeddings.pt", weights_only=True)
    torch.save(
        {"format": embeddings["format"], "embeddings": embeddings["embeddings"]},
        saved_with_weights / "gen-1" / "embeddings.pt",
    )
    _edit_json(saved_with_weights / "index.json", lambda d: (d.update(version=1), d.pop("weights_sha256")))
    with pytest.raises(GalleryIndexError) as raised:
        GalleryIndex.load(saved_with_weights, registry=registry)
    assert str(raised.value) == (
        f"{saved_with_weights / 'index.json'}: an index of version 1, which keeps only the path of its weights, so "
        f"its model cannot be checked; this oml reads versions 2 to 5: rebuild the index (oml index build)"
    )


@pytest.mark.parametrize("file", ["weights.pt", "probe.png"])
def test_a_missing_weights_or_probe_file_is_named(registry, saved_with_weights, file):
    (saved_with_weights / file).unlink()
    with pytest.raises(GalleryIndexError, match=f"{file}: no such file .*the index folder is incomplete"):
        GalleryIndex.load(saved_with_weights, registry=registry)


def test_the_rebuilt_spec_nulls_every_weights_argument():
    spec = {
        "name": "extractor_with_mlp",
        "args": {
            "weights": "head.ckpt",
            "mlp_features": [8],
            "extractor": {"name": "vit", "args": {"weights": "vits16_dino", "arch": "vits16"}},
        },
    }
    assert rebuilt_spec(spec) == {
        "name": "extractor_with_mlp",
        "args": {
            "weights": None,
            "mlp_features": [8],
            "extractor": {"name": "vit", "args": {"weights": None, "arch": "vits16"}},
        },
    }
    assert spec["args"]["extractor"]["args"]["weights"] == "vits16_dino"  # not changed in place
    assert first_difference({"a": {"b": [1, 2]}}, {"a": {"b": [1, 3]}}) == ("a.b[1]", 2, 3)
    assert first_difference({"a": 1}, {"a": 1, "c": 2}) == ("c", "(absent)", 2)
    assert first_difference({"a": [1]}, {"a": [1, 2]}) == ("a", [1], [1, 2])
    assert first_difference({"a": None}, {"a": None}) is None


def test_queries_cropped_to_their_boxes(tmp_path, registry, saved_with_weights):
    """A picture of red (left half) and blue (right half) cropped to its left half searches as a red picture."""
    two = np.zeros((8, 8, 3), dtype=np.uint8)
    two[:, :4], two[:, 4:] = COLOURS["red"], COLOURS["blue"]
    Image.fromarray(two).save(tmp_path / "two.png")
    Image.fromarray(two[:, :4]).save(tmp_path / "left.png")
    index = GalleryIndex.load(saved_with_weights, registry=registry)
    cropped = index.search([tmp_path / "two.png"], top_k=5, bboxes=[(0, 0, 4, 8)])
    assert cropped == index.search([tmp_path / "left.png"], top_k=5)
    assert cropped[0][0].path.endswith("red.png") and cropped != index.search([tmp_path / "two.png"], top_k=5)
    with pytest.raises(ValueError, match="bboxes must have one entry per image"):
        index.search([tmp_path / "two.png"], bboxes=[None, None])
    with pytest.raises(ValueError, match="bboxes go with image paths"):
        index.search(torch.zeros(1, 4), bboxes=[None])


class MaxColour(MeanColour):
    """Another version of the plugin: the same weights, a linear map of the largest colour values."""

    def forward(self, x: Tensor) -> Tensor:
        return self.head(x.amax(dim=(2, 3)))


class Renamed(IExtractor):
    """Another version of the plugin, whose layers have other names."""

    def __init__(self, dim: int = 4, weights: str | None = None) -> None:
        super().__init__()
        self.projection = nn.Linear(3, dim)

    @property
    def feat_dim(self) -> int:
        return self.projection.out_features

    def forward(self, x: Tensor) -> Tensor:
        return self.projection(x.mean(dim=(2, 3)))


def plugin_version(extractor: type) -> Registry:
    """A registry whose ``mean_colour`` is ``extractor``."""

    class Version:
        @hookimpl
        def oml_register_extractors(self, register):
            register("mean_colour", extractor)

    return Registry([("index_test_plugin", Version())], load_entrypoints=False)


def test_another_version_of_the_extractors_plugin_is_refused(saved_with_weights, query):
    with pytest.raises(GalleryIndexError, match="probe.png: the index's extractor and transforms embed it"):
        GalleryIndex.load(saved_with_weights, registry=plugin_version(MaxColour)).search([query])
    with pytest.raises(
        GalleryIndexError,
        match=r"weights.pt: does not fit the index's extractor 'mean_colour' \(.*head.weight",
    ):
        GalleryIndex.load(saved_with_weights, registry=plugin_version(Renamed)).search([query])


# ------------------------------------------------------------------- a dataset component that breaks its contract
class RowsDataset(ILabeledDataset):
    """Four labelled 3-d rows."""

    def __init__(self) -> None:
        self.x = torch.tensor([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, item: int) -> dict:
        return {"input_tensors": self.x[item], "idx": item, "labels": item % 2}

    def get_labels(self) -> np.ndarray:
        return np.arange(4) % 2


class Rows(IDatasetComponent):
    """A component of :class:`RowsDataset`, with no queries and no validation split; ``ids`` (its item ids),
    ``probe`` (the probe query it claims to write) and ``gallery`` (whether it gives a gallery) break its
    contract."""

    source = Path("rows.csv")

    def __init__(self, ids: list[int] | None = None, probe: str | None = None, gallery: bool = True) -> None:
        self.ids, self.probe, self.gallery = ids, probe, gallery

    def gallery_dataset(self, rows: str = "all") -> RowsDataset:
        if not self.gallery:
            return super().gallery_dataset(rows)  # the interface's NotImplementedError
        return RowsDataset()

    def item_ids(self, dataset) -> list[int]:
        return self.ids if self.ids is not None else super().item_ids(dataset)

    def probe_query(self, folder: Path) -> str:
        return self.probe if self.probe is not None else super().probe_query(folder)


class RowsPlugin:
    @hookimpl
    def oml_register_datasets(self, register):
        register("rows", Rows)


def rows_index(**args) -> GalleryIndex:
    registry = Registry([("rows_plugin", RowsPlugin())], load_entrypoints=False)
    return GalleryIndex(extractor=nn.Linear(3, 2), dataset={"name": "rows", "args": args}, registry=registry)


def test_a_dataset_components_items_without_ids_or_queries(tmp_path):
    index = rows_index()
    assert (
        index.add_dataset(calibration={"target": "f1"})
        == "the dataset component Rows gives no validation dataset"
    )
    assert index.ids == [0, 1, 2, 3] and index.labels == [0, 1, 0, 1] and index.paths == [None] * 4
    assert index.calibration is None
    with pytest.raises(GalleryIndexError) as raised:
        collect_queries(index.data, ["rows.csv"])
    assert str(raised.value) == (
        "the dataset component Rows takes no queries: this index can be searched by embeddings only"
    )
    with pytest.raises(
        GalleryIndexError, match="image paths are items of the images dataset component, and this "
    ):
        index.search(["a.png"])
    folder = index.save(tmp_path / "saved")  # no probe query: its first gallery row is its probe
    stored = torch.load(folder / "gen-1" / "embeddings.pt", weights_only=True)
    assert torch.equal(stored["probe_input"], torch.zeros(3)) and stored["probe_query"] is None


def test_a_dataset_component_that_breaks_its_contract_is_named(tmp_path):
    with pytest.raises(GalleryIndexError) as raised:
        rows_index(gallery=False).add_dataset()
    assert str(raised.value) == (
        "the dataset component Rows gives no gallery dataset: a gallery index cannot be built of its items"
    )
    with pytest.raises(
        GalleryIndexError, match=r"^the dataset component Rows gives 4 ids \(2 distinct\) to 4 items$"
    ):
        rows_index(ids=[0, 0, 1, 1]).add_dataset()
    index = rows_index(probe="index.json")
    index.add_dataset()
    with pytest.raises(
        GalleryIndexError, match="the dataset component Rows wrote no probe query 'index.json' of its"
    ):
        index.save(tmp_path / "saved")
    assert not (tmp_path / "saved").exists()


def test_bad_dataset_arguments_of_an_index(tmp_path, registry):
    with pytest.raises(ValueError, match=r"data takes the data keys \[.*\], got also \['dataset_rot'\]"):
        GalleryIndex(data={"dataset_rot": "x"})
    with pytest.raises(ValueError, match="dataset must be a registered name or a {name, args} spec"):
        GalleryIndex(dataset=Rows())  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match="an index of a dataframe or folder of images takes no dataset or data"
    ):
        GalleryIndex.from_folder(tmp_path, dataset="rows")


def test_a_bad_probe_record_is_one_line_naming_the_file(tmp_path, saved_with_weights, registry):
    stored = torch.load(saved_with_weights / "gen-1" / "embeddings.pt", weights_only=True)
    torch.save({**stored, "probe_query": "../probe.png"}, saved_with_weights / "gen-1" / "embeddings.pt")
    record_in_manifest(saved_with_weights, "gen-1/embeddings.pt")  # as written so, not swapped
    with pytest.raises(GalleryIndexError) as raised:
        GalleryIndex.load(saved_with_weights, registry=registry)
    assert str(raised.value) == (
        f"{saved_with_weights / 'gen-1' / 'embeddings.pt'}: its probe needs either the file name of its query in "
        f"the folder or its input tensor"
    )
