"""The fast TripletLossWithMiner against TripletLoss on the gathered triplets of the same miner."""

from __future__ import annotations

import itertools

import oml_losses.triplet as triplet_module
import pytest
import torch
from oml_losses.miners import (
    AllTripletsMiner,
    HardClusterMiner,
    HardTripletsMiner,
    NHardTripletsMiner,
    TripletMinerWithMemory,
)
from oml_losses.triplet import TripletLoss, TripletLossWithMiner, positive_slots
from torch import Tensor

from oml_core.interfaces.miners import ITripletsMiner

MARGINS = [0.2, 1.0, None]
REDUCTIONS = ["mean", "sum", "none"]


def balanced_batch(n_labels: int, n_instances: int, dim: int, seed: int) -> tuple[Tensor, Tensor]:
    """Shuffled labels, and features with duplicated rows (same label, and across labels)."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(n_labels).repeat_interleave(n_instances)
    labels = labels[torch.randperm(len(labels), generator=generator)]
    features = torch.randn(len(labels), dim, generator=generator)
    same_label = torch.nonzero(labels == labels[0]).flatten()
    features[same_label[1]] = features[same_label[0]]  # d_ap = 0 for these two
    features[-1] = features[-2]  # whatever their labels
    return features, labels


def gathered(
    features: Tensor, labels: Tensor, margin: float | None, reduction: str, miner: ITripletsMiner
) -> tuple[Tensor, Tensor, dict[str, float]]:
    """The reference: the miner's triplets as features, TripletLoss on them; loss, features' grad, logs."""
    leaf = features.detach().clone().requires_grad_(True)
    criterion = TripletLoss(margin=margin, reduction=reduction, need_logs=True)
    loss = criterion(*miner.sample(leaf, labels)[:3])
    loss.sum().backward()
    return loss.detach(), leaf.grad, criterion.last_logs


def fast(
    features: Tensor, labels: Tensor, margin: float | None, reduction: str, miner: ITripletsMiner
) -> tuple[Tensor, Tensor, dict[str, float]]:
    leaf = features.detach().clone().requires_grad_(True)
    criterion = TripletLossWithMiner(margin=margin, miner=miner, reduction=reduction, need_logs=True)
    loss = criterion(leaf, labels)
    loss.sum().backward()
    return loss.detach(), leaf.grad, criterion.last_logs


def assert_same(
    result: tuple[Tensor, Tensor, dict[str, float]], expected: tuple[Tensor, Tensor, dict]
) -> None:
    loss, grad, logs = result
    expected_loss, expected_grad, expected_logs = expected
    assert loss.shape == expected_loss.shape
    assert torch.allclose(loss, expected_loss, rtol=1e-5, atol=1e-5)
    assert torch.isfinite(grad).all()
    assert torch.allclose(grad, expected_grad, rtol=1e-5, atol=1e-5)
    assert logs.keys() == expected_logs.keys()
    for key, value in expected_logs.items():
        assert logs[key] == pytest.approx(value, rel=1e-5, abs=1e-6, nan_ok=True), key


@pytest.mark.parametrize(("margin", "reduction"), list(itertools.product(MARGINS, REDUCTIONS)))
def test_all_triplets(margin: float | None, reduction: str) -> None:
    features, labels = balanced_batch(n_labels=6, n_instances=4, dim=16, seed=0)
    expected = gathered(features, labels, margin, reduction, AllTripletsMiner())
    assert len(expected[0].shape) == 0 or len(expected[0]) == 6 * 4 * 3 * 20
    assert_same(fast(features, labels, margin, reduction, AllTripletsMiner()), expected)


@pytest.mark.parametrize("margin", MARGINS)
def test_all_triplets_unbalanced_labels_and_a_singleton(margin: float | None) -> None:
    generator = torch.Generator().manual_seed(1)
    labels = torch.tensor([3, 1, 3, 2, 1, 2, 2, 5, 3, 3, 0, 0])
    features = torch.randn(len(labels), 5, generator=generator) * 0.3
    for reduction in ("mean", "sum"):
        expected = gathered(features, labels, margin, reduction, AllTripletsMiner())
        assert_same(fast(features, labels, margin, reduction, AllTripletsMiner()), expected)


def test_all_triplets_dense_path_mines_no_index_triplets() -> None:
    features, labels = balanced_batch(n_labels=4, n_instances=3, dim=4, seed=2)
    miner = AllTripletsMiner()
    miner._sample = None  # type: ignore[assignment,method-assign]  # the dense path must not call it
    loss = TripletLossWithMiner(margin=0.5, miner=miner)(features, labels)
    expected = gathered(features, labels, 0.5, "mean", AllTripletsMiner())[0]
    assert torch.allclose(loss, expected, atol=1e-6)


def test_dense_chunks_give_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    features, labels = balanced_batch(n_labels=5, n_instances=4, dim=6, seed=3)
    expected = fast(features, labels, 0.3, "sum", AllTripletsMiner())
    monkeypatch.setattr(triplet_module, "DENSE_CHUNK_VALUES", 100)  # 1 anchor of 3 x 20 per chunk
    assert_same(fast(features, labels, 0.3, "sum", AllTripletsMiner()), expected)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_all_triplets_subsampled_uses_the_miners_draws(reduction: str) -> None:
    features, labels = balanced_batch(n_labels=5, n_instances=3, dim=8, seed=4)
    expected = gathered(features, labels, 0.4, reduction, AllTripletsMiner(max_output_triplets=50, seed=7))
    result = fast(features, labels, 0.4, reduction, AllTripletsMiner(max_output_triplets=50, seed=7))
    assert_same(result, expected)
    assert reduction != "none" or len(result[0]) == 50


@pytest.mark.parametrize(("margin", "reduction"), list(itertools.product(MARGINS, REDUCTIONS)))
@pytest.mark.parametrize(
    "miner_cls", [HardTripletsMiner, lambda: NHardTripletsMiner(n_positive=2, n_negative=3)]
)
def test_hard_miners(margin: float | None, reduction: str, miner_cls: type) -> None:
    features, labels = balanced_batch(n_labels=5, n_instances=4, dim=8, seed=5)
    assert_same(
        fast(features, labels, margin, reduction, miner_cls()),
        gathered(features, labels, margin, reduction, miner_cls()),
    )


def test_miner_returning_features() -> None:
    features, labels = balanced_batch(n_labels=4, n_instances=3, dim=8, seed=6)
    assert_same(
        fast(features, labels, 0.2, "mean", HardClusterMiner()),
        gathered(features, labels, 0.2, "mean", HardClusterMiner()),
    )


def test_no_triplets_gives_zero_and_nan_distances() -> None:
    for miner in (AllTripletsMiner(), AllTripletsMiner(max_output_triplets=3)):
        features = torch.randn(4, 3, generator=torch.Generator().manual_seed(8), requires_grad=True)
        criterion = TripletLossWithMiner(margin=0.1, miner=miner, need_logs=True)
        loss = criterion(features, [7, 7, 7, 7])
        loss.backward()
        assert loss.item() == 0.0 and torch.equal(features.grad, torch.zeros(4, 3))
        assert criterion.last_logs["active_tri"] == 0.0
        assert torch.isnan(
            torch.tensor([criterion.last_logs["pos_dist"], criterion.last_logs["neg_dist"]])
        ).all()


class FixedMemoryMiner(ITripletsMiner):
    """Three 1-D triplets, the first two of the batch, the third of the bank."""

    def sample(self, features: Tensor, labels: Tensor | list[int]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        anchor = features[[0, 0, 0]]
        positive = torch.tensor([[1.0], [2.0], [1.0]])
        negative = torch.tensor([[3.0], [1.0], [2.0]])
        return anchor, positive, negative, torch.tensor([True, True, False])


@pytest.mark.parametrize(("reduction", "expected"), [("mean", 1.0), ("sum", 3.0), ("none", [0.0, 2.5, 0.5])])
def test_memory_miner_logs_by_hand(reduction: str, expected: float | list[float]) -> None:
    # d_ap = (1, 2, 1), d_an = (3, 1, 2), margin 1.5: losses relu(1.5 + 1 - 3) = 0, 2.5, 0.5
    criterion = TripletLossWithMiner(
        margin=1.5, miner=FixedMemoryMiner(), reduction=reduction, need_logs=True
    )
    loss = criterion(torch.zeros(2, 1), [0, 1])
    assert torch.allclose(loss, torch.tensor(expected))
    assert criterion.last_logs == pytest.approx(
        {
            "active_tri": 2 / 3,
            "pos_dist": 4 / 3,
            "neg_dist": 2.0,
            "orig_active_tri": 0.5,
            "pos_dist_orig": 1.5,
            "neg_dist_orig": 2.0,
            "bank_active_tri": 1.0,
            "pos_dist_bank": 1.0,
            "neg_dist_bank": 2.0,
        }
    )


def test_memory_miner_weights_every_triplet_once() -> None:
    features, labels = balanced_batch(n_labels=4, n_instances=2, dim=6, seed=9)
    criterion = TripletLossWithMiner(
        margin=0.5,
        miner=TripletMinerWithMemory(bank_size_in_batches=2, tri_expand_k=3, seed=1),
        need_logs=True,
    )
    reference_miner = TripletMinerWithMemory(bank_size_in_batches=2, tri_expand_k=3, seed=1)
    for step in range(2):
        batch = features + step
        loss = criterion(batch, labels)
        anchor, positive, negative, is_original = reference_miner.sample(batch, labels)
        losses = TripletLoss(margin=0.5, reduction="none")(anchor, positive, negative)
        n_orig, n_bank = int(is_original.sum()), int((~is_original).sum())
        # 8 anchors x 1 positive x 6 negatives; (3 - 1) x 48 more, less those whose negative has the label
        assert n_orig == 48 and 0 < n_bank <= 96
        orig_mean, bank_mean = losses[is_original].mean(), losses[~is_original].mean()
        assert torch.allclose(loss, (orig_mean * n_orig + bank_mean * n_bank) / (n_orig + n_bank), atol=1e-6)
        assert not torch.allclose(loss, (orig_mean + bank_mean) / 2, atol=1e-3)  # not a mean of the two means
        logs = criterion.last_logs
        assert logs["orig_active_tri"] == pytest.approx(float((losses[is_original] > 0).float().mean()))
        assert logs["bank_active_tri"] == pytest.approx(float((losses[~is_original] > 0).float().mean()))
        bank_pos = torch.linalg.vector_norm(anchor[~is_original] - positive[~is_original], dim=1).mean()
        assert logs["pos_dist_bank"] == pytest.approx(float(bank_pos))


def test_no_logs_unless_asked() -> None:
    features, labels = balanced_batch(n_labels=3, n_instances=2, dim=1, seed=10)
    for miner in (
        AllTripletsMiner(),
        AllTripletsMiner(max_output_triplets=5),
        HardTripletsMiner(),
        FixedMemoryMiner(),
    ):
        criterion = TripletLossWithMiner(margin=0.1, miner=miner)
        assert criterion(features, labels) > 0
        assert criterion.last_logs == {}


def naive_slots(labels: list[int]) -> list[list[int]]:
    return [[p for p in range(len(labels)) if p != a and labels[p] == labels[a]] for a in range(len(labels))]


@pytest.mark.parametrize(
    "labels", [[0, 0, 1, 1], [3, 1, 3, 2, 1, 2, 2, 5], [4], [2, 2, 2], [1, 0, 1, 0, 0, 9]]
)
def test_positive_slots_against_naive(labels: list[int]) -> None:
    pos_ids, valid, counts = positive_slots(torch.tensor(labels))
    expected = naive_slots(labels)
    assert pos_ids.shape == valid.shape == (len(labels), max(map(len, expected)))
    assert [row[mask].tolist() for row, mask in zip(pos_ids, valid)] == expected
    assert [row[~mask].tolist() for row, mask in zip(pos_ids, valid)] == [
        [a] * (pos_ids.shape[1] - len(expected[a])) for a in range(len(labels))
    ]
    assert counts.tolist() == [labels.count(label) for label in labels]


def test_bad_shapes() -> None:
    criterion = TripletLossWithMiner(margin=0.1)
    with pytest.raises(ValueError, match=r"features must be \[batch_size, feat\], got the shape \(4,\)"):
        criterion(torch.zeros(4), [0, 0, 1, 1])
    with pytest.raises(ValueError, match=r"labels must be one-dimensional, got the shape \(2, 2\)"):
        criterion(torch.zeros(2, 3), torch.zeros(2, 2))
