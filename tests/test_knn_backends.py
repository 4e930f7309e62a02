"""The ``knn_backend`` contract on the core's exact backend, against a naive search; the shared over-fetch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import LongTensor, Tensor

from oml_core.interfaces.knn import IKnnIndex
from oml_core.knn.exact import EXACT_EMBEDDINGS_FILE, EXACT_INDEX_FILE, EXACT_INDEX_FORMAT, ExactKnnIndex
from oml_core.knn.exclusion import search_excluding
from oml_core.knn.groups import group_sizes
from oml_core.utils.atomic import atomic_torch_save


def naive_search(
    gallery: Tensor, queries: Tensor, k: int, groups: LongTensor, exclude: LongTensor | None, distance: str
) -> tuple[Tensor, LongTensor]:
    """The whole distance matrix, excluded pairs at ``inf``, a stable sort: ties by position."""
    if distance == "l2":
        dist = torch.cdist(queries, gallery)
    else:
        dist = (
            1
            - torch.nn.functional.normalize(queries, dim=1) @ torch.nn.functional.normalize(gallery, dim=1).T
        )
    if exclude is not None:
        dist = dist.masked_fill(groups[None, :] == exclude[:, None], float("inf"))
    order = torch.sort(dist, dim=1, stable=True).indices[:, :k]
    d = torch.gather(dist, 1, order)
    return d, order.masked_fill(torch.isinf(d), -1)


def clustered_with_duplicates(n: int, dim: int, seed: int) -> Tensor:
    """float64 points in 5 clusters; every 4th row repeats the row before it (exact ties)."""
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(5, dim, generator=g, dtype=torch.float64) * 3
    x = centres[torch.arange(n) % 5] + torch.randn(n, dim, generator=g, dtype=torch.float64)
    x[3::4] = x[2::4][: len(x[3::4])]
    return x


@pytest.mark.parametrize("distance", ["l2", "cosine"])
def test_exact_index_is_the_naive_search_with_self_and_sequence_exclusion(distance: str) -> None:
    x = clustered_with_duplicates(120, 6, seed=0)
    sequences = torch.arange(120) // 3  # groups of 3 consecutive items
    index = ExactKnnIndex(distance, chunk_size=16, memory_budget=2**10)  # many small blocks
    index.add(x[:50], groups=sequences[:50])
    index.add(x[50:], groups=sequences[50:])
    for exclude in (sequences, torch.arange(120), None):
        result = index.search(x, 7, exclude=exclude)
        d, p = naive_search(x, x, 7, sequences, exclude, distance)
        assert torch.equal(result.ids, p)
        assert torch.allclose(result.distances, d.float(), atol=1e-5)
        assert result.distances.dtype == torch.float32 and result.ids.dtype == torch.long


def test_rows_are_padded_when_fewer_items_are_retrievable() -> None:
    x = torch.tensor([[0.0], [1.0], [3.0]])
    index = ExactKnnIndex()
    index.add(x, ids=torch.tensor([10, 11, 12]), groups=torch.tensor([0, 0, 1]))
    result = index.search(torch.tensor([[0.5], [2.9]]), 4, exclude=torch.tensor([0, 5]))
    assert result.ids.tolist() == [[12, -1, -1, -1], [12, 11, 10, -1]]  # query 0 leaves group 0 out
    assert result.distances[0].tolist() == pytest.approx([2.5] + [float("inf")] * 3)
    assert result.distances[1, :3].tolist() == pytest.approx([0.1, 1.9, 2.9], abs=1e-5)
    empty = ExactKnnIndex().search(torch.zeros(2, 3), 2)
    assert empty.ids.tolist() == [[-1, -1], [-1, -1]]


def test_search_excluding_over_fetches_exactly_enough() -> None:
    x = clustered_with_duplicates(90, 4, seed=1)
    groups = torch.arange(90) // 6  # a query must skip up to 6 items, all close to it
    calls: list[int] = []

    def raw(queries: Tensor, k: int) -> tuple[Tensor, LongTensor]:
        calls.append(k)
        d, p = naive_search(x, queries, k, groups, None, "l2")
        return d, p

    d, p = search_excluding(raw, x, 5, groups, groups)
    expected_d, expected_p = naive_search(x, x, 5, groups, groups, "l2")
    assert torch.equal(p, expected_p) and torch.allclose(d, expected_d)
    assert calls == [5 + 6]
    assert group_sizes(groups, torch.tensor([0, 14, 99])).tolist() == [6, 6, 0]


def test_search_excluding_pads_what_an_approximate_search_misses() -> None:
    def raw(queries: Tensor, k: int) -> tuple[Tensor, LongTensor]:  # finds only items 0 and 1
        d = torch.tensor([[0.1, 0.2] + [float("inf")] * (k - 2)]).repeat(len(queries), 1)
        p = torch.tensor([[0, 1] + [-1] * (k - 2)]).repeat(len(queries), 1)
        return d, p

    d, p = search_excluding(raw, torch.zeros(2, 3), 3, torch.tensor([7, 8, 9, 9]), torch.tensor([7, 9]))
    assert p.tolist() == [[1, -1, -1], [0, 1, -1]]
    assert d[0, 0] == pytest.approx(0.2) and torch.isinf(d[0, 1:]).all()


def test_custom_ids_and_a_save_load_round_trip(tmp_path: Path) -> None:
    x = clustered_with_duplicates(40, 5, seed=2).float()
    index = ExactKnnIndex("cosine")
    index.add(x, ids=torch.arange(1000, 1040), groups=torch.arange(40) // 2)
    before = index.search(x[:8], 4, exclude=torch.arange(8) // 2)
    assert int(before.ids.min()) >= 1000
    index.save(tmp_path / "index")
    loaded = ExactKnnIndex.load(tmp_path / "index")
    assert isinstance(loaded, IKnnIndex) and len(loaded) == 40 and loaded.distance == "cosine"
    after = loaded.search(x[:8], 4, exclude=torch.arange(8) // 2)
    assert torch.equal(before.ids, after.ids) and torch.equal(before.distances, after.distances)
    saved = (tmp_path / "index" / EXACT_EMBEDDINGS_FILE).read_bytes()
    loaded.remove(torch.tensor([1000]))  # a change of the memory-mapped embeddings is made on a copy
    loaded.add(x[:1], ids=torch.tensor([2000]))
    assert len(loaded) == 40 and (tmp_path / "index" / EXACT_EMBEDDINGS_FILE).read_bytes() == saved
    (tmp_path / "version-1").mkdir()  # a save of version 1: the embeddings inside the state
    atomic_torch_save(
        {
            "format": EXACT_INDEX_FORMAT,
            "version": 1,
            **{"distance": "cosine", "chunk_size": None, "memory_budget": None, "embeddings": x},
            **{"ids": torch.arange(1000, 1040), "groups": torch.arange(40) // 2},
        },
        tmp_path / "version-1" / EXACT_INDEX_FILE,
    )
    old = ExactKnnIndex.load(tmp_path / "version-1").search(x[:8], 4, exclude=torch.arange(8) // 2)
    assert torch.equal(before.ids, old.ids) and torch.equal(before.distances, old.distances)


def test_a_foreign_or_corrupt_file_is_refused_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    folder.mkdir()
    torch.save({"format": "something-else"}, folder / EXACT_INDEX_FILE)
    with pytest.raises(
        ValueError, match=rf"{EXACT_INDEX_FILE}: not a oml-knn-exact index \(found 'something-else'\)"
    ):
        ExactKnnIndex.load(folder)
    (folder / EXACT_INDEX_FILE).write_bytes(b"\x00garbage")
    with pytest.raises(ValueError, match=rf"{EXACT_INDEX_FILE}: not a readable oml-knn-exact index"):
        ExactKnnIndex.load(folder)
    with pytest.raises(FileNotFoundError, match="no such file"):
        ExactKnnIndex.load(tmp_path / "nowhere")


def test_bad_input_is_named() -> None:
    index = ExactKnnIndex()
    index.add(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="embeddings have dimension 5, the index has 4"):
        index.add(torch.zeros(2, 5))
    with pytest.raises(ValueError, match="embeddings must be finite, row 1 is not"):
        index.add(torch.tensor([[0.0] * 4, [float("nan")] * 4]))
    with pytest.raises(ValueError, match=r"ids must have one entry per item \(2\), got 3"):
        index.add(torch.zeros(2, 4), ids=torch.arange(3))
    with pytest.raises(ValueError, match="queries have dimension 2, the index has 4"):
        index.search(torch.zeros(1, 2), 1)
    with pytest.raises(ValueError, match="exclude must be integers"):
        index.search(torch.zeros(1, 4), 1, exclude=torch.tensor([0.5]))
    with pytest.raises(ValueError, match="k must be a positive integer, got 0"):
        index.search(torch.zeros(1, 4), 0)
    with pytest.raises(ValueError, match=r"distance must be one of \['l2', 'cosine'\], got 'dot'"):
        ExactKnnIndex("dot")


def test_the_exact_backend_is_registered_with_its_default_config() -> None:
    from oml_core.registry import Registry

    registry = Registry(load_entrypoints=False)
    assert registry.names("knn_backend") == ["exact"]
    assert registry.default_config("knn_backend", "exact") == {
        "name": "exact",
        "args": {"distance": "l2", "chunk_size": None, "memory_budget": None},
    }
    index = registry.build("knn_backend", {"name": "exact", "args": {"distance": "cosine"}})
    assert isinstance(index, ExactKnnIndex) and index.distance == "cosine" and len(index) == 0
