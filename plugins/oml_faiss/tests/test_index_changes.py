"""Removal from the faiss backends and a gallery index on them that changes: ``faiss_flat`` and ``faiss_ivf``
remove by id in place (exclusion still holds), ``faiss_hnsw`` and ``faiss_ivfpq`` say they cannot and the index
builds them again; either way a changed index answers as one built from scratch of the resulting items and as a
float64 naive search, before and after a commit; a faiss state of version 1 loads and changes."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from oml_faiss import FaissFlatIndex, FaissHNSWIndex, FaissIVFIndex, FaissIVFPQIndex, FaissKnnIndex
from oml_faiss.indexes import FAISS_STATE_FILE

from oml_core.index import GalleryIndex, Upserted
from oml_core.interfaces.knn import CannotRemoveError

from .conftest import clustered, naive_search

#: The backends of the gallery index test: IVF scans every list (``nprobe == nlist``), so all three are exact here.
BACKENDS = {
    "faiss_flat": {},
    "faiss_ivf": {"nlist": 4, "nprobe": 4},
    "faiss_hnsw": {},
}


@pytest.mark.parametrize("distance", ["l2", "cosine"])
@pytest.mark.parametrize("make", [FaissFlatIndex, lambda d: FaissIVFIndex(d, nlist=4, nprobe=4)])
def test_flat_and_ivf_remove_by_id_and_keep_excluding(make, distance) -> None:
    x, queries, _ = clustered(80, 8, 4, seed=0, n_queries=6)
    ids, groups = torch.arange(500, 580), torch.arange(80) // 2  # pairs of items share a group
    index = make(distance)
    index.add(x, ids=ids, groups=groups)
    index.search(queries, 1)  # built (IVF: trained) before the removal
    assert index.structure in ("flat", "ivf") and index.structure == (
        "flat" if make is FaissFlatIndex else "ivf"
    )
    removed = torch.tensor([500, 541, 579, 520])
    index.remove(removed)
    kept = ~torch.isin(ids, removed)
    exclude = torch.tensor([0, 10, 20, 39, 5, 7])  # groups 10 and 20 lost one item each
    found = index.search(queries, 8, exclude=exclude)
    d, positions = naive_search(x[kept], queries, 8, groups[kept], exclude, distance)
    assert torch.equal(found.ids, ids[kept][positions]) and torch.allclose(
        found.distances, d.float(), atol=1e-5
    )
    with pytest.raises(ValueError, match=r"no item has the id\(s\) \[500\]: nothing was removed"):
        index.remove(torch.tensor([501, 500]))
    assert len(index) == 76


def test_hnsw_and_ivfpq_cannot_remove_and_change_nothing() -> None:
    x, _, _ = clustered(300, 8, 4, seed=0)
    for index in (FaissHNSWIndex("l2"), FaissIVFPQIndex("l2", nlist=2, nprobe=2, m=2, nbits=8)):
        index.add(x)
        index.search(x[:1], 1)
        with pytest.raises(
            CannotRemoveError, match=f"{index.name}: faiss cannot remove items from an index of"
        ):
            index.remove(torch.tensor([0]))
        assert len(index) == 300 and index.search(x[:1], 1).ids.tolist() == [[0]]


@pytest.mark.parametrize("name", list(BACKENDS))
def test_a_changed_index_answers_as_one_built_from_scratch(tmp_path: Path, name: str, caplog) -> None:
    spec = {"name": name, "args": BACKENDS[name]}
    x, queries, _ = clustered(60, 8, 4, seed=1, n_queries=8)
    built = GalleryIndex(knn_backend=spec)
    built.add(x, ids=list(range(100, 160)))
    index = GalleryIndex.load(built.save(tmp_path / "index"))
    new, _, _ = clustered(5, 8, 4, seed=2)
    with caplog.at_level(logging.INFO, logger="oml_core"):
        assert index.upsert(new, ids=[105, 200, 201, 202, 203]) == Upserted(added=4, updated=1)
        assert index.remove([100, 130, 159]) == 3
    assert ("cannot remove items" in caplog.text) == (name == "faiss_hnsw")

    kept = [i for i in range(60) if i not in (0, 5, 30, 59)]
    ids = [100 + i for i in kept] + [105, 200, 201, 202, 203]
    gallery = torch.cat([x[kept], new])
    assert index.ids == ids
    scratch = GalleryIndex(knn_backend=spec)
    scratch.add(gallery, ids=ids)
    queries = torch.cat([queries, x[[0, 5, 30]]])  # and vectors removed or replaced
    _, positions = naive_search(gallery, queries, 10, torch.arange(len(gallery)), None, "l2")
    expected = [[ids[p] for p in row] for row in positions.tolist()]
    for found in (index.search(queries, 10), scratch.search(queries, 10)):
        assert [[hit.id for hit in hits] for hits in found] == expected
    distances = [hit.distance for hits in index.search(queries, 10) for hit in hits]
    scratch_distances = [hit.distance for hits in scratch.search(queries, 10) for hit in hits]
    assert distances == pytest.approx(scratch_distances, abs=1e-5)

    assert index.commit() == 2
    loaded = GalleryIndex.load(tmp_path / "index")
    assert [[hit.id for hit in hits] for hits in loaded.search(queries, 10)] == expected


def test_a_faiss_state_of_version_1_loads_and_removes(tmp_path: Path) -> None:
    x, _, _ = clustered(40, 8, 2, seed=3)
    index = FaissIVFIndex("l2", nlist=2, nprobe=2)
    index.add(x, ids=torch.arange(40) + 7)
    index.save(tmp_path)
    state = torch.load(tmp_path / FAISS_STATE_FILE, weights_only=True)
    old = {key: value for key, value in state.items() if key not in ("labels", "next_label")}
    torch.save({**old, "version": 1}, tmp_path / FAISS_STATE_FILE)  # what oml-faiss wrote before removal
    loaded = FaissKnnIndex.load(tmp_path)
    loaded.remove(torch.tensor([7, 20]))
    loaded.add(x[:1], ids=torch.tensor([100]))
    found = loaded.search(x[:3], 2)
    assert found.ids[:, 0].tolist() == [100, 8, 9]  # x[0] is 100 now (7 is gone), x[1], x[2] themselves
