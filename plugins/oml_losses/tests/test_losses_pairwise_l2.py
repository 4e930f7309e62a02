"""pairwise_l2 against torch.cdist's direct mode, in value and gradient, duplicated rows included."""

from __future__ import annotations

import pytest
import torch
from oml_losses import pairwise_l2


def direct(x: torch.Tensor) -> torch.Tensor:
    return torch.cdist(x, x, compute_mode="donot_use_mm_for_euclid_dist")


def features_with_duplicates(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    x = torch.randn(30, 12, generator=torch.Generator().manual_seed(0), dtype=dtype) + 5.0
    x[4] = x[17]  # an exact duplicate
    x[8] = x[9] + 1e-4  # a near duplicate: the matrix-multiply form alone would get it wrong
    return x


def test_hand_values() -> None:
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])
    expected = torch.tensor([[0.0, 5.0, 1.0], [5.0, 0.0, 18**0.5], [1.0, 18**0.5, 0.0]])
    assert torch.allclose(pairwise_l2(x), expected, atol=1e-6)


def test_values_and_exact_zeros() -> None:
    x = features_with_duplicates()
    dist = pairwise_l2(x)
    assert torch.allclose(dist, direct(x), rtol=1e-6, atol=1e-6)
    assert dist[4, 17] == 0 and dist[17, 4] == 0 and torch.equal(dist.diagonal(), torch.zeros(30))
    near = torch.linalg.vector_norm(x[8] - x[9])
    assert dist[8, 9] == near and dist[9, 8] == near  # recomputed directly, not by cancellation


def test_precise_far_from_the_origin() -> None:
    # |a|^2 + |b|^2 - 2 a.b of rows near (1000, .., 1000) cancels catastrophically; the centred rows do not
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(4)) + 1000.0
    exact = direct(x.double())
    assert not torch.allclose(torch.cdist(x, x).double(), exact, rtol=1e-2)  # matrix-multiply mode
    assert torch.allclose(pairwise_l2(x).double(), exact, rtol=1e-6, atol=1e-6)


def test_gradient_equals_the_direct_one_with_duplicates() -> None:
    x = features_with_duplicates().requires_grad_(True)
    weights = torch.randn(30, 30, generator=torch.Generator().manual_seed(1))
    (pairwise_l2(x) * weights).sum().backward()
    reference = x.detach().clone().requires_grad_(True)
    (direct(reference) * weights).sum().backward()
    assert torch.isfinite(x.grad).all()
    assert torch.allclose(x.grad, reference.grad, rtol=1e-5, atol=1e-5)


def test_gradcheck_in_double() -> None:
    x = features_with_duplicates(torch.float64)[:10, :4].clone()
    x[3] = x[2] + 1e-3
    assert torch.autograd.gradcheck(pairwise_l2, (x.requires_grad_(True),))


def test_all_rows_equal() -> None:
    x = torch.ones(5, 3, requires_grad=True)
    dist = pairwise_l2(x)
    assert torch.equal(dist, torch.zeros(5, 5))
    dist.sum().backward()
    assert torch.equal(x.grad, torch.zeros(5, 3))


def test_bad_shape() -> None:
    with pytest.raises(ValueError, match=r"features must be \[batch_size, dim\], got the shape \(4,\)"):
        pairwise_l2(torch.zeros(4))
