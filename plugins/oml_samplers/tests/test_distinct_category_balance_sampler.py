"""DistinctCategoryBalanceSampler: the manual's strategy and each corner case on hand-built label lists."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from oml_samplers import DistinctCategoryBalanceSampler

from oml_core.interfaces.samplers import IBatchSampler


def batch_labels(batch: list[int], labels: list[int], n_instances: int) -> list[int]:
    """The label of every run of ``n_instances`` indices of a batch (each run must hold one label)."""
    out = []
    for start in range(0, len(batch), n_instances):
        (label,) = {labels[i] for i in batch[start : start + n_instances]}
        out.append(label)
    return out


def epoch_labels(sampler: DistinctCategoryBalanceSampler, labels: list[int]) -> list[list[int]]:
    return [batch_labels(batch, labels, sampler.n_instances) for batch in sampler]


def test_distinct_labels_then_reset_when_all_categories_were_chosen() -> None:
    # 3 categories of 2 labels each; 1 category x 2 labels per batch: 3 batches use every label once,
    # then all the categories were chosen and the sampler starts again
    labels = [label for label in range(6) for _ in range(2)]
    label2category = {label: label // 2 for label in range(6)}
    sampler = DistinctCategoryBalanceSampler(
        labels, label2category, n_categories=1, n_labels=2, n_instances=2, epoch_size=7
    )
    assert isinstance(sampler, IBatchSampler)
    assert len(sampler) == 7 and sampler.batch_size == 4
    for _ in range(5):
        epoch = epoch_labels(sampler, labels)
        assert len(epoch) == 7
        for batch in epoch:  # a category's two labels
            assert sorted(batch) == [2 * (batch[0] // 2), 2 * (batch[0] // 2) + 1]
        assert sorted(label for batch in epoch[:3] for label in batch) == list(range(6))
        assert sorted(label for batch in epoch[3:6] for label in batch) == list(range(6))


def test_reset_when_fewer_than_n_categories_are_left() -> None:
    # 3 categories of 2 labels, 2 categories per batch: after one batch a single category is left, so
    # every batch starts from a reset state and uses 2 distinct categories with both their labels
    labels = [label for label in range(6) for _ in range(2)]
    label2category = {label: "abc"[label // 2] for label in range(6)}
    sampler = DistinctCategoryBalanceSampler(
        labels, label2category, n_categories=2, n_labels=2, n_instances=2, epoch_size=30
    )
    pairs = Counter()
    for batch in epoch_labels(sampler, labels):
        first, second = sorted(batch[:2]), sorted(batch[2:])
        assert first[1] == first[0] + 1 and first[0] % 2 == 0 and second[1] == second[0] + 1
        assert first[0] != second[0]
        pairs[frozenset({label2category[first[0]], label2category[second[0]]})] += 1
    assert len(pairs) == 3  # every pair of categories occurs: each batch is drawn afresh


def test_category_without_n_labels_unused_takes_them_all_and_fills_from_used() -> None:
    # one category with 5 labels, 3 per batch: batch 1 takes 3 unused labels; batch 2 takes the 2 unused
    # ones plus 1 of batch 1 (no label twice in a batch); then the category is used up and a reset follows
    labels = [label for label in range(5) for _ in range(2)]
    sampler = DistinctCategoryBalanceSampler(
        labels, dict.fromkeys(range(5), "only"), n_categories=1, n_labels=3, n_instances=2, epoch_size=4
    )
    fillers = set()
    for _ in range(20):
        epoch = epoch_labels(sampler, labels)
        for first, second in (epoch[0:2], epoch[2:4]):
            assert len(set(first)) == 3 and len(set(second)) == 3
            rest = set(range(5)) - set(first)
            assert rest <= set(second)  # all the unused labels
            (filler,) = set(second) - rest
            assert filler in first  # the missing one comes from the used labels
            fillers.add(filler)
    assert fillers == set(range(5))  # the filler is drawn at random among the used labels


def test_l_mod_n_labels_equal_1_drops_the_lone_label() -> None:
    # one category with 5 labels, 2 per batch: L % n_labels == 1, so after 2 batches the lone 5th label is
    # dropped and the 3rd batch starts afresh (it is not forced to take the lone label)
    labels = [label for label in range(5) for _ in range(2)]
    sampler = DistinctCategoryBalanceSampler(
        labels, dict.fromkeys(range(5), 0), n_categories=1, n_labels=2, n_instances=2, epoch_size=5
    )
    third_took_lone = Counter()
    for _ in range(40):
        epoch = epoch_labels(sampler, labels)
        for cycle in (epoch[0:2], epoch[2:4]):
            used = cycle[0] + cycle[1]
            assert len(set(used)) == 4  # two batches of 2 distinct, disjoint labels
        (lone,) = set(range(5)) - set(epoch[0] + epoch[1])
        third_took_lone[lone in epoch[2]] += 1
        assert len(set(epoch[4])) == 2
    assert third_took_lone[False] > 0 and third_took_lone[True] > 0


def test_a_category_left_with_one_label_is_no_longer_available() -> None:
    # categories a = {0, 1, 2} and b = {3, 4}, one category x 2 labels per batch: whichever goes first, a
    # keeps a lone label (dropped) and b is used up, so the first two batches always hold a and b once each
    labels = [label for label in range(5) for _ in range(3)]
    label2category = {0: "a", 1: "a", 2: "a", 3: "b", 4: "b"}
    sampler = DistinctCategoryBalanceSampler(
        labels, label2category, n_categories=1, n_labels=2, n_instances=2, epoch_size=4
    )
    for _ in range(20):
        epoch = epoch_labels(sampler, labels)
        for cycle in (epoch[0:2], epoch[2:4]):
            categories = [{label2category[label] for label in batch} for batch in cycle]
            assert sorted(category for (category,) in categories) == ["a", "b"]


def test_small_classes_are_sampled_with_repetition() -> None:
    labels = [0, 1, 1, 2, 2, 2, 2]  # label 0 has 1 item, label 1 has 2, label 2 has 4; n_instances = 3
    sampler = DistinctCategoryBalanceSampler(
        labels, {0: 0, 1: 0, 2: 0}, n_categories=1, n_labels=3, n_instances=3, epoch_size=3
    )
    for batch in sampler:
        by_label = {labels[batch[start]]: batch[start : start + 3] for start in (0, 3, 6)}
        assert by_label[0] == [0, 0, 0]
        assert sorted(set(by_label[1])) == [1, 2]  # both items, one of them twice
        assert len(set(by_label[2])) == 3 and set(by_label[2]) <= {3, 4, 5, 6}


@pytest.mark.parametrize("epoch_size", [1, 2, 9])
def test_len_is_epoch_size(epoch_size: int) -> None:
    labels = [label for label in range(4) for _ in range(2)]
    sampler = DistinctCategoryBalanceSampler(
        labels,
        {0: "x", 1: "x", 2: "y", 3: "y"},
        n_categories=2,
        n_labels=2,
        n_instances=2,
        epoch_size=epoch_size,
    )
    assert len(sampler) == epoch_size == len(list(sampler))


LABELS = [0, 0, 1, 1, 2, 2, 3, 3]
L2C = {0: "a", 1: "a", 2: "b", 3: "b"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"n_categories": 3},
            r"n_categories \(3\) must not exceed the number of categories in label2category \(2\)",
        ),
        ({"n_categories": 0}, r"n_categories \(the number of categories in a batch\) should be >= 1, got 0"),
        (
            {"n_labels": 1},
            r"n_labels \(the number of labels of each category in a batch\) should be > 1, got 1",
        ),
        ({"n_instances": 1}, r"n_instances \(the number of instances of each label\) should be > 1, got 1"),
        ({"epoch_size": 0}, r"epoch_size \(the number of batches in an epoch\) should be >= 1, got 0"),
        ({"epoch_size": 2.5}, r"epoch_size must be an int, got float 2.5"),
        (
            {"n_labels": 3},
            r"at least 3 unique labels \(n_labels\): the category 'a' has only 2, the category 'b'",
        ),
        ({"label2category": {0: "a", 1: "a", 2: "a", 3: "b"}}, r"the category 'b' has only 1$"),
        ({"seed": 1, "generator": torch.Generator()}, "either generator or seed"),
        ({"label2category": None}, r"label2category is None"),
        (
            {"label2category": {0: "a", True: "a", 2: "b", 3: "b"}},
            r"keys must be int labels, got the key True",
        ),
        (
            {"label2category": {0: "a", 1: "a", 2: "b", 3: ("b",)}},
            r"label2category\[3\] must be a str or int",
        ),
        (
            {"label2category": {0: "a", 2: "b", 3: "b"}},
            r"label2category has no category for the labels 1 found in labels",
        ),
        (
            {"label2category": {**L2C, 4: "b"}},
            r"label2category holds the labels 4, which are not in labels",
        ),
    ],
)
def test_argument_errors(kwargs: dict, message: str) -> None:
    args = {
        "label2category": L2C,
        "n_categories": 1,
        "n_labels": 2,
        "n_instances": 2,
        "epoch_size": 3,
        **kwargs,
    }
    with pytest.raises(ValueError, match=message):
        DistinctCategoryBalanceSampler(LABELS, **args)


def test_label_errors() -> None:
    with pytest.raises(ValueError, match=r"labels must be one-dimensional, got the shape \(2, 2\)"):
        DistinctCategoryBalanceSampler(
            [[0, 0], [1, 1]], {0: 0, 1: 0}, n_categories=1, n_labels=2, n_instances=2, epoch_size=1
        )
