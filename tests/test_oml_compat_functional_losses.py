"""OML 4.0's ``oml.functional.losses`` at ``oml_core.functional.losses``: ``surrogate_precision`` with OML's
signature and default reduction, and ``get_reduced``, on hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch

from oml_core.functional.losses import get_reduced, surrogate_precision


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def test_surrogate_precision_has_oml_signature_and_reduces_by_the_mean():
    # one query, two columns at distances 0 and 1, the first relevant; k = 1, t1 = 1, t2 = 1
    distances = torch.tensor([[0.0, 1.0]])
    mask = torch.tensor([[True, False]])
    rank_0 = sigmoid(0.0) + sigmoid(-1.0)  # sum_l sigmoid((d_0 - d_l) / t2)
    expected = sigmoid(1 - rank_0) / 1  # / min(n_gt = 1, k = 1)
    per_row = surrogate_precision(distances, mask, 1, 1.0, 1.0, reduction="none")
    assert per_row.shape == (1,) and per_row.item() == pytest.approx(expected)
    two_rows = surrogate_precision(distances.repeat(2, 1), mask.repeat(2, 1), k=1, t1=1.0, t2=1.0)
    assert two_rows.shape == () and two_rows.item() == pytest.approx(expected)  # OML's default: the mean
    total = surrogate_precision(
        distances=distances.repeat(2, 1), mask_gt=mask.repeat(2, 1), k=1, t1=1, t2=1, reduction="sum"
    )
    assert total.item() == pytest.approx(2 * expected)
    with pytest.raises(ValueError, match="reduction must be one of"):
        surrogate_precision(distances, mask, 1, 1.0, 1.0, reduction="max")


def test_get_reduced():
    values = torch.tensor([1.0, 2.0, 6.0])
    assert get_reduced(values, "mean").item() == 3.0 and get_reduced(values, "sum").item() == 9.0
    assert get_reduced(values, "none") is values
