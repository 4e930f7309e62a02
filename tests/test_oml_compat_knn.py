"""OML 4.0's ``batched_knn`` and ``batched_knn_qg`` signatures (``oml_core.functional.knn``): OML's positional
order, ``bs`` as OML's name of ``chunk_size``, on hand-computed cases."""

from __future__ import annotations

import pytest
import torch
from oml_core.functional.knn import batched_knn, batched_knn_qg

# four points on a line: 0, 1, 3, 6
POINTS = torch.tensor([[0.0], [1.0], [3.0], [6.0]])
LABELS = torch.tensor([0, 0, 1, 1])
SEQUENCES = torch.tensor([0, 1, 1, 2])  # items 1 and 2 are one sequence


def as_lists(ragged) -> list[list[float]]:
    return [row.tolist() for row in ragged]


def test_batched_knn_takes_oml_positional_order():
    # OML's order after top_n: sequence_ids, labels_gt, bs, verbose
    distances, retrieved, gt = batched_knn(
        POINTS, torch.tensor([0, 1]), torch.arange(4), 2, SEQUENCES, LABELS, 1
    )
    # query 0 (at 0): itself ignored -> items 1 (distance 1) and 2 (3); its label's other item: 1
    # query 1 (at 1): itself and item 2 (its sequence) ignored -> items 0 (1) and 3 (5); ground truth: 0
    assert as_lists(retrieved) == [[1, 2], [0, 3]]
    assert as_lists(distances) == [[1.0, 3.0], [1.0, 5.0]]
    assert as_lists(gt) == [[1], [0]]


def test_batched_knn_keywords_and_bs_alias():
    by_keywords = batched_knn(
        POINTS, torch.tensor([0, 1]), torch.arange(4), top_n=2, labels_gt=LABELS, sequence_ids=SEQUENCES
    )
    for chunking in ({"bs": 1}, {"chunk_size": 1}, {}):
        result = batched_knn(
            POINTS,
            torch.tensor([0, 1]),
            torch.arange(4),
            2,
            sequence_ids=SEQUENCES,
            labels_gt=LABELS,
            **chunking,
        )
        assert [as_lists(r) for r in result] == [as_lists(r) for r in by_keywords]
    with pytest.raises(
        TypeError, match=r"^give bs \(OML's name\) or chunk_size, not both: got bs=1, chunk_size=2$"
    ):
        batched_knn(POINTS, torch.tensor([0]), torch.arange(4), 2, bs=1, chunk_size=2)
    with pytest.raises(TypeError):  # oml's further arguments are keyword-only
        batched_knn(POINTS, torch.tensor([0]), torch.arange(4), 2, None, None, None, False, "cosine")


QUERIES = torch.tensor([[0.0], [1.0]])
GALLERY = torch.tensor([[0.0], [2.0], [5.0]])


def test_batched_knn_qg_ignores_the_same_item_by_id():
    # OML's positional order: labels_query, labels_gallery, ids_query, ids_gallery, ...
    distances, retrieved, gt = batched_knn_qg(
        QUERIES,
        GALLERY,
        2,
        torch.tensor([0, 1]),
        torch.tensor([0, 1, 1]),
        torch.tensor([10, 11]),
        torch.tensor([10, 12, 13]),
    )
    # query 0 is gallery item 0 (id 10): ignored -> items 1 (2) and 2 (5); no other item of label 0
    # query 1: items 0 and 1 both at distance 1 (the smaller position first); ground truth: items 1 and 2
    assert as_lists(retrieved) == [[1, 2], [0, 1]]
    assert as_lists(distances) == [[2.0, 5.0], [1.0, 1.0]]
    assert as_lists(gt) == [[], [1, 2]]


def test_batched_knn_qg_with_sequences_and_without_ids():
    _, retrieved, gt = batched_knn_qg(
        QUERIES,
        GALLERY,
        top_n=3,
        labels_query=torch.tensor([0, 1]),
        labels_gallery=torch.tensor([0, 1, 1]),
        ids_query=torch.tensor([10, 11]),
        ids_gallery=torch.tensor([10, 12, 13]),
        sequence_ids_query=torch.tensor([0, 1]),
        sequence_ids_gallery=torch.tensor([0, 1, 2]),
        bs=1,
    )
    # query 1 now also ignores gallery item 1 (its sequence 1)
    assert as_lists(retrieved) == [[1, 2], [0, 2]]
    assert as_lists(gt) == [[], [2]]
    distances, retrieved, gt = batched_knn_qg(QUERIES, GALLERY, 1)
    assert as_lists(retrieved) == [[0], [0]] and as_lists(distances) == [[0.0], [1.0]] and gt is None


def test_batched_knn_qg_bad_ids():
    ids = {"ids_query": torch.tensor([10, 11]), "ids_gallery": torch.tensor([10, 12, 13])}
    with pytest.raises(ValueError, match="^give both ids_query and ids_gallery, or neither$"):
        batched_knn_qg(QUERIES, GALLERY, 1, ids_query=ids["ids_query"])
    with pytest.raises(
        ValueError, match="^give both sequence_ids_query and sequence_ids_gallery, or neither$"
    ):
        batched_knn_qg(QUERIES, GALLERY, 1, sequence_ids_gallery=torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="an item id shared by a query and a gallery item has two different"):
        batched_knn_qg(
            QUERIES,
            GALLERY,
            1,
            **ids,
            sequence_ids_query=torch.tensor([0, 1]),
            sequence_ids_gallery=torch.tensor([5, 1, 2]),  # item 10: sequence 0 as a query, 5 in the gallery
        )
    with pytest.raises(TypeError, match="not both"):
        batched_knn_qg(QUERIES, GALLERY, 1, bs=2, chunk_size=2)
