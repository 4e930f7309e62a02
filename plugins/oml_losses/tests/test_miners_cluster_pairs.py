"""HardClusterMiner and PairsMiner by hand and against naive python references."""

from __future__ import annotations

import math

import pytest
import torch
from oml_losses.miners import AllTripletsMiner, HardClusterMiner, HardTripletsMiner, PairsMiner

# labels 0, 1, 2 with 3 instances each, shuffled in the batch
CLUSTER_LABELS = [2, 0, 1, 0, 2, 1, 1, 0, 2]
CLUSTER_POINTS = {
    0: [(0.0, 0.0), (1.0, 0.0), (5.0, 0.0)],  # mean (2, 0); distances 2, 1, 3: farthest (5, 0)
    1: [(10.0, 0.0), (10.0, 1.0), (10.0, 8.0)],  # mean (10, 3); distances 3, 2, 5: farthest (10, 8)
    2: [(2.0, 10.0), (2.0, 11.0), (2.0, 15.0)],  # mean (2, 12); distances 2, 1, 3: farthest (2, 15)
}
# means: d(m0, m1) = sqrt(73), d(m0, m2) = 12, d(m1, m2) = sqrt(145): m0 -> m1, m1 -> m0, m2 -> m0


def cluster_features() -> torch.Tensor:
    remaining = {label: list(points) for label, points in CLUSTER_POINTS.items()}
    return torch.tensor([remaining[label].pop(0) for label in CLUSTER_LABELS])


def test_hard_cluster_by_hand() -> None:
    means, positives, negatives = HardClusterMiner().sample(cluster_features(), CLUSTER_LABELS)
    assert torch.equal(means, torch.tensor([[2.0, 0.0], [10.0, 3.0], [2.0, 12.0]]))
    assert torch.equal(positives, torch.tensor([[5.0, 0.0], [10.0, 8.0], [2.0, 15.0]]))
    assert torch.equal(negatives, torch.tensor([[10.0, 3.0], [2.0, 0.0], [2.0, 0.0]]))


def test_hard_cluster_ties_and_gradients() -> None:
    # label 0: items 0 (0, 0) and 2 (2, 0), both 1 from their mean; label 1: items 1 (0, 5), 3 (0, 7)
    features = torch.tensor([[0.0, 0.0], [0.0, 5.0], [2.0, 0.0], [0.0, 7.0]], requires_grad=True)
    means, positives, negatives = HardClusterMiner().sample(features, torch.tensor([0, 1, 0, 1]))
    assert torch.equal(positives, features[[0, 1]].detach())
    assert torch.equal(negatives, means[[1, 0]])
    (means.sum() + positives.sum() + negatives.sum()).backward()
    # every item gives 1/2 to its mean and to the other label's mean as a negative; items 0, 1 are positives
    assert torch.equal(features.grad, torch.tensor([[2.0, 2.0], [2.0, 2.0], [1.0, 1.0], [1.0, 1.0]]))


def naive_cluster(features: list[list[float]], labels: list[int]) -> tuple[list, list, list]:
    """Python loops: means, farthest own item (first on ties), closest other mean (first on ties)."""
    unique = sorted(set(labels))
    members = {lb: [i for i, x in enumerate(labels) if x == lb] for lb in unique}
    means = [
        [sum(features[i][d] for i in members[lb]) / len(members[lb]) for d in range(len(features[0]))]
        for lb in unique
    ]
    positives, negatives = [], []
    for k, lb in enumerate(unique):
        best = max(members[lb], key=lambda i: (math.dist(features[i], means[k]), -i))
        positives.append(features[best])
        others = [j for j in range(len(unique)) if j != k]
        negatives.append(means[min(others, key=lambda j: (math.dist(means[k], means[j]), j))])
    return means, positives, negatives


def test_hard_cluster_against_naive_reference() -> None:
    gen = torch.Generator().manual_seed(0)
    for n_labels, n_instances in [(2, 2), (3, 4), (5, 3)]:
        labels = torch.arange(n_labels).repeat_interleave(n_instances)
        labels = labels[torch.randperm(len(labels), generator=gen)] * 7  # not 0..n-1
        features = torch.randn(len(labels), 4, generator=gen, dtype=torch.float64)
        mined = HardClusterMiner().sample(features, labels)
        for got, expected in zip(mined, naive_cluster(features.tolist(), labels.tolist())):
            assert torch.allclose(got, torch.tensor(expected, dtype=torch.float64))


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (
            [0, 0, 1, 1, 1],
            r"labels: expected the same number of samples for each label, got the counts \[2, 3\]",
        ),
        ([4, 4, 4], "labels: expected at least 2 labels in the batch, got 1"),
        ([0, 1, 2], "labels: expected more than one sample for each label, got 1"),
    ],
)
def test_hard_cluster_bad_batches(labels: list[int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        HardClusterMiner().sample(torch.zeros(len(labels), 2), labels)


def test_hard_cluster_bad_shapes() -> None:
    with pytest.raises(
        ValueError, match=r"labels must be one-dimensional with one label per feature row \(4\)"
    ):
        HardClusterMiner().sample(torch.zeros(4, 2), [0, 0, 1])


# The hard triplets (0, 1, 2), (1, 0, 2), (2, 3, 0), (3, 2, 0) of the 1-D points 1, 0, 2, 3
PAIR_FEATURES = torch.tensor([[1.0], [0.0], [2.0], [3.0]])


def test_pairs_from_hard_triplets_by_hand() -> None:
    ids1, ids2, is_negative = PairsMiner().sample(PAIR_FEATURES, [0, 0, 1, 1])
    # positives (0, 1) and (2, 3), each twice; negatives (0, 2), (1, 2), (0, 2), (0, 3) -> 3 distinct
    assert ids1.tolist() == [0, 2, 0, 0, 1]
    assert ids2.tolist() == [1, 3, 2, 3, 2]
    assert is_negative.tolist() == [False, False, True, True, True]
    assert ids1.dtype == ids2.dtype == torch.int64 and is_negative.dtype == torch.bool


def test_pairs_from_all_triplets_by_hand() -> None:
    # all triplets of [0, 0, 1]: (0, 1, 2), (1, 0, 2)
    ids1, ids2, is_negative = PairsMiner(hard_mining=False).sample(torch.zeros(3, 2), torch.tensor([0, 0, 1]))
    assert list(zip(ids1.tolist(), ids2.tolist(), is_negative.tolist())) == [
        (0, 1, False),
        (0, 2, True),
        (1, 2, True),
    ]


def naive_pairs(triplets: list[tuple[int, int, int]]) -> list[tuple[int, int, bool]]:
    positives = sorted({(min(a, p), max(a, p)) for a, p, _ in triplets})
    negatives = sorted({(min(a, n), max(a, n)) for a, _, n in triplets})
    return [(i, j, False) for i, j in positives] + [(i, j, True) for i, j in negatives]


@pytest.mark.parametrize("hard_mining", [True, False])
def test_pairs_against_naive_reference(hard_mining: bool) -> None:
    gen = torch.Generator().manual_seed(1)
    source = HardTripletsMiner() if hard_mining else AllTripletsMiner()
    for _ in range(10):
        labels = torch.randint(0, 3, (9,), generator=gen).tolist()
        features = torch.randn(9, 3, generator=gen)
        triplets = list(zip(*(t.tolist() for t in source._sample(features, labels))))
        mined = PairsMiner(hard_mining).sample(features, labels)
        assert list(zip(*(t.tolist() for t in mined))) == naive_pairs(triplets)


def test_pairs_of_a_batch_without_triplets_are_empty() -> None:
    ids1, ids2, is_negative = PairsMiner().sample(torch.zeros(3, 2), [0, 1, 2])
    assert len(ids1) == len(ids2) == len(is_negative) == 0


def test_pairs_bad_input() -> None:
    with pytest.raises(TypeError, match="hard_mining must be a bool, got str"):
        PairsMiner("yes")  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match=r"labels must be one-dimensional with one label per feature row \(3\)"
    ):
        PairsMiner(hard_mining=False).sample(torch.zeros(3, 2), [0, 0])
