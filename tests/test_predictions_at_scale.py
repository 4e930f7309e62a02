"""``oml predict predictions_format=json|parquet|npy`` and ``oml index build embeddings=... / embeddings_out=...``
on eight mock pictures with the default configs' ResNet18 (random weights, seeded: the same in ``oml predict`` and
``oml index build``) at 32 px: every format holds the JSON's vectors bit for bit, an index built from a file
answers searches as the index that embedded its items, and a file of another model is refused in one line."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from oml_core.cli import main
from oml_core.config.compose import compose_config
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.index import GalleryIndex
from oml_core.index.build import build_gallery_index
from oml_core.io import read_embeddings_file
from oml_core.lightning.pipelines import extractor_prediction_pipeline
from oml_core.registry import ConfigError

PREDICTION = "extractor_prediction_pipeline"
#: Eight mock pictures (two per label), in the sorted order of their names (a folder is predicted so).
PICTURES = [0, 1, 8, 9, 16, 17, 24, 25]
FORMATS = ("json", "parquet", "npy")


@dataclass(frozen=True)
class World:
    root: Path  # images/ and df.csv (the pictures' rows, in the folder's order, labelled)
    predictions: dict[str, Path]  # the file of each format
    index: Path  # built from df.csv, its gallery also written as gallery.parquet
    gallery: Path


def _predict(save_dir: Path, data_dir: Path, *overrides: str) -> dict:
    base = [
        f"data_dir={data_dir}",
        f"save_dir={save_dir}",
        "bs=3",  # three batches, the last of two
        "transforms_predict.args.im_size=32",
        "lightning_trainer_extra_args.enable_progress_bar=false",
        *overrides,
    ]
    return OmegaConf.to_container(compose_config(PREDICTION, base))


def _index_config(root: Path, index_dir: Path, *overrides: str, calibrated: bool = False) -> dict:
    base = [
        f"dataset_root={root}",
        f"index_dir={index_dir}",
        "transforms.args.im_size=32",
        *([] if calibrated else ["calibration=null"]),
        *overrides,
    ]
    return OmegaConf.to_container(compose_config("index_build", base))


@pytest.fixture(scope="module")
def world(tmp_path_factory, oml_cache_dir) -> World:
    mock = get_mock_dataset_root(oml_cache_dir)
    root = tmp_path_factory.mktemp("pictures")
    (root / "images").mkdir()
    df = pd.read_csv(mock / "df.csv").iloc[PICTURES]
    names = [f"{n:03d}_{Path(path).name}" for n, path in zip(PICTURES, df["path"])]
    for name, path in zip(names, df["path"]):
        shutil.copyfile(mock / path, root / "images" / name)
    df.assign(path=[f"images/{name}" for name in names]).to_csv(root / "df.csv", index=False)
    predictions = {}
    for name in FORMATS:
        result = extractor_prediction_pipeline(
            _predict(root / name, root / "images", f"predictions_format={name}")
        )
        predictions[name] = result.predictions_path
    gallery = root / "gallery.parquet"
    build_gallery_index(
        _index_config(root, root / "index", f"embeddings_out={gallery}", "predictions_format=parquet")
    )
    return World(root, predictions, root / "index", gallery)


def test_every_format_holds_the_json_vectors_bit_for_bit(world):
    assert {
        name: sorted(p.name for p in path.parent.iterdir()) for name, path in world.predictions.items()
    } == {
        "json": ["predictions.json", "predictions.json.meta.json"],
        "parquet": ["predictions.parquet"],
        "npy": ["predictions.npy", "predictions.npy.meta.json"],
    }
    oml = json.loads(world.predictions["json"].read_text())  # OML's format: {path: [feature, ...]}
    paths = sorted(str(p) for p in (world.root / "images").iterdir())
    assert list(oml) == paths
    expected = np.array(list(oml.values()), dtype=np.float32)
    assert expected.shape == (8, 512)
    files = {name: read_embeddings_file(path) for name, path in world.predictions.items()}
    for found in files.values():
        assert found.ids == list(range(8)) and found.paths == paths and found.labels == [None] * 8
        assert np.array_equal(np.asarray(found.embeddings).view(np.uint32), expected.view(np.uint32))
        assert found.provenance == files["json"].provenance
    provenance = files["npy"].provenance
    assert provenance.extractor["name"] == "resnet" and provenance.extractor["args"]["weights"] is None
    assert provenance.transforms == {"name": "norm_resize", "args": {"im_size": 32}}


def _answers(index_dir: Path, queries: list[str]) -> list[list[tuple]]:
    hits = GalleryIndex.load(index_dir).search(queries, top_k=4)
    return [[(h.rank, h.id, h.path, h.label, h.distance) for h in row] for row in hits]


def test_an_index_built_from_its_embeddings_file_answers_as_the_index(world, tmp_path):
    gallery = read_embeddings_file(world.gallery)
    index = GalleryIndex.load(world.index)
    assert gallery.ids == index.ids and gallery.paths == index.paths and gallery.labels == index.labels
    assert gallery.labels == [0, 0, 1, 1, 2, 2, 3, 3]
    assert np.array_equal(gallery.embeddings, index.embeddings.numpy())

    result = build_gallery_index(
        _index_config(world.root, tmp_path / "again", f"embeddings={world.gallery}", calibrated=True)
    )
    assert result.source == world.gallery and "holds no validation split" in result.not_calibrated
    queries = [
        str(world.root / "images" / name)
        for name in sorted(p.name for p in (world.root / "images").iterdir())
    ]
    assert _answers(tmp_path / "again", queries) == _answers(world.index, queries)


def test_an_index_built_from_oml_predicts_file_finds_the_same_items(world, tmp_path):
    """The predictions of a folder (ids: positions in the sorted folder, no labels) of the rows of df.csv, which
    lists the same pictures in the same order: the index answers with the same items and distances."""
    config = _index_config(world.root, tmp_path / "from_npy", f"embeddings={world.predictions['npy']}")
    build_gallery_index(config)
    queries = [str(world.root / "images" / p.name) for p in sorted((world.root / "images").iterdir())][:3]
    from_predictions, from_images = _answers(tmp_path / "from_npy", queries), _answers(world.index, queries)
    for row, expected in zip(from_predictions, from_images):
        assert [hit[:3] for hit in row] == [hit[:3] for hit in expected]
        assert [hit[3] for hit in row] == [None] * 4
        assert [hit[4] for hit in row] == pytest.approx([hit[4] for hit in expected], abs=1e-5)


def test_a_file_of_another_model_is_refused_naming_both(world, tmp_path):
    file = world.predictions["parquet"]
    digest = read_embeddings_file(file).provenance.weights_sha256
    with pytest.raises(
        ConfigError,
        match=rf"^embeddings: {re.escape(str(file))}: its embeddings were made with weights_sha256 {digest}, the "
        rf"configured model's is (?!{digest})[0-9a-f]{{64}}: they are not the configured model's embeddings "
        r"\(configure the weights that made them, e\.g\. extractor\.args\.weights=the checkpoint given to oml "
        r"predict\)$",
    ):
        build_gallery_index(_index_config(world.root, tmp_path / "seeded", f"embeddings={file}", "seed=7"))
    with pytest.raises(
        ConfigError,
        match=r"made with transforms \{.*\"im_size\":32.*\}, the configured model's is \{.*\"im_size\":48.*"
        r"\(configure the transforms that made them\)$",
    ):
        build_gallery_index(
            _index_config(world.root, tmp_path / "bigger", f"embeddings={file}", "transforms.args.im_size=48")
        )
    oml_json = tmp_path / "oml.json"  # OML's own predictions.json, without a sidecar
    shutil.copyfile(world.predictions["json"], oml_json)
    with pytest.raises(ConfigError, match=re.escape(f"embeddings: {oml_json}: records no provenance")):
        build_gallery_index(_index_config(world.root, tmp_path / "oml", f"embeddings={oml_json}"))
    assert not any(tmp_path.glob("seeded*")) and not any(tmp_path.glob("bigger*"))


def test_the_cli_says_a_bad_key_in_one_line_before_any_work(world, tmp_path, capsys):
    cases = {
        f"embeddings_out={tmp_path / 'g.npy'} predictions_format=parquet": f"embeddings_out: {tmp_path / 'g.npy'}: "
        "a parquet embeddings file must end with .parquet",
        f"embeddings_out={world.gallery} predictions_format=parquet": f"embeddings_out: {world.gallery}: exists",
        f"embeddings={tmp_path / 'none.npy'}": f"embeddings: {tmp_path / 'none.npy'}: no such embeddings file",
        f"embeddings={world.root / 'df.csv'}": "embeddings: ",
    }
    for overrides, message in cases.items():
        args = [
            "index",
            "build",
            f"dataset_root={world.root}",
            f"index_dir={tmp_path / 'index'}",
            *overrides.split(),
        ]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"oml index build: error: {message}" in err
    assert not (tmp_path / "index").exists()


def test_prediction_files_are_checked_before_any_work(world, tmp_path):
    save_dir = tmp_path / "out"
    save_dir.mkdir()
    (save_dir / "predictions.npy.meta.json").write_text("kept")
    with pytest.raises(
        ConfigError, match=re.escape(f"'{save_dir / 'predictions.npy.meta.json'}' exists and is never")
    ):
        extractor_prediction_pipeline(_predict(save_dir, world.root / "images", "predictions_format=npy"))
    assert [p.name for p in save_dir.iterdir()] == ["predictions.npy.meta.json"]
