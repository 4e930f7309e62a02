"""HardTripletsMiner, NHardTripletsMiner and their helpers against hand examples and a naive python reference."""

from __future__ import annotations

import itertools

import pytest
import torch
from oml_losses.miners import AllTripletsMiner, HardTripletsMiner, NHardTripletsMiner
from oml_losses.miners.hardest import hardness_window_mask
from oml_losses.miners.inbatch_nhard_tri import parse_hardness_range
from oml_losses.miners.triplet_masks import get_pos_neg_masks, triplets_from_masks

Triplets = list[tuple[int, int, int]]

# 1-D points 1, 0 (label 0) and 2, 3 (label 1): d(0, 2) = 1 < d(0, 3) = 2, d(1, 2) = 2 < d(1, 3) = 3,
# d(2, 0) = 1 < d(2, 1) = 2, d(3, 0) = 2 < d(3, 1) = 3; one positive each
ISSUE_FEATURES = torch.tensor([[1.0, 0.0], [0.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
ISSUE_LABELS = [0, 0, 1, 1]


def as_list(ids: tuple[torch.Tensor, ...]) -> Triplets:
    return list(zip(*(t.tolist() for t in ids)))


def naive_nhard(
    features: list[list[int]], labels: list[int], pos: tuple[int, int], neg: tuple[int, int]
) -> Triplets:
    """Python loops: rank by squared distance (exact on integers), ties by index; 1-based inclusive windows."""

    def sq_dist(i: int, j: int) -> int:
        return sum((x - y) ** 2 for x, y in zip(features[i], features[j]))

    triplets = []
    for a in range(len(labels)):
        positives = [p for p in range(len(labels)) if p != a and labels[p] == labels[a]]
        negatives = [n for n in range(len(labels)) if labels[n] != labels[a]]
        positives.sort(key=lambda p: (-sq_dist(a, p), p))
        negatives.sort(key=lambda n: (sq_dist(a, n), n))
        chosen_p, chosen_n = positives[pos[0] - 1 : pos[1]], negatives[neg[0] - 1 : neg[1]]
        triplets += [(a, p, n) for p, n in itertools.product(sorted(chosen_p), sorted(chosen_n))]
    return triplets


def random_batch(gen: torch.Generator) -> tuple[torch.Tensor, list[int]]:
    """Small integer features (many tied distances) and random labels."""
    size = int(torch.randint(2, 14, (1,), generator=gen))
    labels = torch.randint(0, 4, (size,), generator=gen).tolist()
    features = torch.randint(0, 4, (size, 3), generator=gen).double()
    return features, labels


def assert_consistent(triplets: Triplets, labels: list[int]) -> None:
    assert len(set(triplets)) == len(triplets)
    for a, p, n in triplets:
        assert len({a, p, n}) == 3
        assert labels[a] == labels[p] != labels[n]


def test_hard_issue_example() -> None:
    ids = HardTripletsMiner()._sample(ISSUE_FEATURES, ISSUE_LABELS)
    assert as_list(ids) == [(0, 1, 2), (1, 0, 2), (2, 3, 0), (3, 2, 0)]
    assert all(t.dtype == torch.int64 for t in ids)
    anchor, positive, negative = HardTripletsMiner().sample(ISSUE_FEATURES, torch.tensor(ISSUE_LABELS))
    assert torch.equal(anchor, ISSUE_FEATURES)
    assert torch.equal(positive, ISSUE_FEATURES[[1, 0, 3, 2]])
    assert torch.equal(negative, ISSUE_FEATURES[[2, 2, 0, 0]])


def test_hard_picks_farthest_positive_and_closest_negative_by_hand() -> None:
    # label 0 at 0, 1, 5; label 1 at 3, 9
    features = torch.tensor([[0.0], [1.0], [5.0], [3.0], [9.0]])
    mined = as_list(HardTripletsMiner()._sample(features, [0, 0, 0, 1, 1]))
    assert mined == [(0, 2, 3), (1, 2, 3), (2, 0, 3), (3, 4, 1), (4, 3, 2)]


def test_hard_ties_go_to_the_smallest_index() -> None:
    # anchor 0 at the origin: positives 1 and 2 both 1 away, negatives 3 and 4 both 2 away
    features = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 2.0]])
    mined = as_list(HardTripletsMiner()._sample(features, [0, 0, 0, 1, 1]))
    assert mined[0] == (0, 1, 3)


def test_anchors_without_positive_or_negative_give_nothing() -> None:
    features = torch.tensor([[0.0], [1.0], [2.0], [4.0]])
    # labels 1 and 2 are alone: no positive for the items 2 and 3, which are still negatives
    assert as_list(HardTripletsMiner()._sample(features, [0, 0, 1, 2])) == [(0, 1, 2), (1, 0, 2)]
    # one label: no negatives at all
    assert as_list(NHardTripletsMiner(2, 2)._sample(features, [7, 7, 7, 7])) == []


def test_hard_and_nhard_against_naive_reference() -> None:
    gen = torch.Generator().manual_seed(0)
    windows = [((1, 1), (1, 1)), ((1, 2), (1, 3)), ((2, 3), (1, 1)), ((1, 1), (2, 4)), ((3, 3), (2, 2))]
    for _ in range(15):
        features, labels = random_batch(gen)
        int_features = features.long().tolist()
        hard = as_list(HardTripletsMiner()._sample(features, labels))
        assert hard == naive_nhard(int_features, labels, (1, 1), (1, 1))
        assert_consistent(hard, labels)
        for pos, neg in windows:
            mined = as_list(NHardTripletsMiner(pos, neg)._sample(features, labels))
            assert mined == naive_nhard(int_features, labels, pos, neg)
            assert_consistent(mined, labels)


def test_int_arguments_mean_the_first_n() -> None:
    gen = torch.Generator().manual_seed(1)
    features, labels = torch.randn(12, 4, generator=gen), [0, 1, 2] * 4
    assert as_list(NHardTripletsMiner(2, 3)._sample(features, labels)) == as_list(
        NHardTripletsMiner((1, 2), [1, 3])._sample(features, labels)
    )
    assert as_list(NHardTripletsMiner(2, 3)._sample(features, labels)) == naive_nhard_float(
        features, labels, (1, 2), (1, 3)
    )


def naive_nhard_float(
    features: torch.Tensor, labels: list[int], pos: tuple[int, int], neg: tuple[int, int]
) -> Triplets:
    """The naive reference on random float features (no ties): squared distances in float64 python."""
    rows = features.double().tolist()
    dist = [[sum((x - y) ** 2 for x, y in zip(r1, r2)) for r2 in rows] for r1 in rows]
    triplets = []
    for a in range(len(labels)):
        positives = sorted(
            (p for p in range(len(labels)) if p != a and labels[p] == labels[a]), key=lambda p: -dist[a][p]
        )
        negatives = sorted(
            (n for n in range(len(labels)) if labels[n] != labels[a]), key=lambda n: dist[a][n]
        )
        chosen = itertools.product(
            sorted(positives[pos[0] - 1 : pos[1]]), sorted(negatives[neg[0] - 1 : neg[1]])
        )
        triplets += [(a, p, n) for p, n in chosen]
    return triplets


def test_nhard_at_one_one_equals_hard_on_random_data() -> None:
    gen = torch.Generator().manual_seed(2)
    for _ in range(10):
        labels = torch.randint(0, 3, (10,), generator=gen).tolist()
        features = torch.randn(10, 5, generator=gen)
        assert as_list(NHardTripletsMiner()._sample(features, labels)) == as_list(
            HardTripletsMiner()._sample(features, labels)
        )


def test_nhard_at_large_values_equals_all() -> None:
    gen = torch.Generator().manual_seed(3)
    for _ in range(10):
        labels = torch.randint(0, 4, (11,), generator=gen).tolist()
        features = torch.randn(11, 3, generator=gen)
        mined = as_list(NHardTripletsMiner(11, (1, 11))._sample(features, labels))
        assert mined == as_list(AllTripletsMiner()._sample(features, labels))
        counts = {lb: labels.count(lb) for lb in labels}
        assert len(mined) == sum(2 * (c * (c - 1) // 2) * (len(labels) - c) for c in counts.values())


def test_nhard_all_count_by_hand() -> None:
    # labels counts 3, 2, 2 in a batch of 7: 2*C(3,2)*4 + 2*C(2,2)*5 + 2*C(2,2)*5 = 24 + 10 + 10 = 44
    features = torch.randn(7, 2, generator=torch.Generator().manual_seed(4))
    assert len(NHardTripletsMiner(100, 100)._sample(features, [0, 1, 0, 2, 1, 0, 2])[0]) == 44


def test_window_beyond_the_available_gives_nothing() -> None:
    # every anchor has one positive: the 2nd hardest does not exist
    assert as_list(NHardTripletsMiner((2, 3), 1)._sample(ISSUE_FEATURES, ISSUE_LABELS)) == []


def test_sample_gathers_and_keeps_gradients() -> None:
    features = ISSUE_FEATURES.clone().requires_grad_(True)
    anchor, positive, negative = NHardTripletsMiner(1, 2).sample(features, ISSUE_LABELS)
    assert anchor.shape == positive.shape == negative.shape == (8, 2)
    (anchor.sum() + positive.sum() + negative.sum()).backward()
    assert features.grad is not None and torch.equal(features.grad[:, 0], torch.full((4,), 6.0))


def test_parse_hardness_range() -> None:
    assert parse_hardness_range(3, "n") == slice(0, 3)
    assert parse_hardness_range((2, 5), "n") == slice(1, 5)
    assert parse_hardness_range([4, 4], "n") == slice(3, 4)
    miner = NHardTripletsMiner(n_positive=(2, 5), n_negative=3)
    assert (miner.positive_slice, miner.negative_slice) == (slice(1, 5), slice(0, 3))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"n_positive": 0}, ValueError, "n_positive must be >= 1, got 0"),
        ({"n_negative": -2}, ValueError, "n_negative must be >= 1, got -2"),
        ({"n_positive": (0, 3)}, ValueError, r"n_positive must be a range \(min, max\) with 1 <= min <= max"),
        ({"n_negative": [3, 2]}, ValueError, r"n_negative must be a range \(min, max\) with 1 <= min <= max"),
        ({"n_positive": (1, 2, 3)}, TypeError, "n_positive must be an int or a"),
        ({"n_negative": 1.5}, TypeError, "n_negative must be an int or a"),
        ({"n_positive": True}, TypeError, "n_positive must be an int or a"),
        ({"n_negative": (1, 2.0)}, TypeError, "n_negative must be an int or a"),
    ],
)
def test_nhard_bad_arguments(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        NHardTripletsMiner(**kwargs)


@pytest.mark.parametrize("miner", [HardTripletsMiner(), NHardTripletsMiner(2, 2)])
def test_bad_batches(miner: HardTripletsMiner | NHardTripletsMiner) -> None:
    with pytest.raises(ValueError, match=r"features must have the shape \[batch_size, feature_size\]"):
        miner._sample(torch.zeros(4), [0, 0, 1, 1])
    with pytest.raises(
        ValueError, match=r"labels must be one-dimensional with one label per feature row \(4\)"
    ):
        miner._sample(torch.zeros(4, 2), [0, 0, 1])
    with pytest.raises(TypeError, match="labels must be integers, got torch.float32"):
        miner._sample(torch.zeros(4, 2), torch.tensor([0.0, 0.0, 1.0, 1.0]))
    with pytest.raises(TypeError, match="features must be a torch.Tensor, got list"):
        miner._sample([[0.0], [1.0]], [0, 1])  # type: ignore[arg-type]


def test_empty_batch_gives_no_triplets() -> None:
    assert as_list(HardTripletsMiner()._sample(torch.zeros(0, 3), [])) == []


def test_hardness_window_mask_by_hand() -> None:
    distmat = torch.tensor([[0.0, 3.0, 1.0, 3.0, 2.0]])
    candidates = torch.tensor([[False, True, True, True, False]])
    # farthest first: 1 (3, the smaller index of the tie), 3 (3), 2 (1)
    far = hardness_window_mask(distmat, candidates, slice(1, 3), hardest_is_farthest=True)
    assert far.tolist() == [[False, False, True, True, False]]
    near = hardness_window_mask(distmat, candidates, slice(0, 2), hardest_is_farthest=False)
    assert near.tolist() == [[False, True, True, False, False]]


def test_triplets_from_masks_and_rectangular_masks() -> None:
    is_pos, is_neg = get_pos_neg_masks([0, 1, 0, 1, 0], n_anchors=2)
    assert is_pos.tolist() == [[False, False, True, False, True], [False, False, False, True, False]]
    assert is_neg.tolist() == [[False, True, False, True, False], [True, False, True, False, True]]
    assert as_list(triplets_from_masks(is_pos, is_neg)) == [
        (0, 2, 1),
        (0, 2, 3),
        (0, 4, 1),
        (0, 4, 3),
        (1, 3, 0),
        (1, 3, 2),
        (1, 3, 4),
    ]
