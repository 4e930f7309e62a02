"""An index that changes (:meth:`GalleryIndex.upsert`, ``remove``, ``commit``, ``refresh``): changes answer as an
index built from scratch of the resulting items (and as a naive search), for the exact backend and for one
that cannot remove (rebuilt); unknown ids; the calibration kept and reported stale, then calibrated again; a
reader that takes other processes' generations; changes of two processes merged, or refused when they conflict;
the writer lock; an index of the previous format converted by its first commit; and a writer killed (SIGKILL) at
random moments of its commits, with readers loading all along: the index is always the one before or after a
commit, and nothing acknowledged is lost."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from oml_core.index import (
    GalleryIndex,
    GalleryIndexError,
    GalleryItem,
    IndexLockedError,
    UnknownItemError,
    Upserted,
)
from oml_core.index.answers import search_answer, search_table
from oml_core.index.generations import writer_lock
from oml_core.registry import Registry
from tests.scripts import index_writer
from tests.test_gallery_index import (
    COLOURS,
    EXTRACTOR,
    TRANSFORMS,
    IndexTestPlugin,
    naive_distances,
    solid_images,
)

WRITER = Path(index_writer.__file__)


@pytest.fixture()
def registry() -> Registry:
    """The core's built-ins and the test plugin of ``test_gallery_index`` (its ``brute`` backend cannot remove)."""
    return Registry([("index_test_plugin", IndexTestPlugin())], load_entrypoints=False)


def randn(n: int, seed: int, dim: int = 5) -> torch.Tensor:
    return torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))


def saved(folder: Path, embeddings: torch.Tensor, registry: Registry | None = None, **args) -> Path:
    """``folder``: a saved index of ``embeddings`` (ids 10, 11, ...; labels ``id % 3``; paths ``<id>.png``)."""
    index = GalleryIndex(registry=registry, **args)
    ids = list(range(10, 10 + len(embeddings)))
    index.add(embeddings, labels=[i % 3 for i in ids], ids=ids, paths=[f"{i}.png" for i in ids])
    return index.save(folder)


# --------------------------------------------------------------------------- changes answer as a rebuild
@pytest.mark.parametrize("backend", ["exact", "brute"])
def test_changes_answer_as_an_index_built_from_scratch_of_the_resulting_items(
    tmp_path, registry, backend, caplog
):
    x = randn(12, seed=0)
    index = GalleryIndex.load(saved(tmp_path / "index", x, registry, knn_backend=backend), registry=registry)
    new = randn(3, seed=1)
    assert index.upsert(new, ids=[13, 30, 31], labels=[7, 8, None]) == Upserted(added=2, updated=1)
    assert index.remove([10, 17]) == 2
    assert ("building it again from the index's embeddings" in caplog.text) == (backend == "brute")

    # the survivors in their order, then the upserted items (13 replaced: its new vector, after the others)
    kept = [1, 2, 4, 5, 6, 8, 9, 10, 11]
    ids = [10 + i for i in kept] + [13, 30, 31]
    gallery = torch.cat([x[kept], new])
    assert index.ids == ids and torch.equal(index.embeddings, gallery)
    assert index.labels == [i % 3 for i in ids[:-3]] + [7, 8, None]
    assert index.item(13) == GalleryItem(13, None, 7) and index.item(11) == GalleryItem(11, "11.png", 2)

    scratch = GalleryIndex(knn_backend=backend, registry=registry)
    scratch.add(gallery, labels=index.labels, ids=ids, paths=index.paths)
    queries = torch.cat([randn(4, seed=2), x[[0, 3, 7]]])  # and the vectors removed or replaced
    found = index.search(queries, top_k=5)
    assert found == scratch.search(queries, top_k=5)
    distances = naive_distances(queries, gallery, "l2")
    for hits, row in zip(found, distances):
        nearest = torch.argsort(row)[:5]
        assert [hit.id for hit in hits] == [ids[i] for i in nearest]
        assert [hit.distance for hit in hits] == pytest.approx(row[nearest].tolist(), abs=1e-5)
    assert all(hit.distance > 1e-3 for hit in found[4] + found[6])  # the removed vectors are gone

    assert index.commit() == 2  # durable: another process loads the same index
    loaded = GalleryIndex.load(tmp_path / "index", registry=registry)
    assert loaded.generation == 2 and loaded.ids == ids and loaded.search(queries, top_k=5) == found
    loaded.upsert(randn(1, seed=3), ids=[40])  # the keys go on after a load
    scratch.add(randn(1, seed=3), ids=[40])
    assert loaded.search(queries, top_k=14) == scratch.search(queries, top_k=14)


def test_unknown_ids_and_bad_changes_are_refused_before_anything_changes(tmp_path):
    index = GalleryIndex.load(saved(tmp_path / "index", randn(4, seed=0)))
    with pytest.raises(UnknownItemError) as raised:
        index.remove([11, 99, 98])
    assert str(raised.value) == f"{tmp_path / 'index'}: no item has the 2 ids 99, 98"
    assert raised.value.ids == [99, 98] and isinstance(raised.value, GalleryIndexError)
    with pytest.raises(UnknownItemError, match=r"index: no item has the id 5$"):
        index.item(5)
    with pytest.raises(ValueError, match="ids must be 2 integers, one per item, got 1 values"):
        index.upsert(randn(2, seed=1), ids=[1])
    with pytest.raises(ValueError, match="id 1 is given to two items"):
        index.upsert(randn(2, seed=1), ids=[1, 1])
    with pytest.raises(ValueError, match="embeddings have dimension 3, the index has 5"):
        index.upsert(randn(1, seed=1, dim=3), ids=[11])
    assert index.ids == [10, 11, 12, 13] and index.commit() == 1  # nothing to commit: no new generation
    with pytest.raises(GalleryIndexError, match="not loaded from a folder, so it has none to commit to"):
        GalleryIndex().commit()


def test_the_calibration_is_kept_reported_stale_and_calibrated_again(registry, tmp_path):
    root = tmp_path / "colours"
    solid_images(root / "images", COLOURS)
    rows = [
        ("green", 0, "train"),
        ("red", 1, "validation"),
        ("red2", 1, "validation"),
        ("blue", 2, "validation"),
        ("teal", 2, "validation"),
    ]
    df = pd.DataFrame(
        [
            (f"images/{name}.png", label, split, *[True if split == "validation" else None] * 2)
            for name, label, split in rows
        ],
        columns=["path", "label", "split", "is_query", "is_gallery"],
    )
    index = GalleryIndex.from_dataframe(
        df, root, calibration={"target": "f1"}, extractor=EXTRACTOR, transforms=TRANSFORMS, registry=registry
    )
    calibration = index.calibration
    assert not index.calibration_stale
    index.remove(0)
    index.upsert([root / "images" / "red.png"], ids=[20])
    assert index.calibration == calibration and index.calibration_stale
    assert index.item(20) == GalleryItem(20, str(root / "images" / "red.png"), None)

    hits = index.search([root / "images" / "red2.png"], top_k=1)
    answer = search_answer("my_index", calibration.threshold, ["red2.png"], hits, calibration_stale=True)
    assert answer["calibration_stale"] is True and json.loads(json.dumps(answer)) == answer
    assert search_table(answer).splitlines()[0] == (
        f"red2.png: match (threshold {calibration.threshold:.6g}) (calibration stale: oml index calibrate my_index)"
    )
    assert index.recalibrate() == calibration  # the same split and model: the same threshold
    assert not index.calibration_stale


# ----------------------------------------------------------------------- several processes, one folder
def test_a_reader_takes_new_generations_and_changes_merge_or_conflict(tmp_path):
    folder = saved(tmp_path / "index", randn(4, seed=0))
    writer, reader = GalleryIndex.load(folder), GalleryIndex.load(folder)
    writer.upsert(randn(1, seed=1), ids=[20])
    assert writer.commit() == 2
    writer.remove(10)
    assert writer.commit() == 3
    assert sorted(p.name for p in folder.iterdir()) == ["gen-2", "gen-3", "index.json", "index.lock"]
    assert reader.generation == 1 and reader.refresh() and not reader.refresh()
    queries = randn(3, seed=2)
    assert reader.generation == 3 and reader.ids == [11, 12, 13, 20]
    assert reader.search(queries, top_k=4) == writer.search(queries, top_k=4)

    reader.upsert(randn(1, seed=3), ids=[30])  # both change: the later commit makes its change on the other's
    writer.upsert(randn(1, seed=4), ids=[40])
    assert writer.commit() == 4 and reader.commit() == 5
    assert GalleryIndex.load(folder).ids == reader.ids == [11, 12, 13, 20, 40, 30]

    writer.refresh()
    writer.remove(11)
    reader.remove(11)  # both remove the same item: the later one cannot
    assert writer.commit() == 6
    with pytest.raises(GalleryIndexError) as raised:
        reader.commit()
    assert str(raised.value) == (
        f"{folder} was changed by another process (generation 5 to 6) and the changes made here cannot be made "
        f"again on it ({folder}: no item has the id 11); they were dropped"
    )
    assert reader.generation == 6 and reader.ids == writer.ids and reader.commit() == 6


def test_a_commit_waits_for_the_writer_lock_then_refuses(tmp_path):
    folder = saved(tmp_path / "index", randn(2, seed=0))
    index = GalleryIndex.load(folder)
    index.remove(10)
    with writer_lock(folder, timeout=1):  # another open file description: flock excludes it
        with pytest.raises(
            IndexLockedError, match=r"index.lock: another process is changing the index \(waited 0.1 s\)"
        ):
            index.commit(timeout=0.1)
    assert GalleryIndex.load(folder).ids == [10, 11] and index.commit() == 2


def as_version_2(folder: Path) -> None:
    """Turn a saved index (of generation 1) into what version 2 wrote: the generation's files at the top,
    ``n_items`` and ``dim`` in ``index.json``, no ``keys`` in ``items.json``."""
    generation = folder / "gen-1"
    info = json.loads((generation / "generation.json").read_text())
    for path in generation.iterdir():
        if path.name != "generation.json":
            shutil.move(path, folder / path.name)
    shutil.rmtree(generation)
    meta = json.loads((folder / "index.json").read_text())
    del meta["generation"]
    meta.update(version=2, n_items=info["n_items"], dim=info["dim"])
    (folder / "index.json").write_text(json.dumps(meta))
    items = json.loads((folder / "items.json").read_text())
    del items["keys"]
    (folder / "items.json").write_text(json.dumps(items))


def test_an_index_of_the_previous_format_loads_and_its_first_commit_converts_it(tmp_path, registry):
    folder = saved(tmp_path / "index", randn(5, seed=0), registry, knn_backend="exact")
    index = GalleryIndex.load(folder)
    index.calibrate(randn(6, seed=1), [0, 0, 1, 1, 2, 2], target="f1")
    index.commit()
    shutil.rmtree(folder)
    index.save(folder)
    as_version_2(folder)
    queries = randn(2, seed=2)
    old = GalleryIndex.load(folder)
    assert old.generation == 0 and old.calibration == index.calibration
    assert old.search(queries, top_k=5) == index.search(queries, top_k=5)

    reader = GalleryIndex.load(folder)
    old.remove(12)
    assert old.commit() == 1  # converted: gen-1, index.json of version 3; the old files kept one commit more
    meta = json.loads((folder / "index.json").read_text())
    assert meta["version"] == 3 and meta["generation"] == 1 and "n_items" not in meta
    assert {"items.json", "embeddings.pt", "backend", "gen-1"} <= {p.name for p in folder.iterdir()}
    assert (folder / "gen-1" / "calibration.png").samefile(
        folder / "calibration.png"
    )  # linked, not drawn again
    assert reader.refresh() and reader.ids == [10, 11, 13, 14] and reader.calibration_stale
    old.upsert(randn(1, seed=3), ids=[12])
    assert old.commit() == 2
    assert sorted(p.name for p in folder.iterdir()) == ["gen-1", "gen-2", "index.json", "index.lock"]
    again = GalleryIndex.load(folder)
    assert again.ids == [10, 11, 13, 14, 12] and again.search(queries, top_k=5) == old.search(
        queries, top_k=5
    )


# --------------------------------------------------------------------------------------- killed writers
def read_acks(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def check_consistent(index: GalleryIndex, committed: list[int], first: int) -> None:
    """The items ``committed`` before, then items of consecutive ids from ``first``, each with its own vector
    (found at distance 0, up to the float32 rounding of the exact search's
    expanded squared distances)."""
    ids = index.ids
    added = ids[len(committed) :]
    assert ids[: len(committed)] == committed and added == list(range(first, first + len(added)))
    if added:
        hits = index.search(torch.cat([index_writer.vector(i) for i in added[-3:]]), top_k=1)
        assert [h[0].id for h in hits] == added[-3:] and all(h[0].distance < 1e-2 for h in hits)


def test_a_writer_killed_at_random_moments_leaves_the_index_before_or_after_a_commit(
    tmp_path, oml_fork_server
):
    folder = tmp_path / "index"
    base = GalleryIndex()
    base.add(torch.cat([index_writer.vector(i) for i in range(8)]), ids=list(range(8)))
    base.save(folder)
    committed = list(range(8))
    rng = random.Random(0)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    reader = GalleryIndex.load(folder)
    for kill in range(4):
        acks = tmp_path / f"acks_{kill}"
        first = 1000 * (kill + 1)
        run = oml_fork_server.start([str(folder), str(first), str(acks)], env, script=WRITER)
        try:
            deadline = time.monotonic() + 60
            while not read_acks(acks) and run.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert read_acks(acks), run.communicate()
            stop = time.monotonic() + rng.uniform(0.05, 0.5)
            while time.monotonic() < stop:  # a reader takes the writer's generations meanwhile
                reader.refresh()
                check_consistent(reader, committed, first)
        finally:
            run.send_signal(signal.SIGKILL)
        assert run.wait(timeout=30) == -signal.SIGKILL
        acked = read_acks(acks)
        assert acked == list(range(first, first + len(acked)))
        loaded = GalleryIndex.load(folder)
        # everything acknowledged, and the item whose commit was under way when it was killed, or not
        assert loaded.ids in (committed + acked, [*committed, *acked, first + len(acked)])
        check_consistent(loaded, committed, first)
        committed = loaded.ids
    loaded.remove(0)
    loaded.commit()  # a commit cleans what the killed ones left
    names = sorted(p.name for p in folder.iterdir())
    assert names == [f"gen-{loaded.generation - 1}", f"gen-{loaded.generation}", "index.json", "index.lock"]


def test_a_commit_that_fails_leaves_the_folder_as_before(tmp_path, monkeypatch):
    folder = saved(tmp_path / "index", randn(3, seed=0))
    index = GalleryIndex.load(folder)
    index.remove(11)

    def full_disk(_) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(index._backend, "save", full_disk)
    with pytest.raises(OSError, match="No space left"):
        index.commit()
    assert sorted(p.name for p in folder.iterdir()) == ["gen-1", "index.json", "index.lock"]
    assert GalleryIndex.load(folder).ids == [10, 11, 12]
    monkeypatch.undo()
    assert index.commit() == 2 and GalleryIndex.load(folder).ids == [10, 12]
