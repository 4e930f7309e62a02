"""The faiss backends against the core's exact backend and a float64 naive search: exactness and ties of
``faiss_flat``, recall of the approximate ones, exclusion, determinism, save/load, small galleries, bad input."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pytest
import torch
from oml_faiss import FaissFlatIndex, FaissHNSWIndex, FaissIVFIndex, FaissIVFPQIndex, FaissKnnIndex
from torch import LongTensor, Tensor

from oml_core.interfaces.knn import IKnnIndex, KnnSearchResult
from oml_core.knn.exact import ExactKnnIndex

ANN = {"faiss_ivf": FaissIVFIndex, "faiss_hnsw": FaissHNSWIndex, "faiss_ivfpq": FaissIVFPQIndex}
#: The recall@10 the defaults must reach against the exact search on the clustered data below.
MIN_RECALL = 0.95
N_GALLERY, N_QUERIES, DIM, N_CLUSTERS = 5000, 200, 32, 50


def exact(x: Tensor, queries: Tensor, k: int, distance: str, groups=None, exclude=None) -> KnnSearchResult:
    index = ExactKnnIndex(distance)
    index.add(x, groups=groups)
    return index.search(queries, k, exclude=exclude)


def same_results(a: KnnSearchResult, b: KnnSearchResult) -> bool:
    return torch.equal(a.ids, b.ids) and torch.equal(a.distances, b.distances)


def with_duplicates(n: int, dim: int, seed: int) -> Tensor:
    """Gaussian float32 rows in which every 4th row repeats the one before it and rows 50..59 repeat row 10
    (exact ties of up to 11 items)."""
    x = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))
    x[3::4] = x[2::4][: len(x[3::4])]
    x[50:60] = x[10]
    return x


# --------------------------------------------------------------------------------------------- faiss_flat
def near_ties(x: Tensor, distance: str, relative: float = 1e-6) -> int:
    """How many pairs of distances from a row to two others are distinct but closer than float32 rounding can
    tell apart (``relative``): there two correct float32 searches may order them differently."""
    x = x.double()
    if distance == "l2":
        dist = torch.cdist(x, x)
    else:
        unit = torch.nn.functional.normalize(x, dim=1)
        dist = (1 - unit @ unit.T).clamp(0, 2)
    s = torch.sort(dist, dim=1).values
    gaps = s[:, 1:] - s[:, :-1]
    return int(((gaps > 0) & (gaps < relative * s[:, 1:].clamp(min=1e-3))).sum())


@pytest.mark.parametrize("distance", ["l2", "cosine"])
@pytest.mark.parametrize("k", [1, 7, 100, 200])  # 200: more than the gallery, rows are padded
@pytest.mark.parametrize("exclusion", ["none", "self", "sequence"])
def test_flat_is_the_exact_backend_ties_included(
    distance: str, k: int, exclusion: str, naive: Callable[..., Any]
) -> None:
    n = 150
    x = with_duplicates(n, 8, seed=1)
    assert near_ties(x, distance) == 0  # exact ties (duplicates) only
    groups = {"none": None, "self": None, "sequence": torch.arange(n) // 3}[exclusion]
    exclude = {"none": None, "self": torch.arange(n), "sequence": torch.arange(n) // 3}[exclusion]
    index = FaissFlatIndex(distance)
    index.add(x[:60], groups=None if groups is None else groups[:60])  # two adds: positions run on
    index.add(x[60:], groups=None if groups is None else groups[60:])
    found = index.search(x, k, exclude=exclude)
    expected = exact(x, x, k, distance, groups, exclude)
    assert torch.equal(found.ids, expected.ids)
    assert found.ids.dtype == torch.long and found.distances.dtype == torch.float32
    # the float64 truth: faiss is within 1e-5 (the exact backend's matrix-multiply form is ~1e-3 off at 0)
    truth, positions = naive(x, x, k, torch.arange(n) if groups is None else groups, exclude, distance)
    assert torch.equal(found.ids, positions)
    torch.testing.assert_close(found.distances.double(), truth, atol=1e-5, rtol=1e-5)
    if k > n:
        assert (found.ids[:, n:] == -1).all() and torch.isinf(found.distances[:, n:]).all()


def test_flat_completes_ties_across_the_kth_place() -> None:
    # integer points: both backends compute every squared distance exactly, so ties between distinct points
    # are exact and many; the flat index must keep the lowest positions of a tie cut by k
    x = torch.randint(-3, 4, (400, 5), generator=torch.Generator().manual_seed(1)).float()
    sequences = torch.arange(400) // 4
    index = FaissFlatIndex("l2")
    index.add(x, groups=sequences)
    for k in (1, 5, 37, 120):
        for exclude in (None, torch.arange(400) // 4):
            found = index.search(x[:150], k, exclude=None if exclude is None else exclude[:150])
            expected = exact(x, x[:150], k, "l2", sequences, None if exclude is None else exclude[:150])
            assert torch.equal(found.ids, expected.ids) and torch.equal(found.distances, expected.distances)
    # a query equidistant from 300 identical items: the first k by position
    index = FaissFlatIndex("l2")
    index.add(torch.ones(300, 4), ids=torch.arange(1000, 1300))
    assert index.search(torch.zeros(30, 4), 6).ids.tolist() == [list(range(1000, 1006))] * 30


def test_flat_with_custom_ids_and_an_empty_index() -> None:
    x = with_duplicates(40, 5, seed=2)
    index = FaissFlatIndex("cosine")
    assert index.search(x[:2], 3).ids.tolist() == [[-1] * 3] * 2
    index.add(x, ids=torch.arange(1000, 1040), groups=torch.arange(40) // 2)
    found = index.search(x[:8], 4, exclude=torch.arange(8) // 2)
    expected = exact(x, x[:8], 4, "cosine", torch.arange(40) // 2, torch.arange(8) // 2)
    assert torch.equal(found.ids - 1000, expected.ids)
    assert index.search(x[:0], 3).ids.shape == (0, 3)
    assert isinstance(index, IKnnIndex) and len(index) == 40 and index.structure == "flat"


# ---------------------------------------------------------------------------------- the approximate ones
@pytest.fixture(scope="module")
def data(make_clustered: Callable[..., Any]) -> tuple[Tensor, Tensor]:
    gallery, queries, _ = make_clustered(N_GALLERY, DIM, N_CLUSTERS, seed=0, n_queries=N_QUERIES)
    return gallery, queries


@pytest.fixture(scope="module")
def built(data: tuple[Tensor, Tensor]) -> dict[tuple[str, str], FaissKnnIndex]:
    """Every approximate backend at its defaults, for both distances, built once on the gallery, with
    sequences of 5 consecutive items as groups."""
    gallery, _ = data
    indexes = {}
    for name, cls in ANN.items():
        for distance in ("l2", "cosine"):
            index = cls(distance)
            index.add(gallery[:3000], groups=torch.arange(3000) // 5)
            index.add(gallery[3000:], groups=torch.arange(3000, N_GALLERY) // 5)
            indexes[name, distance] = index
    return indexes


@pytest.mark.parametrize("distance", ["l2", "cosine"])
@pytest.mark.parametrize("name", list(ANN))
def test_defaults_reach_the_recall_of_exact_search(
    name: str, distance: str, data: tuple[Tensor, Tensor], built: dict, recall: Callable[..., float]
) -> None:
    gallery, queries = data
    index = built[name, distance]
    found = index.search(queries, 10)
    expected = exact(gallery, queries, 10, distance)
    assert index.structure == name.removeprefix("faiss_") and len(index) == N_GALLERY
    assert recall(found.ids, expected.ids) >= MIN_RECALL
    assert (found.ids >= 0).all()
    # rows by (distance, id); ivf and hnsw keep full vectors: their distances are exact
    assert (found.distances[:, 1:] >= found.distances[:, :-1]).all()
    if name != "faiss_ivfpq":
        truth = naive_distances(gallery, queries, found.ids, distance)
        torch.testing.assert_close(found.distances.double(), truth, atol=1e-4, rtol=1e-5)


def naive_distances(gallery: Tensor, queries: Tensor, ids: LongTensor, distance: str) -> Tensor:
    g, q = gallery.double()[ids], queries.double()[:, None, :]
    if distance == "l2":
        return (g - q).norm(dim=2)
    return 1 - torch.nn.functional.cosine_similarity(g, q, dim=2)


@pytest.mark.parametrize("name", list(ANN))
def test_exclusion_holds_and_keeps_the_recall(
    name: str, data: tuple[Tensor, Tensor], built: dict, recall: Callable[..., float]
) -> None:
    gallery, _ = data
    groups = torch.arange(N_GALLERY) // 5
    queries, exclude = gallery[::25], groups[::25]  # gallery items: their own sequence must be left out
    found = built[name, "l2"].search(queries, 10, exclude=exclude)
    valid = found.ids >= 0
    assert not (groups[found.ids.clamp(min=0)] == exclude[:, None])[valid].any()
    expected = exact(gallery, queries, 10, "l2", groups, exclude)
    assert recall(found.ids, expected.ids) >= MIN_RECALL
    assert not (found.ids == torch.arange(N_GALLERY)[::25, None]).any()  # the query item itself


@pytest.mark.parametrize("name", list(ANN))
def test_same_seed_same_results_and_a_save_load_round_trip(
    name: str, data: tuple[Tensor, Tensor], built: dict, tmp_path: Path
) -> None:
    gallery, queries = data
    first = built[name, "l2"]
    second = ANN[name]("l2")
    second.add(gallery[:3000], groups=torch.arange(3000) // 5)
    second.add(gallery[3000:], groups=torch.arange(3000, N_GALLERY) // 5)
    exclude = torch.arange(N_QUERIES) % 7
    before = first.search(queries, 10, exclude=exclude)
    assert same_results(second.search(queries, 10, exclude=exclude), before)

    first.save(tmp_path / "index")
    assert sorted(p.name for p in (tmp_path / "index").iterdir()) == ["faiss.index", "faiss_index.pt"]
    loaded = FaissKnnIndex.load(tmp_path / "index")
    assert type(loaded) is ANN[name] and len(loaded) == N_GALLERY and loaded.distance == "l2"
    assert loaded.structure == first.structure and torch.equal(loaded.groups, first.groups)
    assert same_results(loaded.search(queries, 10, exclude=exclude), before)
    assert same_results(ANN[name].load(tmp_path / "index").search(queries, 10), first.search(queries, 10))
    # adding after a load is adding to the original (HNSW levels are seeded by the number of items)
    extra = queries[:20] + 0.01
    second.add(extra, groups=torch.full((20,), -1))
    loaded.add(extra, groups=torch.full((20,), -1))
    assert same_results(loaded.search(queries, 10), second.search(queries, 10))


def test_hnsw_builds_the_same_graph_on_any_number_of_threads(data: tuple[Tensor, Tensor]) -> None:
    gallery, queries = data
    graphs, results = [], []
    before = faiss.omp_get_max_threads()
    try:
        for threads in (1, 2, 1):
            faiss.omp_set_num_threads(threads)
            index = FaissHNSWIndex("l2", seed=3)
            index.add(gallery[:2000])
            graphs.append(faiss.vector_to_array(index._index.hnsw.neighbors))
            results.append(index.search(queries, 10))
    finally:
        faiss.omp_set_num_threads(before)
    assert all(np.array_equal(g, graphs[0]) for g in graphs) and all(
        same_results(r, results[0]) for r in results
    )
    other = FaissHNSWIndex("l2", seed=4)
    other.add(gallery[:2000])
    assert not np.array_equal(
        faiss.vector_to_array(other._index.hnsw.neighbors), graphs[0]
    )  # the seed matters


def test_training_waits_for_the_first_search_or_train_size(
    data: tuple[Tensor, Tensor], recall: Callable[..., float]
) -> None:
    gallery, queries = data
    index = FaissIVFIndex("l2", nlist=50, nprobe=10)
    for chunk in gallery.split(1000):
        index.add(chunk)
    assert index.structure is None and len(index) == N_GALLERY  # buffered
    index.search(queries[:1], 1)
    assert index.structure == "ivf"
    bounded = FaissIVFIndex("l2", nlist=50, nprobe=10, train_size=2000)
    bounded.add(gallery[:1000])
    assert bounded.structure is None
    bounded.add(gallery[1000:2500])  # 2500 >= train_size: trained on these, then indexed
    assert bounded.structure == "ivf" and bounded._index.ntotal == 2500
    bounded.add(gallery[2500:])
    assert bounded._index.ntotal == N_GALLERY
    expected = exact(gallery, queries, 10, "l2")
    assert recall(bounded.search(queries, 10).ids, expected.ids) >= MIN_RECALL


# ----------------------------------------------------------------------------------------- small galleries
@pytest.mark.parametrize(
    "make, n, structure",
    [
        (lambda: FaissIVFIndex("l2", nlist=100), 30, "flat"),  # fewer items than nlist
        (lambda: FaissIVFIndex("cosine", nlist=4, nprobe=4), 30, "ivf"),  # nprobe == nlist: exact
        (lambda: FaissIVFPQIndex("l2", nlist=100), 200, "flat"),  # fewer than 2 ** nbits for the PQ
        (lambda: FaissIVFPQIndex("l2", nlist=8, nprobe=8, refine="flat"), 300, "ivfpq"),
        (lambda: FaissHNSWIndex("cosine"), 30, "hnsw"),
        (lambda: FaissHNSWIndex("l2"), 1, "hnsw"),
    ],
)
def test_small_galleries_work(
    make: Callable[[], FaissKnnIndex], n: int, structure: str, caplog: pytest.LogCaptureFixture
) -> None:
    x = with_duplicates(max(n, 60), 8, seed=5)[:n]
    index = make()
    index.add(x, groups=torch.arange(n) // 2)
    with caplog.at_level(logging.WARNING, logger="oml_faiss.indexes"):
        found = index.search(x, 12, exclude=torch.arange(n) // 2)
    assert index.structure == structure
    if structure == "flat":
        assert "building an exact flat index instead" in caplog.text
    expected = exact(x, x, 12, index.distance, torch.arange(n) // 2, torch.arange(n) // 2)
    if structure != "ivfpq":  # exact structures (flat, nprobe == nlist) and HNSW on so few items
        assert torch.equal(found.ids, expected.ids)
    assert torch.equal(found.ids < 0, expected.ids < 0)  # padded where fewer than 12 are retrievable


# -------------------------------------------------------------------------------------------- bad input
def test_a_foreign_or_corrupt_folder_is_refused_naming_the_file(tmp_path: Path) -> None:
    x = with_duplicates(40, 4, seed=6)
    ExactKnnIndex().save(tmp_path / "exact")
    with pytest.raises(
        ValueError, match=r"faiss_index\.pt: no such file; .* is not a saved oml-knn-faiss index"
    ):
        FaissKnnIndex.load(tmp_path / "exact")
    with pytest.raises(FileNotFoundError):
        FaissKnnIndex.load(tmp_path / "nowhere")

    index = FaissFlatIndex()
    index.add(x)
    folder = tmp_path / "flat"
    index.save(folder)
    with pytest.raises(ValueError, match=r"faiss_index\.pt: holds a 'faiss_flat' index, not faiss_hnsw"):
        FaissHNSWIndex.load(folder)
    faiss_file = folder / "faiss.index"
    faiss_file.write_bytes(faiss_file.read_bytes()[:-8])
    with pytest.raises(
        ValueError, match=r"faiss\.index: its content is not the one saved .*SHA-256 mismatch"
    ):
        FaissKnnIndex.load(folder)

    index.save(folder)  # a garbage faiss file with a matching digest: faiss itself refuses it
    state = torch.load(folder / "faiss_index.pt", weights_only=True)
    faiss_file.write_bytes(b"\x00garbage")
    state["index_sha256"] = hashlib.sha256(b"\x00garbage").hexdigest()
    torch.save(state, folder / "faiss_index.pt")
    with pytest.raises(ValueError, match=r"faiss\.index: not a readable faiss index"):
        FaissKnnIndex.load(folder)

    torch.save({"format": "oml-knn-exact"}, folder / "faiss_index.pt")
    with pytest.raises(
        ValueError, match=r"faiss_index\.pt: not a oml-knn-faiss index \(found 'oml-knn-exact'\)"
    ):
        FaissKnnIndex.load(folder)
    (folder / "faiss_index.pt").write_bytes(b"\x00garbage")
    with pytest.raises(ValueError, match=r"faiss_index\.pt: not a readable oml-knn-faiss index"):
        FaissKnnIndex.load(folder)


@pytest.mark.parametrize("name", ["faiss_flat", *ANN])
def test_an_index_loads_memory_mapped_and_changes_on_a_copy_that_saves(
    name: str, data: tuple[Tensor, Tensor], built: dict, tmp_path: Path
) -> None:
    gallery, queries = data
    index = built[name, "l2"] if name in ANN else FaissFlatIndex("l2")
    if name == "faiss_flat":
        index.add(gallery)
    index.save(tmp_path / "index")
    saved = (tmp_path / "index" / "faiss.index").read_bytes()
    loaded = FaissKnnIndex.load(tmp_path / "index")
    assert str(tmp_path / "index" / "faiss.index") in Path("/proc/self/maps").read_text()  # the file's pages
    assert same_results(loaded.search(queries, 10), index.search(queries, 10))
    (tmp_path / "index").rename(tmp_path / "moved")  # a change reads the file loaded, wherever it went since
    removable = loaded.structure in ("flat", "ivf")  # the others cannot remove (CannotRemoveError)
    if removable:
        loaded.remove(torch.arange(10))
    loaded.add(queries[:5], ids=torch.arange(10_000, 10_005))
    assert (
        len(loaded) == N_GALLERY + 5 - 10 * removable
        and not torch.isin(loaded.ids, torch.arange(10 * removable)).any()
    )
    assert loaded.search(queries[:5], 1).ids.flatten().tolist() == list(range(10_000, 10_005))
    loaded.save(tmp_path / "changed")
    for mapped in (False, True):  # read into memory, or mapped
        again = FaissKnnIndex.load(tmp_path / "changed", mapped=mapped)
        assert same_results(again.search(queries, 10), loaded.search(queries, 10))
        assert (str(tmp_path / "changed" / "faiss.index") in Path("/proc/self/maps").read_text()) == mapped
    assert (tmp_path / "moved" / "faiss.index").read_bytes() == saved


def test_an_empty_index_saves_and_loads(tmp_path: Path) -> None:
    FaissIVFIndex("cosine", nlist=7, nprobe=2).save(tmp_path / "empty")
    loaded = FaissKnnIndex.load(tmp_path / "empty")
    assert isinstance(loaded, FaissIVFIndex) and len(loaded) == 0 and (loaded.nlist, loaded.nprobe) == (7, 2)
    assert loaded.search(torch.zeros(2, 3), 2).ids.tolist() == [[-1, -1], [-1, -1]]


@pytest.mark.parametrize(
    "cls, kwargs, message",
    [
        (FaissFlatIndex, {"distance": "dot"}, r"distance must be one of \['l2', 'cosine'\], got 'dot'"),
        (FaissFlatIndex, {"seed": -1}, r"seed must be in \[0, 2147483647\], got -1"),
        (FaissFlatIndex, {"device": "gpu"}, r"device must be 'cpu', 'cuda' or 'cuda:<n>', got 'gpu'"),
        (FaissIVFIndex, {"nlist": 0}, r"nlist must be >= 1, got 0"),
        (FaissIVFIndex, {"nlist": 1.5}, r"nlist must be an integer, got 1.5"),
        (FaissIVFIndex, {"nlist": True}, r"nlist must be an integer, got True"),
        (FaissIVFIndex, {"nprobe": 0}, r"nprobe must be in \[1, nlist\] \(nlist=100\), got 0"),
        (FaissIVFIndex, {"nlist": 8, "nprobe": 9}, r"nprobe must be in \[1, nlist\] \(nlist=8\), got 9"),
        (FaissIVFIndex, {"train_size": 10}, r"train_size must be at least nlist = 100, got 10"),
        (FaissHNSWIndex, {"M": 1}, r"M must be >= 2, got 1"),
        (FaissHNSWIndex, {"efConstruction": 0}, r"efConstruction must be >= 1, got 0"),
        (FaissHNSWIndex, {"efSearch": 0}, r"efSearch must be >= 1, got 0"),
        (FaissIVFPQIndex, {"m": 0}, r"m must be >= 1, got 0"),
        (FaissIVFPQIndex, {"nbits": 17}, r"nbits must be in \[1, 16\], got 17"),
        (FaissIVFPQIndex, {"refine": "pq"}, r"refine must be one of \['sq8', 'flat'\] or None, got 'pq'"),
        (FaissIVFPQIndex, {"k_factor": 0}, r"k_factor must be >= 1, got 0"),
        (
            FaissIVFPQIndex,
            {"train_size": 200},
            r"train_size must be at least max\(nlist, 2 \*\* nbits\) = 256",
        ),
    ],
)
def test_bad_arguments_are_named_at_construction(cls: type, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cls(**kwargs)


def test_bad_input_is_named() -> None:
    index = FaissIVFPQIndex(m=5)
    with pytest.raises(ValueError, match="m=5 must divide the embedding dimension 8"):
        index.add(torch.zeros(3, 8))
    assert len(index) == 0
    index = FaissHNSWIndex()
    index.add(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="embeddings have dimension 5, the index has 4"):
        index.add(torch.zeros(2, 5))
    with pytest.raises(ValueError, match="embeddings must be finite, row 1 is not"):
        index.add(torch.tensor([[0.0] * 4, [float("nan")] * 4]))
    with pytest.raises(ValueError, match="queries have dimension 2, the index has 4"):
        index.search(torch.zeros(1, 2), 1)
    with pytest.raises(ValueError, match="k must be a positive integer, got 0"):
        index.search(torch.zeros(1, 4), 0)
    with pytest.raises(ValueError, match="exclude must be integers"):
        index.search(torch.zeros(1, 4), 1, exclude=torch.tensor([0.5]))


def test_cuda_without_gpu_faiss_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="faiss has no GPU implementation of HNSW"):
        FaissHNSWIndex(device="cuda")
    with pytest.raises(ValueError, match=r"no GPU implementation of the refine stage .*set refine=None"):
        FaissIVFPQIndex(device="cuda")
    if hasattr(faiss, "StandardGpuResources"):
        pytest.skip("this faiss has GPU support")
    for cls in (FaissFlatIndex, FaissIVFIndex):
        with pytest.raises(ValueError, match=r"device='cuda' needs faiss built with GPU support .*CPU-only"):
            cls(device="cuda")
    with pytest.raises(ValueError, match=r"device='cuda:1' needs faiss built with GPU support"):
        FaissIVFPQIndex(device="cuda:1", refine=None)


@pytest.mark.skipif(
    not (torch.cuda.is_available() and hasattr(faiss, "StandardGpuResources")),
    reason="needs faiss-gpu and CUDA",
)
@pytest.mark.parametrize("cls", [FaissFlatIndex, FaissIVFIndex])
def test_gpu_gives_the_cpu_neighbours(cls: type, data: tuple[Tensor, Tensor], tmp_path: Path) -> None:
    gallery, queries = data
    on_cpu, on_gpu = cls("l2"), cls("l2", device="cuda")
    for index in (on_cpu, on_gpu):
        index.add(gallery)
    assert torch.equal(on_gpu.search(queries, 10).ids, on_cpu.search(queries, 10).ids)
    on_gpu.save(tmp_path / "gpu")
    assert torch.equal(
        cls.load(tmp_path / "gpu", device="cpu").search(queries, 10).ids, on_cpu.search(queries, 10).ids
    )


@pytest.mark.parametrize(("dim", "m"), [(32, 8), (384, 48), (768, 48), (30, 6), (7, 1)])
def test_ivfpq_default_sub_quantizers_are_the_largest_divisor_up_to_a_quarter_of_dim_and_48(dim, m):
    assert FaissIVFPQIndex().sub_quantizers(dim) == m
