"""ArcFaceLoss and ArcFaceLossWithMLP: logits by hand, label smoothing, learning a toy set, bad arguments."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from oml_losses.arcface import ArcFaceLoss, ArcFaceLossWithMLP, label2category_tensor
from torch import Tensor, nn
from torch.nn import functional as F


def unit_weights(criterion: ArcFaceLoss, weight: list[list[float]]) -> ArcFaceLoss:
    with torch.no_grad():
        criterion.weight.copy_(torch.tensor(weight))
    return criterion


def cross_entropy(logits: list[float], target: int) -> float:
    return -logits[target] + math.log(sum(math.exp(v) for v in logits))


def test_logits_and_loss_by_hand() -> None:
    # x at 45 degrees from both class vectors: cos = 1/sqrt(2); the target gets cos(pi/4 + m)
    criterion = unit_weights(ArcFaceLoss(2, 2, m=0.5, s=2.0), [[1.0, 0.0], [0.0, 3.0]])
    x, y = torch.tensor([[1.0, 1.0]]), torch.tensor([0])
    expected = [2 * math.cos(math.pi / 4 + 0.5), 2 * math.cos(math.pi / 4)]
    assert torch.allclose(criterion.logits(x, y), torch.tensor([expected]), atol=1e-6)
    assert criterion(x, y).item() == pytest.approx(cross_entropy(expected, 0), abs=1e-6)
    assert criterion.last_logs == {"accuracy": 1.0}  # the cosines tie; argmax takes the first class, 0
    assert criterion(x, torch.tensor([1])).item() == pytest.approx(cross_entropy(expected[::-1], 1), abs=1e-6)
    assert criterion.last_logs == {"accuracy": 0.0}


def test_logits_past_pi_use_the_linear_fallback() -> None:
    # theta = acos(-1/sqrt(1.04)) = 2.944 > pi - m = 2.642: the target logit is s * (cos - m sin(m))
    criterion = unit_weights(ArcFaceLoss(2, 2, m=0.5, s=3.0), [[1.0, 0.0], [0.0, 1.0]])
    x, y = torch.tensor([[-1.0, 0.2]]), torch.tensor([0])
    cos = [-1 / math.sqrt(1.04), 0.2 / math.sqrt(1.04)]
    assert math.acos(cos[0]) + 0.5 > math.pi
    expected = [3 * (cos[0] - 0.5 * math.sin(0.5)), 3 * cos[1]]
    assert torch.allclose(criterion.logits(x, y), torch.tensor([expected]), atol=1e-6)
    assert criterion.last_logs == {"accuracy": 0.0}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_reductions(reduction: str) -> None:
    criterion = unit_weights(ArcFaceLoss(2, 2, m=0.5, s=2.0, reduction=reduction), [[1.0, 0.0], [0.0, 1.0]])
    x, y = torch.tensor([[1.0, 1.0], [2.0, 2.0]]), torch.tensor([0, 1])
    expected = [cross_entropy([2 * math.cos(math.pi / 4 + 0.5), math.sqrt(2)], 0)] * 2
    value = {"mean": expected[0], "sum": 2 * expected[0], "none": expected}[reduction]
    assert torch.allclose(criterion(x, y), torch.tensor(value), atol=1e-6)


def test_gradient_is_finite_where_cos_is_one() -> None:
    criterion = unit_weights(ArcFaceLoss(2, 2), [[1.0, 0.0], [0.0, 1.0]])
    x = torch.tensor([[5.0, 0.0], [0.0, -2.0]], requires_grad=True)  # cos = 1 and cos = -1 with a class
    criterion(x, torch.tensor([0, 1])).backward()
    assert torch.isfinite(x.grad).all() and torch.isfinite(criterion.weight.grad).all()


def test_smoothing_with_categories_by_hand() -> None:
    # labels 1 and 2 share a category: epsilon 0.2 of label 1 goes to 1 and 2 only; label 0 is alone
    criterion = ArcFaceLoss(3, 3, smoothing_epsilon=0.2, label2category={0: "a", 1: "b", 2: "b"}, s=4.0)
    x, y = torch.tensor([[1.0, 0.5, -0.2], [0.3, 0.1, 0.9]]), torch.tensor([1, 0])
    targets = torch.tensor([[0.0, 0.9, 0.1], [1.0, 0.0, 0.0]])
    logits = criterion.logits(x, y)
    expected = -(targets * torch.log_softmax(logits, dim=1)).sum(dim=1).mean()
    assert torch.allclose(criterion(x, y), expected, atol=1e-6)
    assert not torch.allclose(expected, F.cross_entropy(logits, y))

    globally = ArcFaceLoss(3, 3, smoothing_epsilon=0.3, s=4.0)
    unit_weights(globally, criterion.weight.tolist())
    targets = torch.tensor([[0.1, 0.8, 0.1], [0.8, 0.1, 0.1]])
    expected = -(targets * torch.log_softmax(globally.logits(x, y), dim=1)).sum(dim=1).mean()
    assert torch.allclose(globally(x, y), expected, atol=1e-6)


def test_label2category_numbers_categories_in_label_order() -> None:
    assert label2category_tensor({2: "x", 0: "y", 1: "x", 3: 7}, 4).tolist() == [0, 1, 1, 2]
    with pytest.raises(ValueError, match=r"every label 0\.\.2; missing: \[1\]"):
        label2category_tensor({0: "a", 2: "b"}, 3)


def separable_toy_set(n: int = 64) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(0)
    y = torch.arange(n) % 2
    x = torch.randn(n, 4, generator=generator) * 0.5
    x[:, 0] += torch.where(y == 1, 2.0, -2.0)
    x[:, 1] += 3.0  # off the origin: the classes differ by their angle, not by the sign of every coordinate
    return x, y


@pytest.mark.parametrize(
    "make",
    [
        lambda g: ArcFaceLoss(4, 2, m=0.3, s=16, generator=g),
        lambda g: ArcFaceLossWithMLP(4, 2, [8, 3], m=0.3, s=16, generator=g),
    ],
)
def test_learns_a_separable_toy_set(make: Callable[[torch.Generator], nn.Module]) -> None:
    x, y = separable_toy_set()
    criterion = make(torch.Generator().manual_seed(1))
    criterion(x, y)
    assert criterion.last_logs["accuracy"] < 0.5  # not learnt from the start
    optimizer = torch.optim.SGD(criterion.parameters(), lr=0.1)
    losses = []
    for _ in range(40):
        loss = criterion(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    criterion(x, y)
    assert criterion.last_logs == {"accuracy": 1.0}
    assert losses[-1] < 0.05 * losses[0]
    assert all(later < earlier for earlier, later in zip(losses[::10], losses[10::10]))


def test_generator_makes_the_initialisation_reproducible() -> None:
    first = ArcFaceLossWithMLP(5, 3, [4, 2], generator=torch.Generator().manual_seed(3))
    second = ArcFaceLossWithMLP(5, 3, [4, 2], generator=torch.Generator().manual_seed(3))
    for a, b in zip(first.state_dict().values(), second.state_dict().values()):
        assert torch.equal(a, b)
    bound = math.sqrt(6 / (5 + 3))  # Xavier uniform of the [3, 5] class weights
    assert ArcFaceLoss(5, 3).weight.abs().max() <= bound


def test_mlp_structure_and_equivalence() -> None:
    criterion = ArcFaceLossWithMLP(6, 3, [5, 4], m=0.2, s=10, generator=torch.Generator().manual_seed(0))
    assert [type(layer) for layer in criterion.mlp] == [nn.Linear, nn.ReLU, nn.Linear]
    assert criterion.mlp[0].weight.shape == (5, 6) and criterion.mlp[2].weight.shape == (4, 5)
    x, y = torch.randn(7, 6, generator=torch.Generator().manual_seed(1)), torch.tensor([0, 1, 2, 0, 1, 2, 0])
    assert torch.allclose(criterion(x, y), criterion.arcface(criterion.mlp(x), y))
    assert criterion.last_logs is criterion.arcface.last_logs


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"in_features": 0}, "in_features must be a positive int, got 0"),
        ({"num_classes": -1}, "num_classes must be a positive int, got -1"),
        ({"num_classes": 2.0}, "num_classes must be a positive int, got 2.0"),
        ({"m": -0.1}, r"m must be in \[0, pi\), got -0.1"),
        ({"m": 3.2}, r"m must be in \[0, pi\), got 3.2"),
        ({"s": 0}, "s must be positive, got 0"),
        ({"smoothing_epsilon": 1.0}, r"smoothing_epsilon must be in \[0, 1\), got 1.0"),
        ({"smoothing_epsilon": -0.1}, r"smoothing_epsilon must be in \[0, 1\), got -0.1"),
        ({"label2category": {0: 0}}, r"missing: \[1, 2\]"),
        ({"reduction": "max"}, "reduction must be one of"),
    ],
)
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ArcFaceLoss(**{"in_features": 4, "num_classes": 3, **kwargs})


@pytest.mark.parametrize(
    ("mlp_features", "message"),
    [
        ([], "non-empty list"),
        ("12", "non-empty list"),
        ([4, 0], "every size of mlp_features must be a positive int"),
    ],
)
def test_bad_mlp_features(mlp_features: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ArcFaceLossWithMLP(4, 3, mlp_features)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        (torch.zeros(2, 5), torch.tensor([0, 1]), r"x must be \[batch_size, 4\], got the shape \(2, 5\)"),
        (torch.zeros(4), torch.tensor([0]), r"x must be \[batch_size, 4\], got the shape \(4,\)"),
        (torch.ones(2, 4), torch.tensor([0, 3]), r"y must hold labels in \[0, 3\), got the range \[0, 3\]"),
        (torch.ones(2, 4), torch.tensor([-1, 0]), r"got the range \[-1, 0\]"),
        (torch.ones(2, 4), torch.tensor([0.0, 1.0]), r"y must be \[batch_size\] = \[2\] integer labels"),
        (torch.ones(2, 4), torch.tensor([0]), r"y must be \[batch_size\] = \[2\] integer labels"),
    ],
)
def test_bad_inputs(x: Tensor, y: Tensor, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ArcFaceLoss(4, 3)(x, y)
    if x.ndim == 2 and x.shape[1] == 4:
        with pytest.raises(ValueError, match=message):
            ArcFaceLossWithMLP(4, 3, [2])(x, y)
