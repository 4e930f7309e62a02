"""Invariants of the three samplers on 100 random label lists, checked against naive re-implementations.

Every batch is checked for its layout (``n_categories`` blocks of ``n_labels`` runs of ``n_instances``
indices), every run for its label and its instances (distinct when the label has enough of them, all of
them otherwise), and every epoch against the strategy each sampler promises.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from oml_samplers import BalanceSampler, CategoryBalanceSampler, DistinctCategoryBalanceSampler

N_TRIALS = 100


@dataclass
class Dataset:
    labels: list[int]
    label2category: dict[int, str | int]

    def members(self) -> dict[int, set[int]]:
        """label -> its dataset indices."""
        out: dict[int, set[int]] = {}
        for i, label in enumerate(self.labels):
            out.setdefault(label, set()).add(i)
        return out

    def category_labels(self) -> dict[str | int, set[int]]:
        """category -> its labels."""
        out: dict[str | int, set[int]] = {}
        for label, category in self.label2category.items():
            out.setdefault(category, set()).add(label)
        return out


def random_dataset(rng: np.random.Generator, min_labels_per_category: int) -> Dataset:
    """1-5 categories (str or int) of ``min_labels_per_category``-5 labels (random, possibly negative ints)
    with 1-5 items each, in shuffled order."""
    n_categories = int(rng.integers(1, 6))
    sizes = rng.integers(min_labels_per_category, 6, size=n_categories)
    label_ids = rng.choice(np.arange(-50, 1000), size=int(sizes.sum()), replace=False).tolist()
    names: list[str | int] = (
        [f"cat{c}" for c in range(n_categories)]
        if rng.random() < 0.5
        else [int(c) * 7 for c in range(n_categories)]
    )
    label2category = {}
    start = 0
    for name, size in zip(names, sizes):
        for label in label_ids[start : start + int(size)]:
            label2category[label] = name
        start += int(size)
    labels = [label for label in label_ids for _ in range(int(rng.integers(1, 6)))]
    rng.shuffle(labels)
    return Dataset(labels, label2category)


def split_batch(
    batch: list[int], data: Dataset, n_blocks: int, n_labels: int, n_instances: int
) -> list[list[int]]:
    """The labels of each block of a batch, checking the layout and every run of instances."""
    members = data.members()
    assert len(batch) == n_blocks * n_labels * n_instances
    assert all(type(i) is int and 0 <= i < len(data.labels) for i in batch)
    blocks = []
    for b in range(n_blocks):
        block_labels = []
        for r in range(n_labels):
            start = (b * n_labels + r) * n_instances
            run = batch[start : start + n_instances]
            (label,) = {data.labels[i] for i in run}
            if len(members[label]) >= n_instances:
                assert len(set(run)) == n_instances  # enough instances: no repetition
            else:
                assert set(run) == members[label]  # with repetition, every instance at least once
            block_labels.append(label)
        blocks.append(block_labels)
    return blocks


def category_of_block(block: list[int], data: Dataset) -> str | int:
    (category,) = {data.label2category[label] for label in block}
    return category


def check_balance_epoch(epoch: list[list[int]], data: Dataset, n_labels: int, n_instances: int) -> None:
    n_unique = len(set(data.labels))
    assert len(epoch) == n_unique // n_labels
    used = []
    for batch in epoch:
        (block,) = split_batch(batch, data, 1, n_labels, n_instances)
        used.extend(block)
    assert len(used) == len(set(used)) == (n_unique // n_labels) * n_labels  # no label twice in an epoch


def check_category_epoch(
    epoch: list[list[int]], data: Dataset, n_categories: int, n_labels: int, n_instances: int
) -> None:
    assert len(epoch) == math.ceil(len(set(data.labels)) / n_labels)
    category_labels = data.category_labels()
    for batch in epoch:
        blocks = split_batch(batch, data, n_categories, n_labels, n_instances)
        categories = [category_of_block(block, data) for block in blocks]
        assert len(set(categories)) == n_categories
        for category, block in zip(categories, blocks):
            if len(category_labels[category]) >= n_labels:
                assert len(set(block)) == n_labels
            else:
                assert set(block) == category_labels[category]  # with repetition, every label once


def check_distinct_epoch(
    epoch: list[list[int]], data: Dataset, n_categories: int, n_labels: int, n_instances: int, epoch_size: int
) -> Counter[str]:
    """Replay the manual's strategy; return how often each corner case (reset, fill, drop) occurred."""
    assert len(epoch) == epoch_size
    category_labels = data.category_labels()
    unused = {c: set(labels) for c, labels in category_labels.items()}
    events: Counter[str] = Counter()
    for batch in epoch:
        if sum(1 for labels in unused.values() if labels) < n_categories:
            unused = {c: set(labels) for c, labels in category_labels.items()}
            events["reset"] += 1
        blocks = split_batch(batch, data, n_categories, n_labels, n_instances)
        categories = [category_of_block(block, data) for block in blocks]
        assert len(set(categories)) == n_categories
        for category, block in zip(categories, blocks):
            available = unused[category]
            assert available, "a category without unused labels was chosen"
            assert len(set(block)) == n_labels  # never a label twice in a block
            if len(available) >= n_labels:
                assert set(block) <= available
            else:  # all the unused labels, the rest from the used ones
                assert available <= set(block)
                events["fill"] += 1
            available -= set(block)
            if len(available) == 1:  # a lone label is dropped until the next reset
                available.clear()
                events["drop"] += 1
    return events


def _params(rng: np.random.Generator, data: Dataset, resample: bool) -> tuple[int, int, int]:
    sizes = [len(labels) for labels in data.category_labels().values()]
    n_categories = int(rng.integers(1, len(sizes) + 1))
    n_labels = int(rng.integers(2, 6)) if resample else int(rng.integers(2, min(sizes) + 1))
    return n_categories, n_labels, int(rng.integers(2, 6))


def test_balance_sampler_on_random_labels() -> None:
    rng = np.random.default_rng(0)
    for trial in range(N_TRIALS):
        data = random_dataset(rng, min_labels_per_category=1)
        n_unique = len(set(data.labels))
        if n_unique < 2:
            continue
        n_labels, n_instances = int(rng.integers(2, n_unique + 1)), int(rng.integers(2, 6))
        sampler = BalanceSampler(data.labels, n_labels=n_labels, n_instances=n_instances, seed=trial)
        for _ in range(2):
            epoch = list(sampler)
            assert len(epoch) == len(sampler)
            check_balance_epoch(epoch, data, n_labels, n_instances)


@pytest.mark.parametrize("resample", [False, True])
def test_category_balance_sampler_on_random_labels(resample: bool) -> None:
    rng = np.random.default_rng(1 + resample)
    for trial in range(N_TRIALS):
        data = random_dataset(rng, min_labels_per_category=1 if resample else 2)
        n_categories, n_labels, n_instances = _params(rng, data, resample)
        sampler = CategoryBalanceSampler(
            data.labels,
            data.label2category,
            n_categories=n_categories,
            n_labels=n_labels,
            n_instances=n_instances,
            resample_labels=resample,
            weight_categories=bool(rng.random() < 0.5),
            seed=trial,
        )
        assert sampler.batch_size == n_categories * n_labels * n_instances
        for _ in range(2):
            epoch = list(sampler)
            assert len(epoch) == len(sampler)
            check_category_epoch(epoch, data, n_categories, n_labels, n_instances)


def test_distinct_category_balance_sampler_on_random_labels() -> None:
    rng = np.random.default_rng(3)
    events: Counter[str] = Counter()
    for trial in range(N_TRIALS):
        data = random_dataset(rng, min_labels_per_category=2)
        n_categories, n_labels, n_instances = _params(rng, data, resample=False)
        epoch_size = int(rng.integers(1, 12))
        sampler = DistinctCategoryBalanceSampler(
            data.labels,
            data.label2category,
            n_categories=n_categories,
            n_labels=n_labels,
            n_instances=n_instances,
            epoch_size=epoch_size,
            seed=trial,
        )
        for _ in range(2):
            epoch = list(sampler)
            assert len(epoch) == len(sampler) == epoch_size
            events += check_distinct_epoch(epoch, data, n_categories, n_labels, n_instances, epoch_size)
    assert min(events[key] for key in ("reset", "fill", "drop")) > 0, events  # every corner case occurred


def _fixed_dataset() -> Dataset:
    label2category: Mapping[int, str | int] = {label: f"c{label % 4}" for label in range(24)}
    return Dataset([label for label in range(24) for _ in range(5)], dict(label2category))


SAMPLERS = {
    "balance": lambda data, **kw: BalanceSampler(data.labels, n_labels=3, n_instances=2, **kw),
    "category_balance": lambda data, **kw: CategoryBalanceSampler(
        data.labels, data.label2category, n_categories=2, n_labels=2, n_instances=2, **kw
    ),
    "distinct_category_balance": lambda data, **kw: DistinctCategoryBalanceSampler(
        data.labels, data.label2category, n_categories=2, n_labels=2, n_instances=2, epoch_size=6, **kw
    ),
}


def epochs(sampler: object, n: int) -> list[list[list[int]]]:
    return [list(sampler) for _ in range(n)]  # type: ignore[call-overload]


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_seeded_determinism(name: str) -> None:
    data, make = _fixed_dataset(), SAMPLERS[name]
    first = epochs(make(data, seed=5), 3)
    assert epochs(make(data, seed=5), 3) == first  # same seed: same epochs
    assert first[0] != first[1] and first[1] != first[2] and first[0] != first[2]  # successive epochs differ
    assert epochs(make(data, seed=6), 1)[0] != first[0]  # another seed: another epoch
    assert epochs(make(data, generator=torch.Generator().manual_seed(5)), 3) == first
    assert epochs(make(data), 2) == epochs(make(data, seed=0), 2)  # the default seed is 0


@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_uses_no_global_rng(name: str) -> None:
    sampler = SAMPLERS[name](_fixed_dataset())
    state, np_state = torch.get_rng_state(), np.random.get_state()[1].copy()
    list(sampler)
    assert torch.equal(torch.get_rng_state(), state)
    assert np.array_equal(np.random.get_state()[1], np_state)
