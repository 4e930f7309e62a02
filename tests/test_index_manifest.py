"""An index bound to its items (:mod:`oml_core.index.manifest`): two tiny indexes of other data and other weights,
built once; each file of one swapped by the other's alone, the set of ``embeddings.pt``, ``backend/``,
``weights.pt`` and its digest swapped together (with and without their manifest entries), a tampered
``items.json``, ``calibration.json`` and probe query, a file added; each refused at load in one line naming the
files, the folder left as it was, and the index loading as before once its own files are back. The commits of
``add``, ``remove`` and ``calibrate`` keep the manifest true; an index of version 3 loads and its first commit
gives it a manifest; a load does not hash the sealed files a second time."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import oml_core.index.manifest as manifest_module
from oml_core.index import GalleryIndex, GalleryIndexError
from oml_core.index.item_table import ItemTable
from oml_core.index.manifest import content_uid, file_digest
from oml_core.registry import Registry
from tests.scripts.old_indexes import as_version_4, as_whole_files
from tests.test_gallery_index import (
    COLOURS,
    TRANSFORMS,
    IndexTestPlugin,
    checkpoint_spec,
    save_checkpoint,
    solid_images,
)

#: The other index's gallery: as many items as the first's, other colours.
OTHER_COLOURS = {
    "yellow": (230, 220, 30),
    "purple": (120, 30, 160),
    "grey": (128, 128, 128),
    "black": (5, 5, 5),
    "pink": (240, 150, 180),
}
REBUILD = "rebuild the index (oml index build)"


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry([("index_test_plugin", IndexTestPlugin())], load_entrypoints=False)


def build(
    root: Path, colours: dict, seed: int, registry: Registry, calibration: dict, name: str = "index"
) -> Path:
    """``root / name``: a calibrated index of the images of ``colours`` (in ``root / gallery``) by a
    ``mean_colour`` extractor of the weights of ``seed``."""
    solid_images(root / "gallery", colours)
    spec = checkpoint_spec(save_checkpoint(root / "best.ckpt", seed=seed))
    index = GalleryIndex.from_folder(
        root / "gallery", extractor=spec, transforms=TRANSFORMS, registry=registry
    )
    index.calibrate(index.embeddings, [0, 0, 1, 1, 1], **calibration)
    return index.save(root / name)


@pytest.fixture(scope="module")
def built(tmp_path_factory, registry) -> tuple[Path, Path]:
    """The two indexes, never changed: ``mine`` and ``other`` (other data, weights and calibration)."""
    root = tmp_path_factory.mktemp("manifest")
    mine = build(root / "mine", COLOURS, 1, registry, {"target": "f1"})
    other = build(root / "other", OTHER_COLOURS, 2, registry, {"target": "precision", "value": 0.5})
    return mine, other


@pytest.fixture()
def mine(built, tmp_path) -> Path:
    """A copy of ``mine`` to change."""
    return Path(shutil.copytree(built[0], tmp_path / "mine"))


@pytest.fixture()
def other(built) -> Path:
    return built[1]


def files_of(folder: Path) -> dict[str, bytes]:
    """The bytes of every file under ``folder``, by relative path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def meta_of(folder: Path) -> dict:
    return json.loads((folder / "index.json").read_text())


def swap(mine: Path, other: Path, name: str) -> None:
    """Replace the file or folder ``name`` of ``mine`` by ``other``'s."""
    target = mine / name
    if target.is_dir():
        shutil.rmtree(target)
        shutil.copytree(other / name, target)
    else:
        shutil.copyfile(other / name, target)


def refused(folder: Path, registry: Registry) -> str:
    """The one line of the refused load of ``folder``, which left every file of it as it was."""
    before = files_of(folder)
    with pytest.raises(GalleryIndexError) as raised:
        GalleryIndex.load(folder, registry=registry)
    assert files_of(folder) == before
    message = str(raised.value)
    assert "\n" not in message
    return message


def answers(folder: Path, registry: Registry, query: Path) -> list:
    index = GalleryIndex.load(folder, registry=registry)
    return [index.search([query], top_k=5), index.search(index.embeddings[:2], top_k=3)]


@pytest.fixture(scope="module")
def query(tmp_path_factory) -> Path:
    return solid_images(tmp_path_factory.mktemp("queries"), {"orange": (200, 90, 30)})["orange"]


# ------------------------------------------------------------------------------------ files swapped alone
SWAPPED_ALONE = [
    "gen-1/embeddings.pt",
    "gen-1/embeddings.npy",
    "gen-1/items.arrow",
    "gen-1/calibration.json",
    "gen-1/calibration.png",
    "gen-1/generation.json",
]


@pytest.mark.parametrize("name", SWAPPED_ALONE)
def test_a_file_of_another_index_is_named_and_nothing_is_lost(mine, other, registry, query, name):
    assert (mine / name).read_bytes() != (other / name).read_bytes()  # not a swap of equal bytes
    expected = answers(mine, registry, query)
    kept = (mine / name).read_bytes()
    swap(mine, other, name)
    assert refused(mine, registry) == (
        f"{mine / name}: not this index's (its digest differs from {mine / 'index.json'}'s manifest); {REBUILD}"
    )
    (mine / name).write_bytes(kept)
    assert answers(mine, registry, query) == expected


def test_a_backend_of_another_index_is_named_file_by_file(mine, other, registry, query):
    expected = answers(mine, registry, query)
    kept = mine.parent / "kept-backend"
    shutil.copytree(mine / "gen-1" / "backend", kept)
    swap(mine, other, "gen-1/backend")
    state, rows = mine / "gen-1" / "backend" / "exact_index.pt", mine / "gen-1" / "backend" / "embeddings.npy"
    assert refused(mine, registry) == (
        f"{rows}, {state}: not this index's (their digests differ from {mine / 'index.json'}'s manifest); {REBUILD}"
    )
    shutil.copyfile(kept / "embeddings.npy", rows)
    (mine / "gen-1" / "backend" / "notes.txt").write_text("added")
    state.unlink()
    assert refused(mine, registry) == (
        f"{mine / 'gen-1' / 'backend' / 'notes.txt'}: not this index's (not in {mine / 'index.json'}'s "
        f"manifest); {state}: no such file (named by {mine / 'index.json'}'s manifest): the index folder is "
        f"incomplete; {REBUILD}"
    )
    shutil.rmtree(mine / "gen-1" / "backend")
    shutil.copytree(kept, mine / "gen-1" / "backend")
    assert answers(mine, registry, query) == expected


def test_the_weights_alone_are_named_when_the_extractor_is_built(mine, other, registry, query):
    """``weights.pt`` is bound by ``weights_sha256`` (hashed when the extractor is built: a search by embeddings
    needs no weights), which the model JSON of ``embeddings.pt`` records."""
    swap(mine, other, "weights.pt")
    index = GalleryIndex.load(mine, registry=registry)
    assert len(index.search(index.embeddings[:1], top_k=2)[0]) == 2
    with pytest.raises(
        GalleryIndexError, match=f"the weights of the index {mine / 'weights.pt'} have sha256"
    ):
        index.search([query])
    theirs = meta_of(other)["weights_sha256"]
    meta = meta_of(mine)
    meta["weights_sha256"] = theirs
    (mine / "index.json").write_text(json.dumps(meta))
    assert refused(mine, registry).startswith(
        f"{mine / 'index.json'}: its weights_sha256 is '{theirs}', the embeddings of embeddings.pt were built "
        f"with '"
    )


# ----------------------------------------------------------------------------- a set of files swapped
SET = ["gen-1/embeddings.pt", "gen-1/embeddings.npy", "gen-1/backend", "weights.pt"]


def test_embeddings_backend_weights_and_their_digest_of_another_index_are_named_in_one_line(
    mine, other, registry, query
):
    expected = answers(mine, registry, query)
    kept = mine.parent / "kept"
    shutil.copytree(mine, kept)
    for name in SET:
        swap(mine, other, name)
    meta = meta_of(mine)
    meta["weights_sha256"] = meta_of(other)["weights_sha256"]
    (mine / "index.json").write_text(json.dumps(meta))
    generation = mine / "gen-1"
    assert refused(mine, registry) == (
        f"{generation / 'backend' / 'embeddings.npy'}, {generation / 'backend' / 'exact_index.pt'}, "
        f"{generation / 'embeddings.npy'}, {generation / 'embeddings.pt'}: not this index's (their digests differ "
        f"from {mine / 'index.json'}'s manifest); {REBUILD}"
    )
    shutil.rmtree(mine)
    shutil.copytree(kept, mine)
    assert answers(mine, registry, query) == expected


def test_files_copied_with_their_manifest_entries_carry_another_uid(mine, other, registry):
    """The set of files, ``weights_sha256`` and the set's entries of the manifest all from the other index: the
    files still carry the other index's uid."""
    for name in SET:
        swap(mine, other, name)
    meta, theirs = meta_of(mine), meta_of(other)
    meta["weights_sha256"] = theirs["weights_sha256"]
    for name in (
        "gen-1/embeddings.pt",
        "gen-1/embeddings.npy",
        "gen-1/backend/exact_index.pt",
        "gen-1/backend/embeddings.npy",
    ):
        meta["manifest"]["files"][name] = theirs["manifest"]["files"][name]
    (mine / "index.json").write_text(json.dumps(meta))
    assert refused(mine, registry) == (
        f"{mine / 'gen-1' / 'embeddings.pt'} (uid {theirs['manifest']['uid']!r}): not this index's (its data is not "
        f"the uid {meta['manifest']['uid']} of {mine / 'index.json'}'s manifest); {REBUILD}"
    )


def test_a_whole_generation_of_another_index_is_named_file_by_file(mine, other, registry):
    swap(mine, other, "gen-1")
    names = sorted(meta_of(mine)["manifest"]["files"])
    assert names == [
        "gen-1/backend/embeddings.npy",
        "gen-1/backend/exact_index.pt",
        "gen-1/calibration.json",
        "gen-1/calibration.png",
        "gen-1/embeddings.npy",
        "gen-1/embeddings.pt",
        "gen-1/generation.json",
        "gen-1/items.arrow",
        "probe.png",
    ]
    differ = ", ".join(str(mine / name) for name in names if name != "probe.png")  # one probe picture
    assert refused(mine, registry) == (
        f"{differ}: not this index's (their digests differ from {mine / 'index.json'}'s manifest); {REBUILD}"
    )


# ---------------------------------------------------------------------------------------- tampered files
def edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


TAMPERED = {
    "gen-1/generation.json": lambda d: d.update(calibration_stale=True),
    "gen-1/calibration.json": lambda d: d.update(threshold=d["threshold"] * 2),
}


@pytest.mark.parametrize("name", list(TAMPERED))
def test_a_tampered_json_file_is_named(mine, registry, query, name):
    expected = answers(mine, registry, query)
    kept = (mine / name).read_bytes()
    edit_json(mine / name, TAMPERED[name])
    assert refused(mine, registry) == (
        f"{mine / name}: not this index's (its digest differs from {mine / 'index.json'}'s manifest); {REBUILD}"
    )
    (mine / name).write_bytes(kept)
    assert answers(mine, registry, query) == expected


def test_a_tampered_probe_query_is_named(mine, registry):
    data = bytearray((mine / "probe.png").read_bytes())
    data[-20] ^= 0xFF
    (mine / "probe.png").write_bytes(bytes(data))
    assert refused(mine, registry) == (
        f"{mine / 'probe.png'}: not this index's (its digest differs from {mine / 'index.json'}'s manifest); "
        f"{REBUILD}"
    )


def test_a_calibration_added_to_an_index_without_one_is_named(tmp_path, built, registry):
    index = GalleryIndex()
    index.add(torch.randn(5, 4, generator=torch.Generator().manual_seed(0)))
    folder = index.save(tmp_path / "plain")
    shutil.copyfile(built[0] / "gen-1" / "calibration.json", folder / "gen-1" / "calibration.json")
    assert refused(folder, registry) == (
        f"{folder / 'gen-1' / 'calibration.json'}: not this index's (not in {folder / 'index.json'}'s manifest); "
        f"{REBUILD}"
    )


def test_a_manifest_that_is_not_one_is_named(mine, registry):
    edit_json(mine / "index.json", lambda d: d["manifest"]["files"].update({"../elsewhere.pt": "0" * 64}))
    assert refused(mine, registry).startswith(
        f"{mine / 'index.json'}: its manifest must be {{uid: 32 hex digits"
    )


# ------------------------------------------------------------------------------ writers keep it true
def check_manifest_true(folder: Path) -> None:
    """Every file of the base generation is in the manifest with its digest, and carries its uid."""
    meta = meta_of(folder)
    base = folder / f"gen-{meta['base']}"
    own = {
        str(p.relative_to(folder)) for p in base.rglob("*") if p.is_file() and not p.name.startswith("log-")
    }
    files = meta["manifest"]["files"]
    assert own <= set(files) and all(file_digest(folder / name) == digest for name, digest in files.items())
    info = json.loads((base / "generation.json").read_text())
    items, uid = ItemTable.read(base / "items.arrow", info["n_items"])
    embeddings = torch.load(base / "embeddings.pt", weights_only=True)
    assert uid == embeddings["uid"] == meta["manifest"]["uid"]
    rows = torch.from_numpy(np.load(base / "embeddings.npy"))
    assert meta["manifest"]["uid"] == content_uid(items, [rows])


def test_add_remove_and_calibrate_keep_the_manifest_true(mine, other, registry, query):
    index = GalleryIndex.load(mine, registry=registry)
    first = meta_of(mine)["manifest"]
    index.add([query], labels=[2])
    index.compact_fraction = float("inf")
    index.commit()  # a segment of the log: the base's files, and so the manifest, unchanged
    assert meta_of(mine)["segments"] and meta_of(mine)["manifest"] == first
    check_manifest_true(mine)
    index.remove(index.ids[:1])
    index.max_segments = 0
    assert index.commit() == 3  # a whole generation: a new manifest
    assert meta_of(mine)["manifest"]["uid"] != first["uid"]
    check_manifest_true(mine)
    index.calibrate(index.embeddings, [1, 1, 2, 2, 2], target="f1")
    assert index.commit() == 4
    check_manifest_true(mine)
    again = GalleryIndex.load(mine, registry=registry)
    assert again.ids == index.ids and again.search([query], top_k=3) == index.search([query], top_k=3)
    shutil.copyfile(other / "gen-1" / "embeddings.pt", mine / "gen-4" / "embeddings.pt")
    assert refused(mine, registry).startswith(f"{mine / 'gen-4' / 'embeddings.pt'}: not this index's")


def test_an_index_of_version_3_loads_and_its_first_commit_binds_it(mine, registry, query):
    expected = answers(mine, registry, query)

    def as_version_3(meta: dict) -> None:
        meta.update(version=3)
        del meta["manifest"]

    edit_json(mine / "index.json", as_version_3)
    as_whole_files(mine / "gen-1")
    edit_json(mine / "gen-1" / "items.json", lambda d: d.pop("uid"))
    assert answers(mine, registry, query) == expected
    assert GalleryIndex.load(mine, registry=registry).commit() == 2  # without changes: converted
    assert meta_of(mine)["version"] == 5
    check_manifest_true(mine)
    assert answers(mine, registry, query) == expected


def test_an_index_of_version_4_loads_and_its_first_commit_rewrites_it_as_version_5(mine, registry, query):
    """Version 4 kept the items in ``items.json`` and the embeddings inside ``embeddings.pt``, read whole: it loads
    and answers as before, and its first commit, even without changes, writes a whole generation of version 5."""
    expected = answers(mine, registry, query)
    as_version_4(mine)
    assert not (mine / "gen-1" / "items.arrow").exists()
    assert answers(mine, registry, query) == expected
    assert GalleryIndex.load(mine, registry=registry).commit() == 2
    assert meta_of(mine)["version"] == 5 and (mine / "gen-2" / "items.arrow").is_file()
    check_manifest_true(mine)
    assert answers(mine, registry, query) == expected
    index = GalleryIndex.load(mine, registry=registry)
    index.add([query], labels=[2])
    index.compact_fraction = float("inf")
    assert index.commit() == 3 and meta_of(mine)["segments"]  # version 5: a segment of the log
    again = GalleryIndex.load(mine, registry=registry)
    assert again.ids == index.ids and again.search([query], top_k=3) == index.search([query], top_k=3)


def test_the_same_index_built_twice_is_the_same_bytes(built, registry):
    """The uid is the content's, not drawn at random."""
    again = build(built[0].parent, COLOURS, 1, registry, {"target": "f1"}, name="again")
    try:
        assert files_of(again) == files_of(built[0])
    finally:
        shutil.rmtree(again)


def test_a_load_reads_the_digests_of_sealed_files_without_hashing_them(mine, registry, monkeypatch):
    hashed: list[str] = []
    original = manifest_module.file_sha256

    def recorded(path: Path) -> str:
        hashed.append(Path(path).name)
        return original(path)

    monkeypatch.setattr(manifest_module, "file_sha256", recorded)
    GalleryIndex.load(mine, registry=registry)
    assert sorted(hashed) == [
        "calibration.json",
        "calibration.png",
        "generation.json",
        "items.arrow",
        "probe.png",
    ]  # not embeddings.pt, embeddings.npy nor the exact backend's state: their loaders verify their seals
