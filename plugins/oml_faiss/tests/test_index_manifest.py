"""A gallery index on a faiss backend bound to its items: the backend's folder of another index of other data
(its ``faiss.index`` and ``faiss_index.pt``) is named file by file at load, and the folder left as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from oml_core.index import GalleryIndex, GalleryIndexError

from .conftest import clustered


def saved(folder: Path, seed: int) -> Path:
    x, _, _ = clustered(30, 8, 3, seed=seed)
    index = GalleryIndex(knn_backend="faiss_flat")
    index.add(x, ids=list(range(30)))
    return index.save(folder)


def test_a_faiss_backend_of_another_index_is_named_file_by_file(tmp_path: Path) -> None:
    mine, other = saved(tmp_path / "mine", seed=0), saved(tmp_path / "other", seed=1)
    queries = clustered(3, 8, 3, seed=2)[0]
    expected = GalleryIndex.load(mine).search(queries, 5)
    backend = mine / "gen-1" / "backend"
    shutil.move(backend, tmp_path / "kept")
    shutil.copytree(other / "gen-1" / "backend", backend)
    before = {p: p.read_bytes() for p in mine.rglob("*") if p.is_file()}
    with pytest.raises(GalleryIndexError) as raised:
        GalleryIndex.load(mine)
    assert str(raised.value) == (
        f"{backend / 'faiss.index'}, {backend / 'faiss_index.pt'}: not this index's (their digests differ from "
        f"{mine / 'index.json'}'s manifest); rebuild the index (oml index build)"
    )
    assert {p: p.read_bytes() for p in mine.rglob("*") if p.is_file()} == before
    shutil.rmtree(backend)
    shutil.move(tmp_path / "kept", backend)
    assert GalleryIndex.load(mine).search(queries, 5) == expected
    assert not torch.equal(GalleryIndex.load(other).embeddings, GalleryIndex.load(mine).embeddings)
