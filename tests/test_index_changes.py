"""An index that changes (:meth:`GalleryIndex.upsert`, ``remove``, ``commit``, ``refresh``): changes answer as an
index built from scratch of the resulting items (and as a naive search), for the exact backend and for one
that cannot remove (rebuilt), committed as a segment of the log or as a whole generation; unknown ids; the
calibration kept and reported stale, then calibrated again; a reader that takes other processes' generations
(the new segments only, when it holds their base); changes of two processes merged, or refused when they
conflict; the writer lock; a commit of one item that writes bytes independent of the gallery's size; when a
commit compacts the log; a changed segment refused; an index of the previous format converted by its first
commit; and a writer killed (SIGKILL) at random moments of its commits (segments and compactions), with readers
loading all along: the index is always the one before or after a commit, and nothing acknowledged is lost."""

from __future__ import annotations

import json
import os
import random
import re
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
from oml_core.index.changes import Removal, Upsert, net_change
from oml_core.index.generations import writer_lock
from oml_core.registry import Registry
from oml_core.reports.search import search_answer
from tests.scripts import index_writer
from tests.scripts.old_indexes import as_whole_files
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


#: The commit policies of the tests: every commit a whole generation, or every commit a segment of the log.
WHOLE, SEGMENTS = {"max_segments": 0}, {"compact_fraction": float("inf")}


def with_policy(index: GalleryIndex, policy: dict) -> GalleryIndex:
    """``index`` whose commits follow ``policy`` (:data:`WHOLE` or :data:`SEGMENTS`)."""
    for name, value in policy.items():
        setattr(index, name, value)
    return index


def saved(folder: Path, embeddings: torch.Tensor, registry: Registry | None = None, **args) -> Path:
    """``folder``: a saved index of ``embeddings`` (ids 10, 11, ...; labels ``id % 3``; paths ``<id>.png``)."""
    index = GalleryIndex(registry=registry, **args)
    ids = list(range(10, 10 + len(embeddings)))
    index.add(embeddings, labels=[i % 3 for i in ids], ids=ids, paths=[f"{i}.png" for i in ids])
    return index.save(folder)


# --------------------------------------------------------------------------- changes answer as a rebuild
@pytest.mark.parametrize("policy", [WHOLE, SEGMENTS], ids=["whole", "segments"])
@pytest.mark.parametrize("backend", ["exact", "brute"])
def test_changes_answer_as_an_index_built_from_scratch_of_the_resulting_items(
    tmp_path, registry, backend, policy, caplog
):
    x = randn(12, seed=0)
    folder = saved(tmp_path / "index", x, registry, knn_backend=backend)
    index = with_policy(GalleryIndex.load(folder, registry=registry), policy)
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
    assert (folder / "gen-2").is_dir() == (policy is WHOLE)
    assert (folder / "gen-1" / "log-2.pt").is_file() == (policy is SEGMENTS)
    loaded = GalleryIndex.load(tmp_path / "index", registry=registry)
    assert loaded.generation == 2 and loaded.ids == ids and loaded.search(queries, top_k=5) == found
    assert loaded.labels == index.labels and loaded.paths == index.paths
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
    data = answer.as_data()
    assert data["calibration_stale"] is True and json.loads(answer.as_json()) == data
    assert answer.as_text().splitlines()[0] == (
        f"red2.png: match (threshold {calibration.threshold:.6g}) (calibration stale: oml index calibrate my_index)"
    )
    assert index.recalibrate() == calibration  # the same split and model: the same threshold
    assert not index.calibration_stale


# ----------------------------------------------------------------------- several processes, one folder
@pytest.mark.parametrize("policy", [WHOLE, SEGMENTS], ids=["whole", "segments"])
def test_a_reader_takes_new_generations_and_changes_merge_or_conflict(tmp_path, policy):
    folder = saved(tmp_path / "index", randn(4, seed=0))
    writer, reader = (with_policy(GalleryIndex.load(folder), policy) for _ in range(2))
    writer.upsert(randn(1, seed=1), ids=[20])
    assert writer.commit() == 2
    writer.remove(10)
    assert writer.commit() == 3
    generations = ["gen-2", "gen-3"] if policy is WHOLE else ["gen-1"]
    assert sorted(p.name for p in folder.iterdir()) == [*generations, "index.json", "index.lock"]
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


@pytest.mark.parametrize("policy", [WHOLE, SEGMENTS], ids=["whole", "segments"])
def test_the_id_of_a_removed_item_is_never_given_again(tmp_path, policy):
    """Ids 10-13; 14 and 15 put, 15 and 13 removed: the next id is 16 (not 14's successor of what is held), in the
    folder (a new load, a reader that takes the generation) and after another writer's commit."""
    folder = saved(tmp_path / "index", randn(4, seed=0))
    writer = with_policy(GalleryIndex.load(folder), policy)
    assert writer.next_id == 14
    writer.upsert(randn(2, seed=1))
    writer.remove([15, 13])
    writer.commit()
    assert writer.ids == [10, 11, 12, 14] and writer.next_id == 16
    reader = GalleryIndex.load(folder)
    assert reader.next_id == 16
    reader.upsert(randn(1, seed=2))
    assert reader.ids[-1] == 16
    writer.upsert(
        randn(1, seed=3)
    )  # the same id 16 in another process: the later commit cannot make it again
    reader.commit()
    with pytest.raises(GalleryIndexError, match="id 16 is given to two items"):
        writer.commit()
    writer.upsert(randn(1, seed=4))  # holds the reader's generation now: 17
    writer.remove([16])
    writer.commit()
    assert GalleryIndex.load(folder).next_id == 18 and GalleryIndex.load(folder).ids == [10, 11, 12, 14, 17]


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


# ------------------------------------------------------------------------------------ the log of changes
def files_of(folder: Path) -> dict[str, tuple[int, int]]:
    """The size and modification time of every file under ``folder`` (but the lock), by relative path."""
    return {
        str(path.relative_to(folder)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in folder.rglob("*")
        if path.is_file() and path.name != "index.lock"
    }


def test_a_commit_of_one_item_writes_bytes_independent_of_the_gallery_size(tmp_path):
    written = {}
    for n in (20, 2000):
        folder = saved(tmp_path / f"index_{n}", randn(n, seed=0, dim=16))
        index = GalleryIndex.load(folder)
        before = files_of(folder)
        index.upsert(randn(1, seed=1, dim=16), ids=[10**6], paths=["new.png"], labels=[3])
        index.remove(10)
        assert index.commit() == 2
        after = files_of(folder)
        changed = {name for name in after if after[name] != before.get(name)}
        assert changed == {"index.json", "gen-1/log-2.pt"}  # no other file written, no gen-2
        written[n] = {name: after[name][0] for name in changed}
        assert GalleryIndex.load(folder).ids == [*range(11, 10 + n), 10**6]
    assert written[20] == written[2000]


def test_a_reader_applies_only_the_new_segments_and_equals_a_full_load(tmp_path):
    folder = saved(tmp_path / "index", randn(30, seed=0))
    writer, reader = with_policy(GalleryIndex.load(folder), SEGMENTS), GalleryIndex.load(folder)
    writer.upsert(randn(2, seed=1), ids=[10, 50], labels=[4, 5])  # 10 replaced, 50 added
    assert writer.commit() == 2 and reader.refresh() and reader.generation == 2
    writer.remove([11, 50])
    writer.upsert(randn(1, seed=2), ids=[60], paths=["60.png"])
    assert writer.commit() == 3
    full = GalleryIndex.load(folder)
    base = folder / "gen-1"
    hidden = tmp_path / "hidden"
    base.rename(
        hidden
    )  # the base's items, embeddings and backend cannot be read: only new segments can be taken
    base.mkdir()
    for name in ("generation.json", "log-3.pt"):
        (hidden / name).rename(base / name)
    assert reader.refresh() and reader.generation == 3 and not reader.refresh()
    queries = randn(4, seed=3)
    for index in (reader, full):
        assert index.ids == writer.ids == [*range(12, 40), 10, 60]
        assert index.labels == writer.labels and index.paths == writer.paths
        assert torch.equal(index.embeddings, writer.embeddings)
        assert index.search(queries, top_k=30) == writer.search(queries, top_k=30)


def test_the_net_change_of_a_log_is_its_changes_made_one_by_one():
    """:func:`net_change` against a naive list of (id, vector) pairs changed one change at a time."""
    rng = random.Random(0)
    before = list(range(10))
    changes, naive = [], [(i, None) for i in before]
    for step in range(40):
        present = [item for item, _ in naive]
        if rng.random() < 0.4 and present:
            ids = rng.sample(present, rng.randint(1, min(3, len(present))))
            changes.append(Removal(ids))
            naive = [(item, v) for item, v in naive if item not in ids]
        else:
            ids = rng.sample(range(16), rng.randint(1, 3))  # ids before, put in earlier, removed, or new
            vectors = randn(len(ids), seed=step)
            changes.append(Upsert(vectors, ids, [f"{i}.png" for i in ids], [step] * len(ids)))
            naive = [(item, v) for item, v in naive if item not in ids] + list(zip(ids, vectors))
    net = net_change(changes, set(before))
    survivors = [i for i in before if i not in net.dropped]
    assert net.upsert is not None
    assert survivors + net.upsert.ids == [item for item, _ in naive]
    assert torch.equal(net.upsert.embeddings, torch.stack([v for _, v in naive if v is not None]))
    assert len(set(net.dropped)) == len(net.dropped) and set(net.dropped) <= set(before)
    with pytest.raises(ValueError, match="the id 3 is removed where no item has it"):
        net_change([Removal([3]), Upsert(randn(1, seed=0), [4], [None], [None]), Removal([3])], set(before))


def pointer_of(folder: Path) -> tuple[int, int, list[int]]:
    """The generation, base and items of each segment that ``index.json`` of ``folder`` names."""
    meta = json.loads((folder / "index.json").read_text())
    return meta["generation"], meta["base"], [segment["items"] for segment in meta["segments"]]


def test_a_commit_compacts_the_log_past_its_fraction_of_the_base_its_count_or_a_recalibration(tmp_path):
    folder = saved(tmp_path / "index", randn(20, seed=0))
    index = GalleryIndex.load(folder)  # the log holds up to 10% of the base's 20 items: 2
    index.upsert(randn(1, seed=1), ids=[100])
    assert index.commit() == 2 and pointer_of(folder) == (2, 1, [1])
    index.remove(100)
    assert index.commit() == 3 and pointer_of(folder) == (3, 1, [1, 1])
    index.remove(10)  # a third item: a whole generation of the 19 items
    assert index.commit() == 4 and pointer_of(folder) == (4, 4, [])
    assert sorted(p.name for p in folder.iterdir()) == ["gen-1", "gen-4", "index.json", "index.lock"]
    index.max_segments = 1
    index.upsert(randn(1, seed=2), ids=[101])
    assert index.commit() == 5 and pointer_of(folder) == (5, 4, [1])
    index.upsert(randn(1, seed=3), ids=[102])  # a second segment: a whole generation
    assert index.commit() == 6 and pointer_of(folder) == (6, 6, [])
    assert sorted(p.name for p in folder.iterdir()) == ["gen-4", "gen-6", "index.json", "index.lock"]
    index.max_segments = 100
    index.calibrate(randn(6, seed=1), [0, 0, 1, 1, 2, 2], target="f1")  # written whole, with its curve
    assert index.commit() == 7 and pointer_of(folder) == (7, 7, [])
    assert (folder / "gen-7" / "calibration.png").is_file()
    loaded = GalleryIndex.load(folder)
    assert loaded.ids == [*range(11, 30), 101, 102] and loaded.calibration == index.calibration


def test_a_changed_or_missing_segment_is_refused_naming_it(tmp_path):
    folder = saved(tmp_path / "index", randn(4, seed=0))
    index = with_policy(GalleryIndex.load(folder), SEGMENTS)
    index.remove(10)
    assert index.commit() == 2
    segment = folder / "gen-1" / "log-2.pt"
    data = segment.read_bytes()
    segment.write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    with pytest.raises(GalleryIndexError) as raised:
        GalleryIndex.load(folder)
    assert re.fullmatch(
        rf"{re.escape(str(segment))}: the segment of generation 2 has sha256 [0-9a-f]{{64}}, index.json names "
        rf"[0-9a-f]{{64}}: the file was changed or cut short",
        str(raised.value),
    )
    meta = json.loads((folder / "index.json").read_text())
    (folder / "index.json").write_text(
        json.dumps({**meta, "segments": []})
    )  # generation 2 without its segment
    with pytest.raises(
        GalleryIndexError, match="index.json: not a valid log of changes .*generations 2 to 2"
    ):
        GalleryIndex.load(folder)
    (folder / "index.json").write_text(json.dumps(meta))
    segment.unlink()
    with pytest.raises(
        GalleryIndexError, match=rf"^{re.escape(str(segment))}: the segment of generation 2 cannot"
    ):
        GalleryIndex.load(folder)


def as_version_2(folder: Path) -> None:
    """Turn a saved index (of generation 1) into what version 2 wrote: the generation's files at the top,
    ``n_items`` and ``dim`` in ``index.json``, no ``keys`` in ``items.json``, no manifest nor uid."""
    generation = folder / "gen-1"
    as_whole_files(generation)
    info = json.loads((generation / "generation.json").read_text())
    for path in generation.iterdir():
        if path.name != "generation.json":
            shutil.move(path, folder / path.name)
    shutil.rmtree(generation)
    meta = json.loads((folder / "index.json").read_text())
    del meta["generation"], meta["manifest"]
    meta.update(version=2, n_items=info["n_items"], dim=info["dim"])
    (folder / "index.json").write_text(json.dumps(meta))
    items = json.loads((folder / "items.json").read_text())
    del items["keys"], items["uid"]
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
    assert old.commit() == 1  # converted: gen-1, index.json of version 5; the old files kept one commit more
    meta = json.loads((folder / "index.json").read_text())
    assert meta["version"] == 5 and meta["generation"] == 1 and "n_items" not in meta
    assert sorted(meta["manifest"]["files"]) == [
        "gen-1/backend/embeddings.npy",
        "gen-1/backend/exact_index.pt",
        "gen-1/calibration.json",
        "gen-1/calibration.png",
        "gen-1/embeddings.npy",
        "gen-1/embeddings.pt",
        "gen-1/generation.json",
        "gen-1/items.arrow",
    ]
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
    # killed while it writes segments only, whole generations only, then both (a compaction every 4 commits)
    for kill, max_segments in enumerate([10**6, 0, 3, 3]):
        acks = tmp_path / f"acks_{kill}"
        first = 1000 * (kill + 1)
        run = oml_fork_server.start(
            [str(folder), str(first), str(acks), str(max_segments)], env, script=WRITER
        )
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
    generation, base, _ = pointer_of(folder)
    assert base > 1 + len(read_acks(tmp_path / "acks_0"))  # whole generations after the segments of the first
    loaded.remove(0)
    loaded.max_segments = 0
    loaded.commit()  # a whole generation cleans what the killed ones left
    names = sorted(p.name for p in folder.iterdir())
    assert names == [f"gen-{base}", f"gen-{loaded.generation}", "index.json", "index.lock"]
    assert not [p for p in (folder / f"gen-{loaded.generation}").iterdir() if p.name.startswith(".tmp-")]


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
