"""BalanceSampler: the manual's strategy, corner cases, determinism and errors."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from oml_samplers import BalanceSampler

from oml_core.interfaces.samplers import IBatchSampler


def epochs(sampler: BalanceSampler, n: int) -> list[list[list[int]]]:
    return [list(sampler) for _ in range(n)]


def test_balanced_epoch_all_labels_once() -> None:
    labels = [lb for lb in range(10) for _ in range(4)]  # 10 labels x 4 instances, indices 4*lb .. 4*lb+3
    sampler = BalanceSampler(labels, n_labels=2, n_instances=3)
    assert isinstance(sampler, IBatchSampler)
    assert len(sampler) == 5 and sampler.batch_size == 6
    for epoch in epochs(sampler, 3):
        assert len(epoch) == len(sampler)
        seen: list[int] = []
        for batch in epoch:
            assert len(batch) == 6
            counts = Counter(labels[i] for i in batch)
            assert len(counts) == 2 and set(counts.values()) == {3}
            assert len(set(batch)) == 6  # 4 >= 3 instances: no repetition
            first_label = labels[batch[0]]
            assert all(labels[i] == first_label for i in batch[:3])  # a label's instances are contiguous
            seen.extend(counts)
        assert sorted(seen) == list(range(10))  # every label exactly once per epoch


def test_drops_the_incomplete_last_batch() -> None:
    labels = [lb for lb in range(5) for _ in range(2)]  # L = 5, n_labels = 2 -> 2 batches, 1 label left out
    sampler = BalanceSampler(labels, n_labels=2, n_instances=2)
    assert len(sampler) == 2
    left_out = set()
    for epoch in epochs(sampler, 20):
        assert len(epoch) == 2
        used = [labels[i] for batch in epoch for i in batch]
        assert len(used) == 8 and len(set(used)) == 4
        left_out |= set(range(5)) - set(used)
    assert len(left_out) > 1  # the dropped labels change from epoch to epoch


def test_repetition_only_for_small_labels() -> None:
    # label 0 has 1 instance, label 2 has 2, label 1 has 5; a small label gives every instance at least once
    labels = [0, 1, 1, 1, 1, 1, 2, 2]
    sampler = BalanceSampler(labels, n_labels=3, n_instances=4)
    for epoch in epochs(sampler, 5):
        (batch,) = epoch
        by_label: dict[int, list[int]] = {}
        for i in batch:
            by_label.setdefault(labels[i], []).append(i)
        assert by_label[0] == [0, 0, 0, 0]
        assert len(by_label[2]) == 4 and set(by_label[2]) == {6, 7}
        assert len(by_label[1]) == 4 and len(set(by_label[1])) == 4  # enough instances: no repetition
        assert set(by_label[1]) <= {1, 2, 3, 4, 5}


def test_exactly_n_instances_is_a_permutation() -> None:
    labels = [0, 0, 1, 1]
    for epoch in epochs(BalanceSampler(labels, n_labels=2, n_instances=2), 5):
        assert sorted(epoch[0]) == [0, 1, 2, 3]


def test_same_seed_same_epochs_and_epochs_differ() -> None:
    labels = np.repeat(np.arange(20), 5)
    first = epochs(BalanceSampler(labels, n_labels=4, n_instances=3, seed=11), 3)
    second = epochs(BalanceSampler(labels, n_labels=4, n_instances=3, seed=11), 3)
    assert first == second
    assert first[0] != first[1] != first[2]
    assert epochs(BalanceSampler(labels, n_labels=4, n_instances=3, seed=12), 1)[0] != first[0]
    given = BalanceSampler(labels, n_labels=4, n_instances=3, generator=torch.Generator().manual_seed(11))
    assert epochs(given, 3) == first
    default = epochs(BalanceSampler(labels, n_labels=4, n_instances=3), 2)
    assert default == epochs(BalanceSampler(labels, n_labels=4, n_instances=3, seed=0), 2)


def test_uses_no_global_rng() -> None:
    sampler = BalanceSampler([0, 0, 1, 1, 2, 2], n_labels=2, n_instances=2)
    state = torch.get_rng_state()
    np_state = np.random.get_state()[1].copy()
    list(sampler)
    assert torch.equal(torch.get_rng_state(), state)
    assert np.array_equal(np.random.get_state()[1], np_state)


def test_len_is_the_number_of_yielded_batches() -> None:
    for n_unique, n_labels in [(2, 2), (7, 3), (9, 2), (12, 4)]:
        labels = [lb for lb in range(n_unique) for _ in range(3)]
        sampler = BalanceSampler(labels, n_labels=n_labels, n_instances=2)
        assert len(sampler) == n_unique // n_labels == len(list(sampler))


@pytest.mark.parametrize(
    "labels", [[3, 3, 5, 5], np.array([3, 3, 5, 5], dtype=np.int32), torch.tensor([3, 3, 5, 5])]
)
def test_label_containers(labels: object) -> None:
    (batch,) = list(BalanceSampler(labels, n_labels=2, n_instances=2))
    assert sorted(batch) == [0, 1, 2, 3] and all(type(i) is int for i in batch)


def test_works_as_a_dataloader_batch_sampler() -> None:
    labels = [lb for lb in range(4) for _ in range(3)]
    dataset = torch.utils.data.TensorDataset(torch.arange(12), torch.tensor(labels))
    loader = torch.utils.data.DataLoader(
        dataset, batch_sampler=BalanceSampler(labels, n_labels=2, n_instances=2)
    )
    batches = list(loader)
    assert len(batches) == len(loader) == 2
    for _, batch_labels in batches:
        assert sorted(Counter(batch_labels.tolist()).values()) == [2, 2]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"n_labels": 1, "n_instances": 2},
            r"n_labels \(the number of labels in a batch\) should be > 1, got 1",
        ),
        (
            {"n_labels": 2, "n_instances": 1},
            r"n_instances \(the number of instances .*\) should be > 1, got 1",
        ),
        (
            {"n_labels": 4, "n_instances": 2},
            r"n_labels \(4\) must not exceed the number of unique labels .*\(3\)",
        ),
        ({"n_labels": 2.0, "n_instances": 2}, r"n_labels must be an int, got float"),
        ({"n_labels": True, "n_instances": 2}, r"n_labels must be an int, got bool True"),
        (
            {"n_labels": 2, "n_instances": 2, "seed": 1, "generator": torch.Generator()},
            "either generator or seed",
        ),
    ],
)
def test_argument_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BalanceSampler([0, 0, 1, 1, 2, 2], **kwargs)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ([[0, 1], [1, 0]], r"labels must be one-dimensional, got the shape \(2, 2\)"),
        ([0.0, 0.5, 1.0, 1.0], "labels must be integers, got the dtype torch.float32"),
        ([True, False, True, False], "labels must be integers, got the dtype torch.bool"),
        (["a", "a", "b", "b"], "labels must be a 1-D sequence of integers"),
        ([], "labels must not be empty"),
    ],
)
def test_label_errors(labels: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BalanceSampler(labels, n_labels=2, n_instances=2)
