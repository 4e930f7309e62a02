"""CategoryBalanceSampler: the manual's strategy and corner cases on hand-built label lists, and errors."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from oml_samplers import CategoryBalanceSampler

from oml_core.interfaces.samplers import IBatchSampler


def runs(batch: list[int], labels: list[int], n_instances: int) -> list[int]:
    """The label of every run of ``n_instances`` indices of a batch (each run must hold one label)."""
    out = []
    for start in range(0, len(batch), n_instances):
        (label,) = {labels[i] for i in batch[start : start + n_instances]}
        out.append(label)
    return out


def test_batch_layout_on_a_hand_built_dataset() -> None:
    # labels 0..5, 3 items each (indices 3*label .. 3*label+2); categories: a = {0, 1, 2}, b = {3, 4, 5}
    labels = [label for label in range(6) for _ in range(3)]
    label2category = {0: "a", 1: "a", 2: "a", 3: "b", 4: "b", 5: "b"}
    sampler = CategoryBalanceSampler(labels, label2category, n_categories=2, n_labels=2, n_instances=3)
    assert isinstance(sampler, IBatchSampler)
    assert sampler.batch_size == 12 and len(sampler) == 3  # ceil(6 / 2) = 3
    for batch in list(sampler) + list(sampler):
        assert len(batch) == 12
        block_a, block_b = runs(batch[:6], labels, 3), runs(batch[6:], labels, 3)
        blocks = sorted([block_a, block_b], key=lambda block: label2category[block[0]])
        assert {label2category[label] for label in blocks[0]} == {"a"}
        assert {label2category[label] for label in blocks[1]} == {"b"}
        assert len(set(blocks[0])) == 2 and len(set(blocks[1])) == 2  # n_labels distinct labels each
        for start in range(0, 12, 3):  # exactly 3 instances: each run is the label's 3 items
            run = batch[start : start + 3]
            assert sorted(run) == [3 * labels[run[0]] + k for k in range(3)]


@pytest.mark.parametrize(("n_unique", "n_labels", "expected"), [(6, 2, 3), (7, 2, 4), (5, 3, 2), (4, 4, 1)])
def test_epoch_length_is_ceil_of_l_over_n_labels(n_unique: int, n_labels: int, expected: int) -> None:
    labels = [label for label in range(n_unique) for _ in range(2)]
    sampler = CategoryBalanceSampler(
        labels, dict.fromkeys(range(n_unique), 0), n_categories=1, n_labels=n_labels, n_instances=2
    )
    assert len(sampler) == expected == len(list(sampler))


def test_resample_labels_samples_a_small_category_with_repetition() -> None:
    # category "one" has the single label 7, category "two" the labels 8 and 9; n_labels = 3
    labels = [7, 7, 8, 8, 9, 9]
    label2category = {7: "one", 8: "two", 9: "two"}
    sampler = CategoryBalanceSampler(
        labels, label2category, n_categories=2, n_labels=3, n_instances=2, resample_labels=True
    )
    assert len(sampler) == 1  # ceil(3 / 3)
    seen_twice = Counter()
    for _ in range(20):
        (batch,) = list(sampler)
        blocks = [runs(batch[:6], labels, 2), runs(batch[6:], labels, 2)]
        by_category = {label2category[block[0]]: block for block in blocks}
        assert by_category["one"] == [7, 7, 7]
        two = by_category["two"]
        assert set(two) == {8, 9} and len(two) == 3  # both labels, one of them twice
        seen_twice[Counter(two).most_common(1)[0][0]] += 1
    assert set(seen_twice) == {8, 9}  # the repeated label is drawn at random


def test_a_small_category_without_resample_labels_is_an_error() -> None:
    labels = [0, 0, 1, 1, 2, 2, 3, 3]
    label2category = {0: "shoes", 1: "shoes", 2: "hats", 3: 5}
    with pytest.raises(
        ValueError,
        match=r"^All the categories must have at least 2 unique labels \(n_labels\): the category 'hats' has "
        r"only 1, the category 5 has only 1; pass resample_labels=True",
    ):
        CategoryBalanceSampler(labels, label2category, n_categories=1, n_labels=2, n_instances=2)


def test_small_labels_are_sampled_with_repetition() -> None:
    labels = [0, 1, 1, 2, 2, 2, 2]  # label 0 has 1 item, label 1 has 2, label 2 has 4; n_instances = 3
    sampler = CategoryBalanceSampler(labels, {0: 0, 1: 0, 2: 0}, n_categories=1, n_labels=3, n_instances=3)
    for _ in range(10):
        (batch,) = list(sampler)  # L = 3, n_labels = 3: one batch
        by_label = {labels[batch[start]]: batch[start : start + 3] for start in (0, 3, 6)}
        assert by_label[0] == [0, 0, 0]
        assert sorted(set(by_label[1])) == [1, 2]  # both items, one of them twice
        assert len(set(by_label[2])) == 3 and set(by_label[2]) <= {3, 4, 5, 6}  # enough: no repetition


def _inclusion_probabilities(weights: list[float]) -> list[float]:
    """P(category i is among 2 drawn one after the other without replacement, each draw proportional to the
    remaining weights)."""
    total = sum(weights)
    return [
        w_i / total + sum(w_k / total * w_i / (total - w_k) for k, w_k in enumerate(weights) if k != i)
        for i, w_i in enumerate(weights)
    ]


@pytest.mark.parametrize("weight_categories", [True, False])
def test_category_frequencies(weight_categories: bool) -> None:
    # categories 0, 1, 2 with 6, 3 and 2 labels; 2 of the 3 categories per batch
    sizes = [6, 3, 2]
    label2category = {}
    for category, size in enumerate(sizes):
        for _ in range(size):
            label2category[len(label2category)] = category
    labels = [label for label in label2category for _ in range(2)]
    sampler = CategoryBalanceSampler(
        labels, label2category, n_categories=2, n_labels=2, n_instances=2, weight_categories=weight_categories
    )
    counts: Counter[int] = Counter()
    n_batches = 0
    for _ in range(1000):
        for batch in sampler:
            counts.update({label2category[labels[batch[0]]], label2category[labels[batch[4]]]})
            n_batches += 1
    expected = _inclusion_probabilities([float(s) for s in sizes] if weight_categories else [1.0, 1.0, 1.0])
    if not weight_categories:
        assert expected == pytest.approx([2 / 3] * 3)
    for category, p in enumerate(expected):
        assert counts[category] / n_batches == pytest.approx(p, abs=0.02)


def test_all_categories_when_n_categories_is_their_number() -> None:
    labels = [label for label in range(6) for _ in range(2)]
    label2category = {label: label % 3 for label in range(6)}
    sampler = CategoryBalanceSampler(labels, label2category, n_categories=3, n_labels=2, n_instances=2)
    for batch in sampler:
        blocks = [runs(batch[start : start + 4], labels, 2) for start in (0, 4, 8)]
        assert sorted(label2category[block[0]] for block in blocks) == [0, 1, 2]
        assert all(sorted(block) == [block[0] % 3, block[0] % 3 + 3] for block in blocks)


@pytest.mark.parametrize(
    "labels", [[3, 3, 5, 5], np.array([3, 3, 5, 5], dtype=np.int32), torch.tensor([3, 3, 5, 5])]
)
def test_label_containers_and_numpy_keys(labels: object) -> None:
    label2category = {np.int64(3): "x", np.int64(5): "x"}
    (batch,) = list(CategoryBalanceSampler(labels, label2category, n_categories=1, n_labels=2, n_instances=2))
    assert sorted(batch) == [0, 1, 2, 3] and all(type(i) is int for i in batch)


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
        ({"n_labels": 2.0}, r"n_labels must be an int, got float 2.0"),
        ({"n_categories": True}, r"n_categories must be an int, got bool True"),
        ({"resample_labels": 1}, r"resample_labels must be a bool, got int 1"),
        ({"weight_categories": "yes"}, r"weight_categories must be a bool, got str 'yes'"),
        ({"seed": 1, "generator": torch.Generator()}, "either generator or seed"),
        ({"label2category": None}, r"label2category is None: this sampler needs a mapping"),
        ({"label2category": [("a", 0)]}, r"label2category must be a mapping label -> category, got list"),
        (
            {"label2category": {"0": "a", 1: "a", 2: "b", 3: "b"}},
            r"label2category keys must be int labels, got the key '0'",
        ),
        (
            {"label2category": {0: "a", 1: "a", 2: "b", 3: float("nan")}},
            r"label2category\[3\] must be a str or int category, got nan",
        ),
        (
            {"label2category": {0: "a", 1: "a", 2: "b"}},
            r"label2category has no category for the labels 3 found in labels",
        ),
        (
            {"label2category": {**L2C, 9: "b", 11: "a"}},
            r"label2category holds the labels 9, 11, which are not in labels",
        ),
    ],
)
def test_argument_errors(kwargs: dict, message: str) -> None:
    args = {"label2category": L2C, "n_categories": 1, "n_labels": 2, "n_instances": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        CategoryBalanceSampler(LABELS, **args)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ([0.0, 0.0, 1.0, 1.0], "labels must be integers, got the dtype torch.float32"),
        ([], "labels must not be empty"),
    ],
)
def test_label_errors(labels: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CategoryBalanceSampler(labels, {0: 0, 1: 0}, n_categories=1, n_labels=2, n_instances=2)


def test_long_error_lists_are_cut_after_five() -> None:
    labels = [label for label in range(8) for _ in range(2)]
    with pytest.raises(ValueError, match=r"for the labels 0, 1, 2, 3, 4 and 3 more found in labels$"):
        CategoryBalanceSampler(labels, {}, n_categories=1, n_labels=2, n_instances=2)
    with pytest.raises(ValueError, match=r"the category 4 has only 1 and 3 more categories; pass resample"):
        CategoryBalanceSampler(
            labels, {label: label for label in range(8)}, n_categories=1, n_labels=2, n_instances=2
        )
