"""label_smoothing (oml_core.functional.label_smoothing) against values by hand."""

from __future__ import annotations

import pytest
import torch

from oml_core.functional.label_smoothing import label_smoothing

Y = torch.tensor([1, 0])


@pytest.mark.parametrize(
    ("num_classes", "epsilon", "expected"),
    [
        (2, 0.0, [[0.0, 1.0], [1.0, 0.0]]),
        (2, 0.1, [[0.05, 0.95], [0.95, 0.05]]),  # (1 - 0.1) * one-hot + 0.1 / 2
        (3, 0.3, [[0.1, 0.8, 0.1], [0.8, 0.1, 0.1]]),  # 0.7 * one-hot + 0.1
    ],
)
def test_global_smoothing(num_classes: int, epsilon: float, expected: list[list[float]]) -> None:
    smoothed = label_smoothing(Y, num_classes=num_classes, epsilon=epsilon)
    assert torch.allclose(smoothed, torch.tensor(expected))
    assert smoothed.dtype == torch.float32


@pytest.mark.parametrize(
    ("categories", "expected"),
    [
        # label 1 shares its category with 2: 0.8 + 0.2 / 2 on itself, 0.1 on 2; label 0 is alone: 0.8 + 0.2
        ([0, 1, 1], [[0.0, 0.9, 0.1], [1.0, 0.0, 0.0]]),
        ([0, 0, 1], [[0.1, 0.9, 0.0], [0.9, 0.1, 0.0]]),
        ([5, 5, 5], [[0.2 / 3, 0.8 + 0.2 / 3, 0.2 / 3], [0.8 + 0.2 / 3, 0.2 / 3, 0.2 / 3]]),  # = global
    ],
)
def test_smoothing_inside_categories(categories: list[int], expected: list[list[float]]) -> None:
    smoothed = label_smoothing(Y, num_classes=3, epsilon=0.2, categories=torch.tensor(categories))
    assert torch.allclose(smoothed, torch.tensor(expected))
    assert torch.allclose(smoothed.sum(dim=1), torch.ones(2))


def test_the_default_epsilon_is_0_2() -> None:
    assert torch.allclose(label_smoothing(torch.tensor([0]), 4), torch.tensor([[0.85, 0.05, 0.05, 0.05]]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon": 1.0}, r"epsilon must be in \[0, 1\), got 1.0"),
        ({"epsilon": -0.1}, r"epsilon must be in \[0, 1\), got -0.1"),
        ({"num_classes": 0}, "num_classes must be a positive int, got 0"),
        ({"y": torch.tensor([0, 3])}, r"y must hold labels in \[0, 3\), got the range \[0, 3\]"),
        ({"y": torch.tensor([0.0, 1.0])}, "y must be a 1-D tensor of integer labels, got torch.float32"),
        ({"y": torch.tensor([[0, 1]])}, r"of the shape \(1, 2\)"),
        ({"categories": torch.tensor([0, 1])}, r"categories must be a \[num_classes\] = \[3\] tensor"),
    ],
)
def test_bad_inputs(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        label_smoothing(**{"y": Y, "num_classes": 3, "epsilon": 0.2, "categories": None, **kwargs})
