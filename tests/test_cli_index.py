"""``oml index build`` then ``oml search`` on pictures of the mock dataset, with the default config's extractor
(a ResNet18 with random weights, seeded, so that ``oml search`` rebuilds the same one) and its calibration; the
one-line errors of bad input; and the README's section on serving a gallery, run as written."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf
from PIL import Image

from oml_core.cli import main
from oml_core.config.compose import compose_config
from oml_core.config.schemas import GALLERY_ROWS_OPTIONS, IndexBuildConfig
from oml_core.config.typed import validate_config
from oml_core.datasets.mock import generate_mock_dataset, get_mock_dataset_root
from oml_core.index import GalleryIndex, GalleryItem
from oml_core.index.build import INDEX_BUILD, build_gallery_index
from oml_core.index.gallery import GALLERY_ROWS
from oml_core.index.generations import writer_lock
from oml_core.index.item_table import ItemTable
from oml_core.index.manifest import file_digest
from oml_core.registry import ConfigError, Registry

README = Path(__file__).resolve().parents[1] / "README.md"


@dataclass(frozen=True)
class World:
    """A small dataset of mock pictures, the index built from it, and query images."""

    root: Path
    index: Path
    gallery_image: Path  # a train row's picture: in the gallery once
    held_out: Path  # a picture of a mock label that no row has


@pytest.fixture(scope="module")
def world(tmp_path_factory, oml_cache_dir) -> World:
    """The dataset (mock pictures are named by their row in the mock dataset; label ``l`` has rows
    ``8l .. 8l+7``):

    - train rows: pictures 0, 8, 16 (mock labels 0, 1, 2), each its own sequence;
    - validation rows, "1 vs rest": picture 128 (label 16) and a byte-identical copy of it, picture 136 (label
      17) and a copy of it, each of the four in its own sequence;
    - validation rows F1, a query only: picture 133, a second rendering of label 16's figure, given the label
      18; and F2, a gallery item only: picture 144 (of label 18), in F1's sequence, so that F1 cannot retrieve
      it: F1 has no true match, and its nearest gallery item (128 or 136) is a false match.

    The index is built from every row, with the default config (calibrated to a precision of 0.9)."""
    mock = get_mock_dataset_root(oml_cache_dir)
    root = tmp_path_factory.mktemp("figures")
    (root / "images").mkdir()
    mock_paths = pd.read_csv(mock / "df.csv")["path"]  # the mock's row ``number`` is named as OML names it

    def copy_as_png(number: int, target: Path) -> Path:
        with Image.open(mock / mock_paths[number]) as image:
            image.save(target, format="PNG")
        return target

    for number in (0, 8, 16, 128, 136, 133, 144):
        copy_as_png(number, root / "images" / f"{number:06d}.png")
    for number in (128, 136):
        copy_as_png(number, root / "images" / f"{number:06d}_copy.png")
    rows = [
        (0, "000000.png", "train", None, None, "t0"),
        (1, "000008.png", "train", None, None, "t1"),
        (2, "000016.png", "train", None, None, "t2"),
        (16, "000128.png", "validation", True, True, "s1"),
        (16, "000128_copy.png", "validation", True, True, "s2"),
        (17, "000136.png", "validation", True, True, "s3"),
        (17, "000136_copy.png", "validation", True, True, "s4"),
        (18, "000133.png", "validation", True, False, "s5"),
        (18, "000144.png", "validation", False, True, "s5"),
    ]
    df = pd.DataFrame(rows, columns=["label", "path", "split", "is_query", "is_gallery", "sequence"])
    df.assign(path="images/" + df["path"]).to_csv(root / "df.csv", index=False)
    queries = tmp_path_factory.mktemp("queries")
    held_out = copy_as_png(184, queries / "label_23.png")  # mock label 23
    index = root.parent / f"{root.name}_index"
    assert main(["index", "build", f"dataset_root={root}", f"index_dir={index}"]) == 0
    return World(root, index, root / "images" / "000008.png", Path(held_out))


def search_json(*args: str, capsys) -> dict:
    assert main(["search", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_build_reports_its_index_and_calibration(world, capsys):
    index = world.root.parent / "again"
    assert main(["index", "build", f"dataset_root={world.root}", f"index_dir={index}"]) == 0
    out = capsys.readouterr().out
    assert f"Gallery index:    9 items of {world.root / 'df.csv'} (knn backend 'exact', l2)" in out
    assert "Calibration:      threshold " in out and "(precision 0.9): precision 1.0000, recall 1.0000" in out
    assert f"Index folder:     {index}" in out
    assert {p.name for p in index.iterdir()} >= {"index.json", "gen-1"}
    assert {p.name for p in (index / "gen-1").iterdir()} >= {"backend", "calibration.json", "calibration.png"}


def test_a_gallery_image_finds_itself_first_and_matches(world, capsys):
    report = search_json(str(world.index), str(world.gallery_image), "--top-k", "3", capsys=capsys)
    (query,) = report["queries"]
    first = query["results"][0]
    assert first["path"] == str(world.gallery_image) and first["label"] == 1 and first["id"] == 1
    assert first["distance"] < 1e-3 and first["match"] is True and query["match"] is True
    assert [hit["rank"] for hit in query["results"]] == [1, 2, 3]


def test_a_picture_of_a_held_out_label_is_no_match(world, capsys):
    """Why it holds: copies of a picture are at distance ~0, two different pictures of the mock dataset at
    >= 0.09 under this extractor (its weights are seeded). The calibration sees the copies match at ~0 and the
    impostor F1 (a second rendering of picture 128's figure, at ~0.13 from it) as a false match: to keep the
    precision at 0.9 its threshold falls half way between them (~0.07). The held-out picture (label 23, in no
    row) has no copy in the gallery: its nearest gallery item is a different picture, further than that."""
    report = search_json(str(world.index), str(world.held_out), str(world.gallery_image), capsys=capsys)
    held_out, gallery_image = report["queries"]
    threshold = report["threshold"]
    assert 0.01 < threshold < 0.09
    assert held_out["query"] == str(world.held_out)
    assert held_out["match"] is False and all(hit["match"] is False for hit in held_out["results"])
    assert held_out["results"][0]["distance"] > threshold
    assert gallery_image["match"] is True  # the same index answers match for a picture it has


def test_the_table_shows_match_and_no_match(world, capsys):
    assert (
        main(["search", str(world.index), str(world.held_out), str(world.gallery_image), "--top-k", "2"]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(rf"{re.escape(str(world.held_out))}: no match \(threshold 0\.\d+\)", lines[0])
    assert lines[1].split() == ["rank", "distance", "match", "label", "id", "path"]
    assert lines[2].split()[2:4] == ["no", "match"] and lines[3].split()[2:4] == ["no", "match"]
    assert lines[4].startswith(f"{world.gallery_image}: match (threshold ")
    assert lines[6].split()[2] == "match" and lines[6].split()[-1] == str(world.gallery_image)


def test_control_characters_of_tampered_items_are_escaped_in_the_table_not_in_the_json(
    world, tmp_path, capsys
):
    """An ``items.arrow`` whose paths were given ESC sequences (colour, window title), a C1 CSI, a DEL and a bidi
    override, its manifest entry made to agree: the table shows them escaped, the JSON exactly; nothing in the
    index changes."""
    index = Path(shutil.copytree(world.index, tmp_path / "index"))
    items_file = index / "gen-1" / "items.arrow"
    items, uid = ItemTable.read(items_file, 9)
    tampered = "\x1b]0;title\x07\x1b[31mred\x1b[0m\x9b2J\x7f\u202etxt.exe 日本"
    ItemTable.of(items.ids, [tampered] * len(items), items.labels, items.keys).write(items_file, uid, 5)
    meta = json.loads((index / "index.json").read_text())
    meta["manifest"]["files"]["gen-1/items.arrow"] = file_digest(items_file)
    (index / "index.json").write_text(json.dumps(meta))
    before = {p: p.read_bytes() for p in index.rglob("*") if p.is_file()}

    assert main(["search", str(index), str(world.gallery_image), "--top-k", "1"]) == 0
    out = capsys.readouterr().out
    assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202e]", out)
    assert out.splitlines()[2].endswith(
        "  \\x1b]0;title\\x07\\x1b[31mred\\x1b[0m\\x9b2J\\x7f\\u202etxt.exe 日本"
    )
    hit = search_json(str(index), str(world.gallery_image), "--top-k", "1", capsys=capsys)["queries"][0][
        "results"
    ][0]
    assert hit["path"] == tampered
    assert {p: p.read_bytes() for p in index.rglob("*") if p.is_file()} == before


def test_a_folder_of_images_builds_an_index_without_calibration(world, tmp_path, capsys):
    index = tmp_path / "folder_index"
    assert main(["index", "build", f"data_dir={world.root / 'images'}", f"index_dir={index}"]) == 0
    out = capsys.readouterr().out
    assert "9 items of" in out and "Calibration:      none (a folder of images has no labels)" in out
    assert main(["search", str(index), str(world.gallery_image), "--top-k", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{world.gallery_image}: (the index is not calibrated: distances only)"
    assert lines[1].split() == ["rank", "distance", "label", "id", "path"]
    assert lines[2].split()[2:] == ["-", "1", str(world.gallery_image)]  # 000008.png: the 2nd file by name


def test_a_dataframe_without_validation_rows_builds_an_index_without_calibration(world, tmp_path, capsys):
    df = pd.read_csv(world.root / "df.csv")
    df[df["split"] == "train"].to_csv(world.root / "train_only.csv", index=False)
    index = tmp_path / "train_index"
    build = [f"dataset_root={world.root}", "dataframe_name=train_only.csv", f"index_dir={index}"]
    assert main(["index", "build", *build]) == 0
    out = capsys.readouterr().out
    assert f"Gallery index:    3 items of {world.root / 'train_only.csv'}" in out
    assert f"Calibration:      none ({world.root / 'train_only.csv'} has no split=validation rows)" in out
    report = search_json(str(index), str(world.gallery_image), "--top-k", "1", capsys=capsys)
    assert report["threshold"] is None and report["queries"][0]["results"][0]["id"] == 1


def one_error_line(capsys, argv: list[str], *fragments: str) -> str:
    status = main(argv)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert status == 2 and len(lines) == 1, captured.err
    for fragment in fragments:
        assert fragment in lines[0]
    return lines[0]


def test_bad_search_input_is_one_line(world, tmp_path, capsys):
    index, image = str(world.index), str(world.gallery_image)
    one_error_line(capsys, ["search", str(tmp_path / "nowhere"), image], "oml search: error: ", "nowhere")
    corrupt = tmp_path / "corrupt"
    shutil.copytree(world.index, corrupt)
    (corrupt / "index.json").write_text("{not json")
    one_error_line(
        capsys, ["search", str(corrupt), image], "oml search: error: ", str(corrupt / "index.json")
    )
    one_error_line(capsys, ["search", index, str(tmp_path / "no.png")], "image file not found", "no.png")
    (tmp_path / "text.png").write_text("a text file")
    one_error_line(
        capsys, ["search", index, str(tmp_path / "text.png")], "cannot read the image file", "text.png"
    )
    one_error_line(capsys, ["search", index, image, "--top-k", "0"], "--top-k: must be a positive integer")
    one_error_line(capsys, ["search", index], "required: QUERY")
    # an empty argument (a shell variable that was not set) would be read as the working folder
    one_error_line(capsys, ["search", index, image, ""], "oml search: error: QUERY number 2 of 2 is empty")


# ------------------------------------------------------------------------------ an index that changes
def test_an_error_line_naming_a_path_with_control_characters_escapes_them(world, tmp_path, capsys):
    """A query file whose name holds an ESC sequence and a C1 CSI is named in the error line escaped."""
    text_file = tmp_path / "a\x1b[2Jb\x9bc.png"
    text_file.write_text("not an image")
    line = one_error_line(capsys, ["search", str(world.index), str(text_file)], "cannot read the image file")
    assert "a\\x1b[2Jb\\x9bc.png" in line
    assert not re.search("[\x00-\x1f\x7f-\x9f]", line)
    assert text_file.read_text() == "not an image"


#: ``oml ARGV`` under a file-size limit of 4 MB (``ulimit -f``), SIGXFSZ ignored so that a write past it fails
#: with EFBIG (as in a shell that ignores it) instead of killing the process.
UNDER_A_FILE_SIZE_LIMIT = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4_000_000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
from oml_core.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_file_size_limit_is_one_line_naming_the_file_and_nothing_is_lost(world, tmp_path, oml_cache_dir):
    """A real limit: the index's weights (a ResNet18, 45 MB) cannot be written; one user error naming the file
    (not an internal error), the dataset untouched and no half-written file or folder left."""
    dataset = {p: p.read_bytes() for p in world.root.rglob("*") if p.is_file()}
    index = tmp_path / "index"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            UNDER_A_FILE_SIZE_LIMIT,
            "index",
            "build",
            f"dataset_root={world.root}",
            f"index_dir={index}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OML_CACHE_DIR": str(oml_cache_dir)},
    )
    assert done.returncode == 2, done.stderr[-3000:]
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("oml index build: ")]
    written = (
        rf"{re.escape(str(tmp_path))}/(index|\.tmp-index\.\d+)/weights\.pt"  # the index is renamed whole
    )
    assert re.fullmatch(
        rf"oml index build: error: cannot write '{written}': File too large \(no file was written\)", line
    ), line
    assert {p: p.read_bytes() for p in world.root.rglob("*") if p.is_file()} == dataset
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and p.stat().st_size >= 4_000_000]
    assert not list(tmp_path.rglob(".tmp-*")) and not index.exists()


def test_index_add_remove_and_calibrate_change_the_index_in_one_line_each(world, tmp_path, capsys):
    """``oml index add`` (new ids, then an id it has: updated), ``oml index remove`` and ``oml index calibrate``
    each print one line; ``oml search`` then finds what was added, never what was removed, and says when the
    calibration is stale; the calibration of the same split and model is the one the build made."""
    index = tmp_path / "index"
    shutil.copytree(world.index, index)
    assert main(["index", "add", str(index), str(world.held_out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "added 1, updated 0, generation 2"
    answer = search_json(str(index), str(world.held_out), "--top-k", "2", capsys=capsys)
    first = answer["queries"][0]["results"][0]
    assert answer["calibration_stale"] is True and (first["id"], first["path"]) == (9, str(world.held_out))
    assert first["distance"] < 1e-3 and first["label"] is None
    assert main(["search", str(index), str(world.held_out)]) == 0
    assert (
        capsys.readouterr().out.splitlines()[0].endswith(f"(calibration stale: oml index calibrate {index})")
    )

    assert main(["index", "add", str(index), str(world.gallery_image), "--ids", "9", "--labels", "4"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "added 0, updated 1, generation 3"
    assert GalleryIndex.load(index).item(9) == GalleryItem(9, str(world.gallery_image), 4)
    assert main(["index", "remove", str(index), "9", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "removed 2, generation 4"
    results = search_json(str(index), str(world.gallery_image), "--top-k", "9", capsys=capsys)["queries"][0]
    assert sorted(hit["id"] for hit in results["results"]) == [0, 2, 3, 4, 5, 6, 7, 8]

    assert main(["index", "calibrate", str(index)]) == 0
    assert re.fullmatch(r"calibrated: threshold .*; generation 5", capsys.readouterr().out.splitlines()[-1])
    calibration = json.loads((index / "gen-5" / "calibration.json").read_text())
    assert calibration == json.loads((world.index / "gen-1" / "calibration.json").read_text())
    assert search_json(str(index), str(world.gallery_image), capsys=capsys)["calibration_stale"] is False

    with writer_lock(index, timeout=1):  # another process is changing it
        one_error_line(
            capsys,
            ["index", "remove", str(index), "0", "--lock-timeout", "0.1"],
            f"oml index remove: error: {index / 'index.lock'}: another process is changing the index "
            f"(waited 0.1 s); try again",
        )
    one_error_line(
        capsys, ["index", "remove", str(index), "42", "0"], f"error: {index}: no item has the id 42"
    )
    one_error_line(capsys, ["index", "remove", str(index), "0", "0"], "error: the id 0 is given twice")
    one_error_line(capsys, ["index", "remove", str(index), "zero"], "ID: must be an integer id, got 'zero'")
    nowhere = tmp_path / "nowhere.png"
    one_error_line(capsys, ["index", "add", str(index), str(nowhere)], "oml index add: error: ", str(nowhere))
    one_error_line(
        capsys,
        ["index", "add", str(index), str(world.held_out), "--ids", "1,2"],
        "error: --ids gives 2 values to the 1 items of SOURCE",
    )
    one_error_line(
        capsys,
        ["index", "add", str(index), str(world.held_out), "--labels", "1,x"],
        "--labels: must be integer labels separated by commas, got '1,x'",
    )
    one_error_line(
        capsys, ["index", "add", str(index), str(world.held_out), "--ids", "3,3"], "the id 3 is given twice"
    )
    one_error_line(
        capsys, ["index", "calibrate", str(tmp_path / "none")], "none: no such gallery index folder"
    )
    unchanged = GalleryIndex.load(index)
    assert unchanged.generation == 5 and unchanged.ids == [0, 2, 3, 4, 5, 6, 7, 8]


def test_index_add_names_an_item_by_its_absolute_path(world, tmp_path, monkeypatch, capsys):
    """``oml index add`` of a path relative to the working folder names the item by its absolute path, as a
    build names its items, so that ``oml search`` and ``oml serve`` elsewhere find its file."""
    index = tmp_path / "index"
    shutil.copytree(world.index, index)
    monkeypatch.chdir(world.held_out.parent)
    assert main(["index", "add", str(index), world.held_out.name, "--ids", "50"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "added 1, updated 0, generation 2"
    assert GalleryIndex.load(index).item(50) == GalleryItem(50, str(world.held_out.resolve()), None)


def test_a_calibration_that_cannot_be_made_names_the_keys_that_change_it(world, tmp_path, capsys):
    """A validation split whose one query has no true match it may retrieve (F1, whose true match F2 is in its
    sequence): no calibration, and the one line names the keys that change the target or build the index
    without one; nothing is written."""
    root = tmp_path / "impostor"
    (root / "images").mkdir(parents=True)
    for name in ("000128.png", "000133.png", "000144.png"):
        shutil.copy(world.root / "images" / name, root / "images" / name)
    rows = [
        (16, "images/000128.png", "validation", False, True, "s1"),
        (18, "images/000133.png", "validation", True, False, "s5"),
        (18, "images/000144.png", "validation", False, True, "s5"),
    ]
    columns = ["label", "path", "split", "is_query", "is_gallery", "sequence"]
    pd.DataFrame(rows, columns=columns).to_csv(root / "df.csv", index=False)
    line = one_error_line(
        capsys,
        ["index", "build", f"dataset_root={root}", f"index_dir={tmp_path / 'index'}"],
        "oml index build: error: calibration: cannot calibrate on 1 queries of which 0 have a true match",
        "(calibration.target=f1 or a lower calibration.value changes the target; calibration=null builds the "
        "index without a match threshold)",
    )
    assert not (tmp_path / "index").exists(), line


def test_bad_build_input_is_one_line_and_writes_nothing(world, tmp_path, capsys):
    before = sorted(p.name for p in world.index.iterdir())
    one_error_line(
        capsys,
        ["index", "build", f"dataset_root={world.root}", f"index_dir={world.index}"],
        "oml index build: error: ",
        "exists and is not an empty folder",
    )
    assert sorted(p.name for p in world.index.iterdir()) == before
    new = tmp_path / "new_index"
    root = f"dataset_root={world.root}"
    for argv, fragment in [
        (
            [root, f"index_dir={new}", "calibration.target=f1", "calibration.value=0.5"],
            "f1 (the highest F1) takes",
        ),
        ([root, f"index_dir={new}", "gallery_rows=some"], "gallery_rows must be one of ['all', 'gallery']"),
        ([root, f"index_dir={new}", "dataframe_name=nope.csv"], "nope.csv"),
        ([root, f"index_dir={new}", "knn_backend.name=exakt"], "Did you mean: exact"),
        ([f"index_dir={new}", "bs=0"], "bs must be an integer >= 1, got 0"),
        (["idnex_dir=x"], "did you mean 'index_dir'"),
    ]:
        one_error_line(capsys, ["index", "build", *argv], "oml index build: error: ", fragment)
    assert not new.exists()


def test_a_bad_dataset_of_an_index_is_one_line_and_writes_nothing(world, tmp_path, capsys):
    new = tmp_path / "new_index"
    root = f"dataset_root={world.root}"
    for argv, fragment in [
        (["dataset.name=imagez"], "Unknown dataset 'imagez'"),
        (["dataset={name: images, args: {cache_size: -1}}"], "cache_size must be >= 0"),
        (["check_images=maybe"], "check_images must be true or false, got 'maybe'"),
    ]:
        one_error_line(
            capsys, ["index", "build", root, f"index_dir={new}", *argv], "oml index build: error: ", fragment
        )
    assert not new.exists()


def test_the_typed_config_builds_the_index_the_dict_does(world, tmp_path):
    """The config enters once: the object ``validate_config`` makes of the composed config builds the index that
    ``oml index build`` built of the config itself (the same config, items, embeddings and calibration)."""
    registry = Registry()
    cfg = compose_config(
        INDEX_BUILD, [f"dataset_root={world.root}", f"index_dir={tmp_path / 'typed'}"], registry=registry
    )
    config = validate_config(cfg, INDEX_BUILD)
    assert isinstance(config, IndexBuildConfig) and config.bs == 64 and config.gallery_rows == "all"
    result = build_gallery_index(config, registry=registry)
    assert result.index_dir == tmp_path / "typed" and result.source == world.root / "df.csv"
    for name in ("index.json", "gen-1/items.arrow", "gen-1/calibration.json", "gen-1/embeddings.npy"):
        assert (result.index_dir / name).read_bytes() == (world.index / name).read_bytes(), name
    typed, built = (
        torch.load(folder / "gen-1" / "embeddings.pt", weights_only=True)
        for folder in (result.index_dir, world.index)
    )
    assert np.load(result.index_dir / "gen-1" / "embeddings.npy").shape == (9, 512)
    assert torch.equal(typed["probe"], built["probe"])


def test_an_index_config_refuses_what_it_does_not_know_and_checks_a_typed_object_again(world, tmp_path):
    """Unlike a pipeline's, the index's config has no variables of the user's: every unknown key is refused (with
    the close known one, as the pipelines say it); a typed config built by hand is checked like a dict."""
    cfg = OmegaConf.to_container(
        compose_config(INDEX_BUILD, [f"dataset_root={world.root}"], registry=Registry())
    )
    new = tmp_path / "new_index"
    with pytest.raises(
        ConfigError, match=r"^index_build: unknown config key 'colour' \(known keys: accelerator, bs, calib"
    ):
        build_gallery_index({**cfg, "colour": "red", "index_dir": str(new)})
    with pytest.raises(
        ConfigError, match=r"^index_build: unknown config key 'gallery_row'; did you mean 'gall"
    ):
        build_gallery_index({**cfg, "gallery_row": "all", "index_dir": str(new)})
    with pytest.raises(ConfigError, match=r"^index_build: the config lacks the key\(s\) \['knn_backend'\]$"):
        build_gallery_index({key: value for key, value in cfg.items() if key != "knn_backend"})
    config = validate_config({**cfg, "index_dir": str(new)}, INDEX_BUILD)
    with pytest.raises(ConfigError, match=r"^bs must be an integer >= 1, got 0$"):
        build_gallery_index(replace(config, bs=0))
    with pytest.raises(ConfigError, match=r"^give either data_dir \(a folder of images\) or dataset_root"):
        build_gallery_index(replace(config, data_dir=str(world.root / "images")))
    with pytest.raises(
        ConfigError, match=r"^calibration: target must be one of \['precision', 'f1', 'fmr'\]"
    ):
        build_gallery_index(replace(config, calibration={"target": "recall"}))
    assert not new.exists()


def test_the_schema_names_the_gallery_rows_of_the_index():
    assert GALLERY_ROWS_OPTIONS == GALLERY_ROWS


def test_the_search_command_runs_as_a_program(world, run_oml):
    result = run_oml("search", str(world.index), str(world.held_out), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["queries"][0]["match"] is False


def readme_section() -> str:
    text = README.read_text(encoding="utf-8")
    return text.split("\n## Serving a gallery index\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_section_runs_as_written(tmp_path, oml_cache_dir, monkeypatch, capsys):
    """Its shell commands (``oml ARGS`` as ``main(ARGS)``) in a folder holding ``my_dataset`` (the mock dataset,
    as ``oml mock-dataset my_dataset`` writes it earlier in the README), then its Python snippet."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    monkeypatch.chdir(tmp_path)
    generate_mock_dataset(tmp_path / "my_dataset")
    section = readme_section()
    (shell,) = re.findall(r"^```sh\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    commands = [shlex.split(line, comments=True) for line in shell.splitlines() if line.strip()]
    assert [argv[:2] for argv in commands] == [
        ["oml", "index"],
        *[["oml", "search"]] * 3,
        *[["oml", "index"]] * 3,
    ]
    for argv in commands:
        assert main(argv[1:]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert '"threshold": 0.' in out
    for line in ("added 1, updated 0, generation 2", "removed 2, generation 3", "; generation 4"):
        assert line in out
    named = re.findall(
        r"^(my_dataset/images/[a-z]+_\d+\.jpg): (?:no )?match \(threshold", out, flags=re.MULTILINE
    )
    rows = [f"my_dataset/{path}" for path in pd.read_csv(tmp_path / "my_dataset" / "df.csv")["path"]]
    assert named == [rows[0], *rows]  # the image of the first search, then the csv's rows in order

    (snippet,) = re.findall(r"^```python\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    namespace: dict = {}
    exec(compile(snippet, "README: serving a gallery index", "exec"), namespace)
    hits = namespace["hits"]
    assert hits[0].path.endswith("circle_1.jpg") and hits[0].distance < 1e-3 and hits[0].match is True
    assert namespace["postprocessor"].th == namespace["index"].calibration.threshold
    gallery = tmp_path / "my_gallery"  # generation 2: a segment of the log of generation 1
    assert (gallery / "gen-1" / "calibration.png").is_file() and (gallery / "gen-1" / "log-2.pt").is_file()
    assert GalleryIndex.load(tmp_path / "my_gallery").item(1000).path.endswith("circle_1.jpg")


# ----------------------------------------------------------------- a self-contained index, checked at search
RESNET_ARGS = {"arch": "resnet18", "gem_p": None, "remove_fc": True, "normalise_features": True}


def save_resnet_checkpoint(path: Path, seed: int) -> Path:
    """The state dict of a ResNet18 extractor of random weights drawn from ``seed``, as ``oml train`` would
    leave a checkpoint."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Registry().build("extractor", {"name": "resnet", "args": {"weights": None, **RESNET_ARGS}})
    torch.save(model.state_dict(), path)
    return path


@dataclass(frozen=True)
class CheckpointIndex:
    """A copy of an index built from a checkpoint (``transforms.args.im_size=32``), and query pictures."""

    folder: Path
    checkpoint: Path  # the path the index was built from (index.json's extractor.args.weights)
    queries: list[str]

    def answers(self, capsys, folder: Path | None = None) -> list[dict]:
        """The "queries" of ``oml search --format json --top-k 4`` of the index (at ``folder`` when given)."""
        report = search_json(str(folder or self.folder), *self.queries, "--top-k", "4", capsys=capsys)
        assert report["index"] == str(folder or self.folder)
        return report["queries"]


@pytest.fixture(scope="module")
def built_from_checkpoint(world, tmp_path_factory) -> tuple[Path, Path]:
    """The folder of an index built once from a checkpoint, and the checkpoint's path; tests take it through
    :func:`checkpoint_index`, which copies it."""
    tmp = tmp_path_factory.mktemp("from_checkpoint")
    checkpoint = save_resnet_checkpoint(tmp / "best.ckpt", seed=1)
    folder = tmp / "ckpt_index"
    build = [f"dataset_root={world.root}", f"index_dir={folder}", f"extractor.args.weights={checkpoint}"]
    assert main(["index", "build", *build, "transforms.args.im_size=32"]) == 0
    return folder, checkpoint


@pytest.fixture()
def checkpoint_index(world, built_from_checkpoint, tmp_path, capsys) -> CheckpointIndex:
    """A copy of the index built from a checkpoint, with the checkpoint as it was built from (at its path)."""
    built, checkpoint = built_from_checkpoint
    capsys.readouterr()
    folder = Path(shutil.copytree(built, tmp_path / "ckpt_index"))
    save_resnet_checkpoint(checkpoint, seed=1)  # as it was, whatever a test did to it
    return CheckpointIndex(folder, checkpoint, [str(world.held_out), str(world.gallery_image)])


def test_search_answers_the_same_after_the_checkpoint_is_replaced(checkpoint_index, capsys):
    expected = checkpoint_index.answers(capsys)
    assert [len(answer["results"]) for answer in expected] == [4, 4]
    assert expected[1]["results"][0]["path"] == checkpoint_index.queries[1]
    spec = {"name": "resnet", "args": {"weights": str(checkpoint_index.checkpoint), **RESNET_ARGS}}
    transforms = {"name": "norm_resize", "args": {"im_size": 32}}
    before = GalleryIndex(extractor=spec, transforms=transforms).embed(checkpoint_index.queries[:1])
    save_resnet_checkpoint(checkpoint_index.checkpoint, seed=2)  # other weights under the same name
    after = GalleryIndex(extractor=spec, transforms=transforms).embed(checkpoint_index.queries[:1])
    assert float((before - after).norm()) > 0.1  # the path now names another model
    assert checkpoint_index.answers(capsys) == expected


def test_search_answers_the_same_after_the_index_is_moved_and_the_checkpoint_deleted(
    checkpoint_index, tmp_path, capsys
):
    expected = checkpoint_index.answers(capsys)
    (tmp_path / "elsewhere").mkdir()
    moved = Path(shutil.move(checkpoint_index.folder, tmp_path / "elsewhere" / "index"))
    checkpoint_index.checkpoint.unlink()
    assert checkpoint_index.answers(capsys, folder=moved) == expected


def edit_index_json(folder: Path, edit) -> None:
    meta = json.loads((folder / "index.json").read_text())
    edit(meta)
    (folder / "index.json").write_text(json.dumps(meta, indent=1))


def test_an_edited_architecture_is_one_line_from_the_program_and_no_hits(checkpoint_index, run_oml):
    edit_index_json(
        checkpoint_index.folder, lambda d: d["config"]["extractor"]["args"].update(arch="resnet34")
    )
    result = run_oml("search", str(checkpoint_index.folder), checkpoint_index.queries[0])
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"oml search: error: {checkpoint_index.folder / 'index.json'}: its extractor.args.arch is 'resnet34', the "
        f"embeddings of embeddings.pt were built with 'resnet18': the index's config no longer matches what built "
        f"its embeddings; rebuild the index (oml index build)"
    ]


def test_an_edited_transforms_size_is_one_line(checkpoint_index, capsys):
    edit_index_json(checkpoint_index.folder, lambda d: d["config"]["transforms"]["args"].update(im_size=64))
    line = one_error_line(capsys, ["search", str(checkpoint_index.folder), checkpoint_index.queries[0]])
    assert "its transforms.args.im_size is 64, the embeddings of embeddings.pt were built with 32" in line


def test_weights_tampered_with_in_the_index_are_one_line_and_no_hits(checkpoint_index, capsys):
    weights = checkpoint_index.folder / "weights.pt"
    built_with = hashlib.sha256(weights.read_bytes()).hexdigest()
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit of a tensor
    weights.write_bytes(bytes(data))
    status = main(["search", str(checkpoint_index.folder), *checkpoint_index.queries])
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    assert captured.err.splitlines() == [
        f"oml search: error: the weights of the index {weights} have sha256 {hashlib.sha256(data).hexdigest()}, "
        f"the index was built with {built_with}: the file was changed; rebuild the index (oml index build)"
    ]


def test_embeddings_and_backend_of_another_index_are_one_line_and_no_hits(checkpoint_index, world, capsys):
    """The issue's case: another index of the same items (another model), its embeddings and backend copied in."""
    generation = checkpoint_index.folder / "gen-1"
    shutil.copyfile(world.index / "gen-1" / "embeddings.pt", generation / "embeddings.pt")
    shutil.rmtree(generation / "backend")
    shutil.copytree(world.index / "gen-1" / "backend", generation / "backend")
    status = main(["search", str(checkpoint_index.folder), *checkpoint_index.queries])
    captured = capsys.readouterr()
    assert status == 2 and captured.out == ""
    assert captured.err.splitlines() == [
        f"oml search: error: {generation / 'backend' / 'embeddings.npy'}, "
        f"{generation / 'backend' / 'exact_index.pt'}, {generation / 'embeddings.pt'}: not this index's (their "
        f"digests differ from {checkpoint_index.folder / 'index.json'}'s manifest); rebuild the index "
        f"(oml index build)"
    ]


def test_an_index_of_version_1_is_one_line_asking_to_rebuild(checkpoint_index, capsys):
    edit_index_json(checkpoint_index.folder, lambda d: d.update(version=1))
    one_error_line(
        capsys,
        ["search", str(checkpoint_index.folder), checkpoint_index.queries[0]],
        "an index of version 1, which keeps only the path of its weights",
        "rebuild the index (oml index build)",
    )


@pytest.fixture()
def query_folder(world, tmp_path) -> Path:
    """Two query pictures in a folder (``a.png``: held out, ``b.png``: a gallery picture)."""
    folder = tmp_path / "queries"
    folder.mkdir()
    shutil.copy(world.held_out, folder / "a.png")
    shutil.copy(world.gallery_image, folder / "b.png")
    return folder


def test_a_folder_and_a_csv_of_queries_answer_as_their_files(world, query_folder, tmp_path, capsys):
    index = str(world.index)
    files = [str(query_folder / "a.png"), str(query_folder / "b.png")]
    expected = search_json(index, *files, capsys=capsys)["queries"]
    assert [answer["query"] for answer in expected] == files and expected[1]["match"] is True

    assert search_json(index, str(query_folder), capsys=capsys)["queries"] == expected
    pd.DataFrame({"path": ["queries/a.png", "queries/b.png"], "label": [23, 1]}).to_csv(
        tmp_path / "queries.csv", index=False
    )
    assert search_json(index, str(tmp_path / "queries.csv"), capsys=capsys)["queries"] == expected
    (tmp_path / "lists").mkdir()
    pd.DataFrame({"path": ["a.png", "b.png"]}).to_csv(tmp_path / "lists" / "q.CSV", index=False)
    by_root = search_json(
        index, str(tmp_path / "lists" / "q.CSV"), "--dataset-root", str(query_folder), capsys=capsys
    )
    assert by_root["queries"] == expected
    mixed = search_json(index, files[1], str(tmp_path / "queries.csv"), capsys=capsys)["queries"]
    assert without_distances(mixed) == without_distances([expected[1], *expected])  # other batches:
    for answer, alike in zip(mixed, [expected[1], *expected]):  # float32 noise in the distances
        distances = [hit["distance"] for hit in alike["results"]]
        assert [hit["distance"] for hit in answer["results"]] == pytest.approx(distances, abs=1e-3)


def without_distances(answers: list[dict]) -> list[dict]:
    return [{**a, "results": [{**hit, "distance": None} for hit in a["results"]]} for a in answers]


def test_a_csv_of_queries_with_boxes_crops_them(world, tmp_path, capsys):
    """The left half of the gallery picture, as a box of a CSV row and as a file of its own, answer alike."""
    with Image.open(world.gallery_image) as image:
        width, height = image.size
        image.crop((0, 0, width // 2, height)).save(tmp_path / "left.png")
    shutil.copy(world.gallery_image, tmp_path / "whole.png")
    pd.DataFrame(
        {"path": ["whole.png"], "x_1": [0], "x_2": [width // 2], "y_1": [0], "y_2": [height]}
    ).to_csv(tmp_path / "boxes.csv", index=False)
    (boxed,) = search_json(str(world.index), str(tmp_path / "boxes.csv"), capsys=capsys)["queries"]
    (left,) = search_json(str(world.index), str(tmp_path / "left.png"), capsys=capsys)["queries"]
    (whole,) = search_json(str(world.index), str(tmp_path / "whole.png"), capsys=capsys)["queries"]
    assert boxed["query"] == str(tmp_path / "whole.png") and boxed["results"] == left["results"]
    assert boxed["results"] != whole["results"] and whole["results"][0]["distance"] < 1e-3


def test_bad_queries_are_one_line(world, query_folder, tmp_path, capsys):
    index = str(world.index)
    (tmp_path / "empty").mkdir()
    one_error_line(capsys, ["search", index, str(tmp_path / "empty")], "empty: holds no image files")
    pd.DataFrame({"file": ["a.png"]}).to_csv(tmp_path / "no_path.csv", index=False)
    one_error_line(
        capsys,
        ["search", index, str(tmp_path / "no_path.csv")],
        "no_path.csv",
        "missing the required column(s) 'path'",
    )
    pd.DataFrame({"path": ["a.png", "nope.png"]}).to_csv(query_folder / "bad.csv", index=False)
    one_error_line(
        capsys,
        ["search", index, str(query_folder / "bad.csv")],
        f"'{query_folder / 'bad.csv'}': column 'path': no such image file under '{query_folder}' at row 1 ('nope.png')",
    )
    pd.DataFrame({"path": ["a.png", None], "label": [1, 2]}).to_csv(query_folder / "blank.csv", index=False)
    one_error_line(
        capsys, ["search", index, str(query_folder / "blank.csv")], "column 'path': an empty path at row 1"
    )
    pd.DataFrame({"path": ["a.png"], "x_1": [0]}).to_csv(query_folder / "box.csv", index=False)
    one_error_line(capsys, ["search", index, str(query_folder / "box.csv")], "box.csv", "x_2")
    one_error_line(capsys, ["search", index, str(tmp_path / "missing.csv")], "missing.csv' does not exist")
    one_error_line(
        capsys,
        ["search", index, str(query_folder), "--dataset-root", str(tmp_path)],
        "--dataset-root is the folder of a CSV's paths, and no query is a CSV",
    )
    one_error_line(
        capsys,
        ["search", index, str(query_folder / "bad.csv"), "--dataset-root", str(tmp_path / "nowhere")],
        f"dataset root '{tmp_path / 'nowhere'}' is not a folder",
    )
