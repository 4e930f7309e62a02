"""TripletMinerWithMemory, MinerWithBank and their memory bank, by hand and against naive references."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest
import torch
from oml_losses.miners import AllTripletsMiner, MinerWithBank, NHardTripletsMiner, TripletMinerWithMemory
from oml_losses.miners.memory_bank import FeatureBank
from oml_losses.miners.positive_pairs import sample_positive_pairs

N_LABELS, N_INSTANCES, SHIFT = 3, 3, 20


def n_original(n_labels: int, n_instances: int) -> int:
    return n_labels * (n_labels - 1) * (n_instances - 1) * n_instances**2


def one_hot_batch(labels: list[int]) -> torch.Tensor:
    """Features ``e_(SHIFT + label)``: equal labels are equal argmaxes, apart from the placeholders' coordinates."""
    return torch.nn.functional.one_hot(torch.tensor(labels) + SHIFT, num_classes=SHIFT + 40).float()


def batch_labels(first_label: int) -> list[int]:
    return [first_label + i % N_LABELS for i in range(N_LABELS * N_INSTANCES)]


def assert_label_consistent(anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> None:
    assert len(anchor) == len(positive) == len(negative)
    assert torch.equal(anchor.argmax(dim=1), positive.argmax(dim=1))
    assert not bool((anchor.argmax(dim=1) == negative.argmax(dim=1)).any())


@pytest.mark.parametrize(("bank_size_in_batches", "tri_expand_k"), [(2, 3), (3, 4), (1, 2), (2, 1)])
def test_memory_count_formula_in_the_first_epoch(bank_size_in_batches: int, tri_expand_k: int) -> None:
    miner = TripletMinerWithMemory(bank_size_in_batches, tri_expand_k, seed=0)
    expected_original = n_original(N_LABELS, N_INSTANCES)  # 3 * 2 * 2 * 9 = 108
    assert expected_original == 108
    # the first epoch: every batch brings new labels
    for first_label in range(0, 4 * N_LABELS, N_LABELS):
        labels = batch_labels(first_label)
        features = one_hot_batch(labels)
        anchor, positive, negative, is_original = miner.sample(features, torch.tensor(labels))
        assert len(anchor) == expected_original * tri_expand_k
        assert is_original.dtype == torch.bool and int(is_original.sum()) == expected_original
        assert bool(is_original[:expected_original].all())
        assert_label_consistent(anchor, positive, negative)
        # the original triplets are AllTripletsMiner's, in its order
        for got, expected in zip((anchor, positive, negative), AllTripletsMiner().sample(features, labels)):
            assert torch.equal(got[:expected_original], expected)


def test_memory_later_epochs_drop_colliding_triplets_only() -> None:
    miner = TripletMinerWithMemory(bank_size_in_batches=2, tri_expand_k=5, seed=1)
    total, dropped_somewhere = n_original(N_LABELS, N_INSTANCES) * 5, False
    for _ in range(3):  # the same labels again and again: bank and batch share labels
        labels = batch_labels(0)
        anchor, positive, negative, is_original = miner.sample(one_hot_batch(labels), labels)
        assert int(is_original.sum()) == n_original(N_LABELS, N_INSTANCES)
        assert len(anchor) <= total
        dropped_somewhere |= len(anchor) < total
        assert_label_consistent(anchor, positive, negative)
    assert dropped_somewhere


def test_memory_bank_holds_detached_batches_and_gradients_reach_the_batch() -> None:
    miner = TripletMinerWithMemory(bank_size_in_batches=2, tri_expand_k=3, seed=0)
    assert miner.bank.labels is None
    first = one_hot_batch(batch_labels(0)).requires_grad_(True)
    anchor, positive, negative, _ = miner.sample(first, batch_labels(0))
    assert miner.bank.labels is not None and miner.bank.features is not None
    # placeholders -1, -1, -2, -2, ... then the first batch in the first slot
    assert miner.bank.labels[:9].tolist() == batch_labels(0)
    assert miner.bank.labels[9:].tolist() == [-(i // 2) - 1 for i in range(9, 18)]
    placeholders = torch.zeros(9, first.shape[1])
    placeholders[range(9), [(i // 2) % 9 + 1 for i in range(9, 18)]] = 1.0  # coordinates 1 .. batch size
    assert torch.equal(miner.bank.features[9:], placeholders)
    assert not miner.bank.features.requires_grad
    assert torch.equal(miner.bank.features[:9], first.detach())
    (anchor.sum() + positive.sum() + negative.sum()).backward()
    assert first.grad is not None and bool((first.grad.sum(dim=1) > 0).all())
    miner.sample(one_hot_batch(batch_labels(3)), batch_labels(3))
    miner.sample(one_hot_batch(batch_labels(6)), batch_labels(6))  # overwrites the first batch
    assert miner.bank.labels.tolist() == batch_labels(6) + batch_labels(3)


def test_memory_tri_expand_k_one_is_all_triplets() -> None:
    features = torch.randn(6, 3, generator=torch.Generator().manual_seed(0))
    labels = [0, 1, 2, 0, 1, 2]
    anchor, positive, negative, is_original = TripletMinerWithMemory(1, 1).sample(features, labels)
    assert bool(is_original.all())
    for got, expected in zip((anchor, positive, negative), AllTripletsMiner().sample(features, labels)):
        assert torch.equal(got, expected)


def test_memory_is_deterministic_with_a_seed() -> None:
    def run(miner: TripletMinerWithMemory) -> list[torch.Tensor]:
        outputs = []
        for first_label in (0, 3, 0, 3):
            labels = batch_labels(first_label)
            outputs += miner.sample(one_hot_batch(labels), labels)
        return outputs

    state = torch.get_rng_state()
    first = run(TripletMinerWithMemory(2, 3, seed=5))
    assert torch.equal(torch.get_rng_state(), state)
    second = run(TripletMinerWithMemory(2, 3, generator=torch.Generator().manual_seed(5)))
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    other = run(TripletMinerWithMemory(2, 3, seed=6))
    assert first[0].shape == other[0].shape and not torch.equal(first[0], other[0])  # no drop in the 1st call


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((2, 0), ValueError, "tri_expand_k must be >= 1, got 0"),
        ((2, 1.5), TypeError, "tri_expand_k must be an int, got float"),
        ((0, 2), ValueError, "bank_size_in_batches must be >= 1, got 0"),
        (("2", 2), TypeError, "bank_size_in_batches must be an int, got str"),
    ],
)
def test_memory_bad_arguments(args: tuple, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        TripletMinerWithMemory(*args)


def test_memory_bad_batches() -> None:
    miner = TripletMinerWithMemory(1, 2)
    with pytest.raises(ValueError, match="labels must be non-negative"):
        miner.sample(torch.zeros(4, 2), [0, 0, -1, -1])
    miner.sample(torch.zeros(4, 2), [0, 1, 2, 3])  # no triplet, no draw; the bank now has no positive pair
    with pytest.raises(
        ValueError, match=r"features: the memory bank takes batches of the first batch's shape \(4, 2\)"
    ):
        miner.sample(torch.zeros(6, 2), [0, 0, 1, 1, 2, 2])
    with pytest.raises(ValueError, match="labels: no label has two items, cannot draw 4 positive pairs"):
        miner.sample(torch.zeros(4, 2), [0, 0, 1, 1])
    with pytest.raises(ValueError, match="either generator or seed"):
        TripletMinerWithMemory(1, 2, generator=torch.Generator(), seed=0)


def test_sample_positive_pairs_distribution() -> None:
    labels = torch.tensor([0, 1, 0, 2, 1, 0])  # label 0: items 0, 2, 5; label 1: items 1, 4; item 3 alone
    ids_a, ids_p = sample_positive_pairs(labels, 30000, torch.Generator().manual_seed(0))
    counts = Counter(zip(ids_a.tolist(), ids_p.tolist()))
    # anchors uniform among the 5 items with a positive, positives uniform among their others
    expected = {pair: 0.1 for pair in itertools.permutations([0, 2, 5], 2)} | {(1, 4): 0.2, (4, 1): 0.2}
    assert set(counts) == set(expected)
    for pair, share in expected.items():
        assert abs(counts[pair] / 30000 - share) < 0.01, pair
    empty_a, empty_p = sample_positive_pairs(torch.tensor([0, 1]), 0, torch.Generator())
    assert len(empty_a) == len(empty_p) == 0


def test_feature_bank_push_needs_prepare() -> None:
    with pytest.raises(RuntimeError, match="must be prepared with a batch before a push"):
        FeatureBank(1, placeholders=False).push(torch.zeros(2, 2), torch.tensor([0, 1]))


# MinerWithBank, bank of one batch, NHard(2, 1). The first batch at 0, 1 (label 0), 10, 11 (label 1) goes to
# the bank; the second batch is 0.5, 3 (label 0), 10.5, 20 (label 1). Pool: batch 0..3, then bank 4..7.
FIRST_X, SECOND_X, LABELS = [0.0, 1.0, 10.0, 11.0], [0.5, 3.0, 10.5, 20.0], [0, 0, 1, 1]
# anchor 0 (0.5): positives by distance 1 (2.5), 4 (0.5), 5 (0.5) -> 1, 4; closest negative 6 (9.5)
# anchor 1 (3):   positives 4 (3), 0 (2.5), 5 (2) -> 4, 0; negative 6 (7)
# anchor 2 (10.5): positives 3 (9.5), 6 (0.5), 7 (0.5) -> 3, 6; negative 1 (7.5)
# anchor 3 (20):  positives 6 (10), 2 (9.5), 7 (9) -> 6, 2; negative 1 (17)
SECOND_TRIPLETS = [(0, 1, 6), (0, 4, 6), (1, 0, 6), (1, 4, 6), (2, 3, 1), (2, 6, 1), (3, 2, 1), (3, 6, 1)]


def column(xs: list[float]) -> torch.Tensor:
    return torch.tensor(xs, dtype=torch.float64)[:, None]


def test_miner_with_bank_by_hand() -> None:
    miner = MinerWithBank(bank_size_in_batches=1, miner=NHardTripletsMiner(n_positive=2, n_negative=1))
    assert miner.last_logs == {}
    anchor, positive, negative = miner.sample(column(FIRST_X), LABELS)
    # the bank was empty: the batch alone, one positive each
    assert anchor[:, 0].tolist() == FIRST_X
    assert positive[:, 0].tolist() == [1.0, 0.0, 11.0, 10.0]
    assert negative[:, 0].tolist() == [10.0, 10.0, 1.0, 1.0]
    assert miner.last_logs == {
        "positives_from_bank": 0.0,
        "positives_from_batch": 1.0,
        "negatives_from_bank": 0.0,
        "negatives_from_batch": 1.0,
    }
    second = column(SECOND_X).requires_grad_(True)
    anchor, positive, negative = miner.sample(second, torch.tensor(LABELS))
    pool = SECOND_X + FIRST_X
    assert anchor[:, 0].tolist() == [pool[a] for a, _, _ in SECOND_TRIPLETS]
    assert positive[:, 0].tolist() == [pool[p] for _, p, _ in SECOND_TRIPLETS]
    assert negative[:, 0].tolist() == [pool[n] for _, _, n in SECOND_TRIPLETS]
    # every anchor has one positive from each side; anchors 0, 1 take a bank negative, 2, 3 a batch one
    assert miner.last_logs == {
        "positives_from_bank": 1.0,
        "positives_from_batch": 1.0,
        "negatives_from_bank": 0.5,
        "negatives_from_batch": 0.5,
    }
    (anchor.sum() + positive.sum() + negative.sum()).backward()
    # item 0: 2 anchors + 1 positive; 1: 2 + 1 + 4 negatives; 2: 2 + 1; 3: 2 + 1
    assert second.grad is not None and second.grad[:, 0].tolist() == [3.0, 7.0, 3.0, 3.0]
    assert torch.equal(miner.bank.features, column(SECOND_X)) and not miner.bank.features.requires_grad


def naive_bank_mining(
    pool: list[float], pool_labels: list[int], n_anchors: int, pos: tuple[int, int], neg: tuple[int, int]
) -> list[tuple[float, float, float]]:
    """Python loops over the anchors (the first n_anchors items) and all the candidates (no ties here);
    windows 1-based inclusive."""
    triplets = []
    for a in range(n_anchors):
        positives = [p for p in range(len(pool)) if p != a and pool_labels[p] == pool_labels[a]]
        negatives = [n for n in range(len(pool)) if pool_labels[n] != pool_labels[a]]
        positives = sorted(sorted(positives, key=lambda p: -abs(pool[p] - pool[a]))[pos[0] - 1 : pos[1]])
        negatives = sorted(sorted(negatives, key=lambda n: abs(pool[n] - pool[a]))[neg[0] - 1 : neg[1]])
        triplets += [(pool[a], pool[p], pool[n]) for p, n in itertools.product(positives, negatives)]
    return triplets


def test_miner_with_bank_against_naive_reference() -> None:
    gen = torch.Generator().manual_seed(3)
    miner = MinerWithBank(bank_size_in_batches=2, miner=NHardTripletsMiner(n_positive=(2, 3), n_negative=2))
    history: list[tuple[list[float], list[int]]] = []
    for step in range(5):
        xs = torch.randn(8, generator=gen, dtype=torch.float64).mul(10).tolist()
        labels = torch.randint(0, 3, (8,), generator=gen).tolist()
        mined = miner.sample(column(xs), labels)
        # the bank is used once two batches were pushed; its slots hold the batches in ring order
        bank = [] if step < 2 else [history[-2], history[-1]] if step % 2 == 0 else [history[-1], history[-2]]
        pool = xs + [x for batch_xs, _ in bank for x in batch_xs]
        pool_labels = labels + [lb for _, batch_labels in bank for lb in batch_labels]
        expected = naive_bank_mining(pool, pool_labels, 8, pos=(2, 3), neg=(1, 2))
        assert len(expected) > 0
        assert list(zip(*(t[:, 0].tolist() for t in mined))) == expected
        assert all(anchor in xs for anchor in mined[0][:, 0].tolist())  # anchors only from the batch
        history.append((xs, labels))


def test_miner_with_bank_without_logs_and_bad_input() -> None:
    miner = MinerWithBank(1, NHardTripletsMiner(), need_logs=False)
    miner.sample(column(FIRST_X), LABELS)
    assert miner.last_logs == {}
    with pytest.raises(
        ValueError, match=r"features: the memory bank takes batches of the first batch's shape \(4, 1\)"
    ):
        miner.sample(torch.zeros(4, 2), LABELS)
    with pytest.raises(TypeError, match="miner must be a NHardTripletsMiner, got AllTripletsMiner"):
        MinerWithBank(1, AllTripletsMiner())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bank_size_in_batches must be >= 1, got 0"):
        MinerWithBank(0, NHardTripletsMiner())
    with pytest.raises(
        ValueError, match=r"labels must be one-dimensional with one label per feature row \(4\)"
    ):
        MinerWithBank(1, NHardTripletsMiner()).sample(torch.zeros(4, 2), [0, 1])


def test_miner_with_bank_logs_are_a_copy() -> None:
    miner = MinerWithBank(1, NHardTripletsMiner())
    miner.sample(column(FIRST_X), LABELS)
    miner.last_logs["positives_from_bank"] = 99.0
    assert miner.last_logs["positives_from_bank"] == 0.0
