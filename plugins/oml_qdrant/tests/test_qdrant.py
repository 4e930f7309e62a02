"""The ``qdrant`` backend on Qdrant's local modes (in-process and on a path): the exact backend's neighbours,
exclusion of items and sequences, ties; upsert and delete through a gallery index, save and load; a path's
collection checked against its digest; the registry; a server that does not answer is one line."""

from __future__ import annotations

import gc
import socket
from pathlib import Path

import pytest
import torch
from oml_qdrant import QdrantKnnIndex
from torch import Tensor

from oml_core.cli import main
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.index import GalleryIndex, Upserted
from oml_core.knn.backend_search import search_with_index
from oml_core.knn.exact import ExactKnnIndex
from oml_core.registry import Registry

N, DIM = 160, 8


@pytest.fixture(scope="module")
def gallery() -> tuple[Tensor, Tensor, Tensor]:
    """Embeddings in 5 clusters in which every 4th row repeats the one before it and rows 50..59 repeat row 10
    (exact ties of up to 11 items), their labels (the clusters) and sequences of about 3 items."""
    generator = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 5, (N,), generator=generator)
    x = torch.randn(5, DIM, generator=generator)[labels] * 3 + torch.randn(N, DIM, generator=generator)
    x[3::4], x[50:60] = x[2::4][: len(x[3::4])], x[10]
    labels[3::4], labels[50:60] = labels[2::4][: len(labels[3::4])], labels[10]
    return x, labels, torch.randint(0, N // 3, (N,), generator=generator)


def true_distances(queries: Tensor, gallery: Tensor, ids: Tensor, distance: str) -> Tensor:
    """The float64 distance of every query to the items of its row of ``ids`` (gallery positions, ``-1``: inf)."""
    q, g = queries.double(), gallery.double()
    if distance == "cosine":
        q, g = torch.nn.functional.normalize(q, dim=1), torch.nn.functional.normalize(g, dim=1)
    found = g[ids.clamp(min=0)]
    d = (
        (found - q[:, None]).norm(dim=2)
        if distance == "l2"
        else (1 - (found * q[:, None]).sum(2)).clamp(0, 2)
    )
    return d.masked_fill(ids < 0, float("inf")).float()


@pytest.mark.parametrize("mode", ["memory", "path"])
@pytest.mark.parametrize("distance", ["l2", "cosine"])
def test_the_local_modes_are_the_exact_backend_sequences_and_ties_included(
    gallery, distance: str, mode: str, tmp_path: Path
) -> None:
    x, labels, sequences = gallery
    ids_query, ids_gallery = torch.arange(0, N, 2), torch.arange(N)[torch.arange(N) % 5 != 1]
    for sequence_ids in (None, sequences):
        for top_n in (7, 200):  # 200: more than the gallery, rows are padded
            index = QdrantKnnIndex(distance, path=str(tmp_path / "q") if mode == "path" else None)
            found = search_with_index(index, x, ids_query, ids_gallery, top_n, labels, sequence_ids)
            index.close()
            exact = search_with_index(
                ExactKnnIndex(distance), x, ids_query, ids_gallery, top_n, labels, sequence_ids
            )
            ids = found.retrieved_ids.padded(top_n, fill=-1)
            assert torch.equal(ids, exact.retrieved_ids.padded(top_n, fill=-1))
            assert torch.equal(found.n_gallery, exact.n_gallery)
            assert [g.tolist() for g in found.gt_ids] == [g.tolist() for g in exact.gt_ids]
            expected = true_distances(x[ids_query], x[ids_gallery], ids, distance)
            torch.testing.assert_close(
                found.distances.padded(top_n, fill=float("inf")), expected, atol=1e-5, rtol=0
            )


def test_upsert_and_delete_are_reflected_in_searches_and_in_the_saved_index(gallery, tmp_path: Path) -> None:
    x, _, _ = gallery
    spec = {"name": "qdrant", "args": {"distance": "cosine"}}
    built = GalleryIndex(knn_backend=spec, distance="cosine")
    built.add(x[:60], ids=list(range(100, 160)))
    index = GalleryIndex.load(built.save(tmp_path / "index"))
    assert index.upsert(x[60:65], ids=[105, 200, 201, 202, 203]) == Upserted(added=4, updated=1)
    assert index.remove([100, 130, 159]) == 3
    kept = [i for i in range(60) if i not in (0, 5, 30, 59)]
    ids = [100 + i for i in kept] + [105, 200, 201, 202, 203]
    scratch = GalleryIndex(distance="cosine")  # the exact backend
    scratch.add(torch.cat([x[kept], x[60:65]]), ids=ids)
    queries = torch.cat([x[60:70], x[[0, 5, 30]]])  # and vectors removed or replaced
    expected = [[hit.id for hit in hits] for hits in scratch.search(queries, 10)]
    assert [[hit.id for hit in hits] for hits in index.search(queries, 10)] == expected
    index.commit()
    loaded = GalleryIndex.load(tmp_path / "index")
    assert loaded.ids == ids and [[hit.id for hit in hits] for hits in loaded.search(queries, 10)] == expected
    backend = QdrantKnnIndex("l2")
    backend.add(x[:3], ids=torch.tensor([7, 8, 9]))
    with pytest.raises(ValueError, match=r"no item has the id\(s\) \[10\]: nothing was removed"):
        backend.remove(torch.tensor([8, 10]))
    assert len(backend) == 3


def test_a_collection_on_a_path_is_checked_against_its_digest_at_load(gallery, tmp_path: Path) -> None:
    x, _, sequences = gallery
    index = QdrantKnnIndex("l2", path=str(tmp_path / "storage"), collection="items")
    index.add(x, ids=torch.arange(N) + 1000, groups=sequences)
    before = index.search(x[:20], 5, exclude=sequences[:20])
    index.save(tmp_path / "saved")
    index.close()  # a path is held by one client at a time
    loaded = QdrantKnnIndex.load(tmp_path / "saved")
    after = loaded.search(x[:20], 5, exclude=sequences[:20])
    assert torch.equal(after.ids, before.ids) and torch.equal(after.distances, before.distances)
    loaded.remove(torch.tensor([1003]))  # the collection changes, the saved index does not
    loaded.close()
    storage = tmp_path / "storage"
    with pytest.raises(ValueError) as error:
        QdrantKnnIndex.load(tmp_path / "saved")
    assert str(error.value) == (
        f"the collection 'items' of Qdrant at {storage} holds {N - 1} points, not the {N} the index saved (or not "
        f"their vectors: the SHA-256 of its points differs); it was changed since the index was saved"
    )
    with pytest.raises(
        ValueError, match=f"the collection 'items' exists already in Qdrant at {storage}: give"
    ):
        QdrantKnnIndex("l2", path=str(storage), collection="items").add(x[:1])


def test_a_gallery_index_on_a_path_commits_whole_generations_that_load(gallery, tmp_path: Path) -> None:
    x, _, _ = gallery
    built = GalleryIndex(knn_backend={"name": "qdrant", "args": {"path": str(tmp_path / "storage")}})
    built.add(x[:40], ids=list(range(40)))
    built.save(tmp_path / "index")
    del built  # its client holds the path
    gc.collect()
    index = GalleryIndex.load(tmp_path / "index")
    index.upsert(x[40:42], ids=[3, 100])
    index.remove([7])
    assert index.commit() == 2 and not (tmp_path / "index" / "gen-1" / "log-2.pt").exists()
    expected = [[hit.id for hit in hits] for hits in index.search(x[:5], 4)]
    del index
    gc.collect()
    loaded = GalleryIndex.load(tmp_path / "index")
    assert loaded.ids == [i for i in range(40) if i not in (3, 7)] + [3, 100]
    assert [[hit.id for hit in hits] for hits in loaded.search(x[:5], 4)] == expected


def test_the_backend_is_registered_with_its_default_config_and_names_bad_arguments() -> None:
    registry = Registry()
    assert registry.describe("knn_backend", "qdrant")["distribution"] == "oml-qdrant"
    cfg = registry.default_config("knn_backend", "qdrant")
    index = registry.build("knn_backend", cfg)
    assert type(index) is QdrantKnnIndex and index._params() == {
        **cfg["args"],
        "collection": index.collection,
    }
    with pytest.raises(ValueError, match=r"give path or url, not both \(path='p', url='http://h'\)"):
        QdrantKnnIndex(path="p", url="http://h")


def test_a_server_that_does_not_answer_is_one_line_and_writes_nothing(
    oml_cache_dir, tmp_path, capsys
) -> None:
    with socket.socket() as closed:  # a loopback port that nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    argv = [f"dataset_root={get_mock_dataset_root(oml_cache_dir)}", f"index_dir={tmp_path / 'index'}"]
    status = main(
        [
            "index",
            "build",
            *argv,
            "knn_backend.name=qdrant",
            f"knn_backend.args.url={url}",
            "knn_backend.args.timeout=1",
        ]
    )
    lines = capsys.readouterr().err.splitlines()
    assert status == 2 and len(lines) == 1
    assert lines[0].startswith(f"oml index build: error: the Qdrant server at {url} does not answer (")
    assert not (tmp_path / "index").exists()
