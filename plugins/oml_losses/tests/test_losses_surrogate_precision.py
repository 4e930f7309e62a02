"""SurrogatePrecision against OML's formula written naively, a hand-computed case and its small-temperature
limit."""

from __future__ import annotations

import math

import pytest
import torch
from oml_losses.surrogate_precision import SurrogatePrecision, soft_rank
from torch import Tensor

import oml_core.functional.losses as surrogate_module


def sigmoid(value: float) -> float:
    return 1 / (1 + math.exp(-value))


def naive_losses(features: Tensor, labels: Tensor, k: int, t1: float, t2: float) -> Tensor:
    """OML's formula on a [B, B, B] tensor: diff[l, i, j] = D[i, j] - D[i, l], summed over l."""
    dist = torch.cdist(features, features, compute_mode="donot_use_mm_for_euclid_dist")
    mask_gt = labels[:, None] == labels[None, :]
    diff = dist[None, :, :] - dist.T[:, :, None]
    rank = torch.sigmoid(diff / t2).sum(dim=0)
    precision = (torch.sigmoid((k + 1 - rank) / t1) * mask_gt).sum(dim=1) / mask_gt.sum(dim=1).clamp(
        max=k + 1
    )
    return 1 - precision


def test_hand_computed_tiny_case() -> None:
    # points 0, 1, 3 on a line, labels 0, 0, 1; t2 tiny: the ranks are the positions - 1/2 (self first):
    # row 0 (0, 1, 3 apart): 0.5, 1.5, 2.5; row 1 (1, 0, 2): 1.5, 0.5, 2.5; row 2 (3, 2, 0): 2.5, 1.5, 0.5.
    # k = 1 -> k + 1 = 2 with t1 = 1: precision_0 = precision_1 = (sig(1.5) + sig(0.5)) / 2, precision_2 = sig(1.5)
    features = torch.tensor([[0.0], [1.0], [3.0]])
    criterion = SurrogatePrecision(k=1, temperature1=1.0, temperature2=1e-3, reduction="none")
    first = 1 - (sigmoid(1.5) + sigmoid(0.5)) / 2
    expected = [first, first, 1 - sigmoid(1.5)]
    assert torch.allclose(criterion(features, torch.tensor([0, 0, 1])), torch.tensor(expected), atol=1e-6)
    assert expected == pytest.approx([0.2799831, 0.2799831, 0.1824255], abs=1e-7)


@pytest.mark.parametrize(("k", "t1", "t2"), [(1, 1.0, 0.01), (3, 0.5, 0.3), (2, 1.0, 1.0), (5, 0.2, 0.05)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_against_naive_formula_value_and_gradient(k: int, t1: float, t2: float, reduction: str) -> None:
    generator = torch.Generator().manual_seed(k)
    features = torch.randn(12, 5, dtype=torch.float64, generator=generator, requires_grad=True)
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 3, 1])
    loss = SurrogatePrecision(k, t1, t2, reduction=reduction)(features, labels)
    expected = {"mean": torch.mean, "sum": torch.sum, "none": lambda x: x}[reduction](
        naive_losses(features, labels, k, t1, t2)
    )
    assert torch.allclose(loss, expected, atol=1e-12)
    weights = torch.randn(loss.shape, dtype=torch.float64, generator=generator)
    grad = torch.autograd.grad((loss * weights).sum(), features)[0]
    expected_grad = torch.autograd.grad((expected * weights).sum(), features)[0]
    assert torch.allclose(grad, expected_grad, atol=1e-10)
    assert grad.abs().max() > 1e-3  # a gradient to compare


def test_small_temperatures_give_one_minus_the_precision_with_self() -> None:
    generator = torch.Generator().manual_seed(3)
    features = torch.randn(16, 4, dtype=torch.float64, generator=generator)
    labels = torch.tensor([0, 1, 2, 3] * 4)
    k = 3
    loss = SurrogatePrecision(k=k, temperature1=1e-4, temperature2=1e-6, reduction="none")(features, labels)
    dist = torch.cdist(features, features)
    expected = []
    for i in range(16):
        others = [j for j in torch.argsort(dist[i]).tolist() if j != i][:k]
        hits = sum(int(labels[j] == labels[i]) for j in others)
        n_same = int((labels == labels[i]).sum())
        expected.append(1 - (1 + hits) / min(n_same, k + 1))
    assert torch.allclose(loss, torch.tensor(expected, dtype=torch.float64), atol=1e-6)
    assert len(set(expected)) > 1


def test_soft_rank_gradcheck_and_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    dist = torch.rand(
        5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(4), requires_grad=True
    )
    assert torch.autograd.gradcheck(lambda d: soft_rank(d, 0.3), (dist,))
    rank = soft_rank(dist, 0.3)
    grad = torch.autograd.grad(rank.sum(), dist)[0]
    monkeypatch.setattr(surrogate_module, "RANK_CHUNK_VALUES", 1)  # one row per chunk
    chunked = soft_rank(dist, 0.3)
    assert torch.allclose(chunked, rank) and torch.allclose(torch.autograd.grad(chunked.sum(), dist)[0], grad)


def test_the_loss_decreases_when_the_labels_cluster() -> None:
    labels = torch.tensor([0, 0, 0, 1, 1, 1])
    clustered = torch.tensor([[0.0], [0.1], [0.2], [5.0], [5.1], [5.2]])
    mixed = torch.tensor([[0.0], [5.0], [0.2], [0.1], [5.1], [5.2]])
    criterion = SurrogatePrecision(k=2, temperature1=0.1)
    assert criterion(clustered, labels) < 0.01 < 0.3 < criterion(mixed, labels)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, "k must be a positive int, got 0"),
        ({"k": 1.5}, "k must be a positive int, got 1.5"),
        ({"k": True}, "k must be a positive int, got True"),
        ({"k": 1, "temperature1": 0.0}, "temperature1 must be positive, got 0.0"),
        ({"k": 1, "temperature2": -1.0}, "temperature2 must be positive, got -1.0"),
        ({"k": 1, "reduction": "avg"}, "reduction must be one of"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SurrogatePrecision(**kwargs)


def test_bad_shapes() -> None:
    criterion = SurrogatePrecision(k=1)
    with pytest.raises(ValueError, match=r"got the shapes \(3,\) and \(3,\)"):
        criterion(torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match=r"got the shapes \(3, 2\) and \(2,\)"):
        criterion(torch.zeros(3, 2), torch.tensor([0, 1]))
