"""AllTripletsMiner and the triplet masks against a naive python reference."""

from __future__ import annotations

import itertools
import sys

import pytest
import torch
from oml_losses import AllTripletsMiner, get_available_triplets_ids
from oml_losses.miners import get_pos_neg_masks


def naive_triplets(labels: list[int]) -> list[tuple[int, int, int]]:
    """Every (a, p, n) by brute force, in lexicographic order."""
    n = len(labels)
    return [
        (a, p, neg)
        for a, p, neg in itertools.product(range(n), repeat=3)
        if a != p and labels[a] == labels[p] and labels[neg] != labels[a]
    ]


def as_list(ids: tuple[torch.Tensor, ...]) -> list[tuple[int, int, int]]:
    return list(zip(*(t.tolist() for t in ids)))


def test_count_by_hand() -> None:
    # label 0: 2 anchors x 1 positive x 3 negatives = 6; label 1: 3 anchors x 2 positives x 2 negatives = 12
    ids = AllTripletsMiner()._sample(None, labels=[0, 0, 1, 1, 1])
    assert len(ids[0]) == 18
    assert as_list(ids) == naive_triplets([0, 0, 1, 1, 1])
    assert as_list(ids)[:3] == [(0, 1, 2), (0, 1, 3), (0, 1, 4)]


@pytest.mark.parametrize(
    "labels",
    [
        [0, 0, 1, 1],
        [3, 1, 3, 2, 1, 2, 2],
        [5, 5, 5, 5],  # one label: no negatives
        [0, 1, 2, 3],  # singletons: no positives
        [9],
    ],
)
def test_matches_naive_reference(labels: list[int]) -> None:
    assert as_list(get_available_triplets_ids(labels)) == naive_triplets(labels)


def test_matches_naive_reference_on_random_batches() -> None:
    gen = torch.Generator().manual_seed(123)
    for _ in range(10):
        labels = torch.randint(
            0, 5, (int(torch.randint(2, 16, (1,), generator=gen)),), generator=gen
        ).tolist()
        ids = get_available_triplets_ids(torch.tensor(labels))
        assert as_list(ids) == naive_triplets(labels)
        counts = {lb: labels.count(lb) for lb in labels}
        assert len(ids[0]) == sum((counts[lb] - 1) * (len(labels) - counts[lb]) for lb in labels)


def test_masks() -> None:
    is_pos, is_neg = get_pos_neg_masks([0, 0, 1])
    assert is_pos.tolist() == [[False, True, False], [True, False, False], [False, False, False]]
    assert is_neg.tolist() == [[False, False, True], [False, False, True], [True, True, False]]
    with pytest.raises(ValueError, match="one-dimensional"):
        get_pos_neg_masks(torch.zeros(2, 2, dtype=torch.long))


def test_sample_gathers_features() -> None:
    features = torch.arange(10.0).reshape(5, 2)
    anchor, positive, negative = AllTripletsMiner().sample(features, torch.tensor([0, 0, 1, 1, 1]))
    assert anchor.shape == positive.shape == negative.shape == (18, 2)
    assert torch.equal(anchor[0], features[0]) and torch.equal(positive[0], features[1])
    assert torch.equal(negative[0], features[2])


def test_default_max_output_triplets_is_oml_default() -> None:
    assert AllTripletsMiner().max_output_triplets == sys.maxsize == 9223372036854775807


def test_max_output_triplets_truncation() -> None:
    labels = [0, 0, 1, 1, 1]
    everything = set(naive_triplets(labels))
    ids = AllTripletsMiner(max_output_triplets=5)._sample(None, labels=labels)
    mined = as_list(ids)
    assert len(mined) == 5 == len(set(mined))
    assert set(mined) <= everything
    assert mined == sorted(mined)
    # not more than available: all of them, untouched
    assert as_list(AllTripletsMiner(max_output_triplets=18)._sample(None, labels=labels)) == naive_triplets(
        labels
    )


def test_truncation_is_deterministic_and_uses_no_global_rng() -> None:
    labels = [0, 0, 1, 1, 1, 2, 2]
    first, second = (
        AllTripletsMiner(max_output_triplets=4, seed=7),
        AllTripletsMiner(max_output_triplets=4, seed=7),
    )
    state = torch.get_rng_state()
    draws_first = [as_list(first._sample(None, labels=labels)) for _ in range(3)]
    assert torch.equal(torch.get_rng_state(), state)
    draws_second = [as_list(second._sample(None, labels=labels)) for _ in range(3)]
    assert draws_first == draws_second
    assert draws_first[0] != draws_first[1]  # the generator advances between calls
    other = AllTripletsMiner(max_output_triplets=4, seed=8)
    assert as_list(other._sample(None, labels=labels)) != draws_first[0]
    given = AllTripletsMiner(max_output_triplets=4, generator=torch.Generator().manual_seed(7))
    assert as_list(given._sample(None, labels=labels)) == draws_first[0]
    # the default seed is 0
    assert as_list(AllTripletsMiner(max_output_triplets=4)._sample(None, labels=labels)) == as_list(
        AllTripletsMiner(max_output_triplets=4, seed=0)._sample(None, labels=labels)
    )


def test_miner_argument_errors() -> None:
    with pytest.raises(ValueError, match="max_output_triplets must be >= 1, got 0"):
        AllTripletsMiner(max_output_triplets=0)
    with pytest.raises(TypeError, match="max_output_triplets must be an int"):
        AllTripletsMiner(max_output_triplets=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="either generator or seed"):
        AllTripletsMiner(generator=torch.Generator(), seed=1)
