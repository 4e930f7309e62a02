"""TripletLoss, TripletLossPlain and TripletLossWithMiner against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch
from oml_losses import AllTripletsMiner, TripletLoss, TripletLossPlain, TripletLossWithMiner
from oml_losses.reduction import get_reduced

# Two triplets: d_ap = (5, 1) (a 3-4-5 triangle and a unit step), d_an = (1, 3).
ANCHOR = torch.tensor([[0.0, 0.0], [0.0, 0.0]])
POSITIVE = torch.tensor([[3.0, 4.0], [1.0, 0.0]])
NEGATIVE = torch.tensor([[0.0, 1.0], [0.0, 3.0]])
# margin 0.5: relu(0.5 + 5 - 1) = 4.5, relu(0.5 + 1 - 3) = 0
MARGIN_LOSSES = [4.5, 0.0]
# soft: log1p(exp(5 - 1)), log1p(exp(1 - 3))
SOFT_LOSSES = [math.log1p(math.exp(4.0)), math.log1p(math.exp(-2.0))]


@pytest.mark.parametrize(
    ("margin", "reduction", "expected"),
    [
        (0.5, "none", MARGIN_LOSSES),
        (0.5, "mean", 2.25),
        (0.5, "sum", 4.5),
        (None, "none", SOFT_LOSSES),
        (None, "mean", (SOFT_LOSSES[0] + SOFT_LOSSES[1]) / 2),
        (None, "sum", SOFT_LOSSES[0] + SOFT_LOSSES[1]),
    ],
)
def test_triplet_loss_values(margin: float | None, reduction: str, expected: float | list[float]) -> None:
    loss = TripletLoss(margin=margin, reduction=reduction)(ANCHOR, POSITIVE, NEGATIVE)
    assert torch.allclose(loss, torch.tensor(expected), atol=1e-6)
    assert loss.shape == ((2,) if reduction == "none" else ())


def test_soft_values_are_what_the_formula_gives() -> None:
    assert SOFT_LOSSES == pytest.approx([4.0181499279, 0.1269280110], abs=1e-9)


def test_soft_loss_does_not_overflow() -> None:
    far = torch.tensor([[200.0, 0.0]], requires_grad=True)
    loss = TripletLoss(margin=None)(torch.zeros(1, 2), far, torch.tensor([[100.0, 0.0]]))
    assert loss.item() == pytest.approx(100.0)  # log1p(exp(100)) = 100 + log1p(exp(-100))
    loss.backward()
    assert torch.isfinite(far.grad).all()


def test_triplet_loss_logs() -> None:
    criterion = TripletLoss(margin=0.5, need_logs=True)
    assert criterion.last_logs == {}
    criterion(ANCHOR, POSITIVE, NEGATIVE)
    assert criterion.last_logs == {"active_tri": 0.5, "pos_dist": 3.0, "neg_dist": 2.0}
    assert all(type(v) is float for v in criterion.last_logs.values())

    soft = TripletLoss(margin=None, need_logs=True)
    soft(ANCHOR, POSITIVE, NEGATIVE)
    assert soft.last_logs == {"active_tri": 1.0, "pos_dist": 3.0, "neg_dist": 2.0}


def test_no_logs_unless_asked() -> None:
    criterion = TripletLoss(margin=0.5)
    criterion(ANCHOR, POSITIVE, NEGATIVE)
    assert criterion.last_logs == {}


def test_triplet_loss_gradient_flows() -> None:
    anchor = ANCHOR.clone().requires_grad_(True)
    TripletLoss(margin=0.5)(anchor, POSITIVE, NEGATIVE).backward()
    # only the first triplet is active: d/da (d_ap - d_an) / 2 = ((a - p)/5 - (a - n)/1) / 2
    expected_first = (
        (torch.tensor([0.0, 0.0]) - POSITIVE[0]) / 5 - (torch.tensor([0.0, 0.0]) - NEGATIVE[0])
    ) / 2
    assert torch.allclose(anchor.grad[0], expected_first)
    assert torch.equal(anchor.grad[1], torch.zeros(2))


@pytest.mark.parametrize("cls", [TripletLoss, TripletLossPlain])
def test_bad_reduction_is_named(cls: type) -> None:
    with pytest.raises(ValueError, match=r"reduction must be one of 'mean', 'sum', 'none', got 'avg'"):
        cls(margin=0.1, reduction="avg")


def test_bad_reduction_in_get_reduced() -> None:
    with pytest.raises(ValueError, match="'max'"):
        get_reduced(torch.ones(3), "max")


@pytest.mark.parametrize("margin", [0.0, -0.1])
def test_margin_must_be_positive(margin: float) -> None:
    with pytest.raises(ValueError, match="margin must be a positive number"):
        TripletLoss(margin=margin)


def test_triplet_loss_shape_mismatch() -> None:
    with pytest.raises(ValueError, match="one shape"):
        TripletLoss(margin=0.1)(ANCHOR, POSITIVE[:1], NEGATIVE)


@pytest.mark.parametrize(("margin", "reduction"), [(0.5, "mean"), (0.5, "none"), (None, "sum")])
def test_plain_equals_triplet_loss(margin: float | None, reduction: str) -> None:
    stacked = torch.stack([ANCHOR, POSITIVE, NEGATIVE], dim=1).reshape(6, 2)
    assert torch.equal(stacked[3], ANCHOR[1]) and torch.equal(stacked[5], NEGATIVE[1])
    plain = TripletLossPlain(margin=margin, reduction=reduction, need_logs=True)
    expected = TripletLoss(margin=margin, reduction=reduction)(ANCHOR, POSITIVE, NEGATIVE)
    assert torch.allclose(plain(stacked), expected)
    assert plain.last_logs["pos_dist"] == 3.0 and plain.last_logs["neg_dist"] == 2.0


def test_plain_needs_a_multiple_of_three() -> None:
    with pytest.raises(ValueError, match="multiple of 3, got 5"):
        TripletLossPlain(margin=0.1)(torch.zeros(5, 2))


# Points on a line, labels [0, 0, 1]: the triplets are (0, 1, 2) with d_ap = 1, d_an = 3 and
# (1, 0, 2) with d_ap = 1, d_an = 2. margin 1.5: relu(1.5 + 1 - 3) = 0, relu(1.5 + 1 - 2) = 0.5.
LINE = torch.tensor([[0.0], [1.0], [3.0]])


@pytest.mark.parametrize(("reduction", "expected"), [("mean", 0.25), ("sum", 0.5), ("none", [0.0, 0.5])])
def test_with_miner_values(reduction: str, expected: float | list[float]) -> None:
    criterion = TripletLossWithMiner(
        margin=1.5, miner=AllTripletsMiner(), reduction=reduction, need_logs=True
    )
    loss = criterion(LINE, [0, 0, 1])
    assert torch.allclose(loss, torch.tensor(expected))
    assert criterion.last_logs == {"active_tri": 0.5, "pos_dist": 1.0, "neg_dist": 2.5}


def test_with_miner_soft_and_tensor_labels() -> None:
    criterion = TripletLossWithMiner(margin=None)
    loss = criterion(LINE, torch.tensor([0, 0, 1]))
    expected = (math.log1p(math.exp(1 - 3)) + math.log1p(math.exp(1 - 2))) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert criterion.last_logs == {}


def test_with_miner_default_miner_is_a_fresh_all_triplets_miner() -> None:
    first, second = TripletLossWithMiner(margin=0.1), TripletLossWithMiner(margin=0.1)
    assert isinstance(first.miner, AllTripletsMiner)
    assert first.miner is not second.miner


def test_with_miner_rejects_a_non_miner() -> None:
    with pytest.raises(TypeError, match="ITripletsMiner"):
        TripletLossWithMiner(margin=0.1, miner=object())  # type: ignore[arg-type]


def test_with_miner_no_triplets_gives_zero_not_nan() -> None:
    features = torch.randn(4, 3, requires_grad=True)
    loss = TripletLossWithMiner(margin=0.1)(features, [7, 7, 7, 7])
    assert loss.item() == 0.0
    loss.backward()
    assert torch.equal(features.grad, torch.zeros(4, 3))


def test_with_miner_backward_matches_reference() -> None:
    torch.manual_seed(0)  # test data only
    features = torch.randn(8, 5, requires_grad=True)
    labels = [0, 0, 1, 1, 2, 2, 2, 3]
    TripletLossWithMiner(margin=0.2)(features, labels).backward()
    ref_features = features.detach().clone().requires_grad_(True)
    losses = [
        torch.relu(
            0.2 + (ref_features[a] - ref_features[p]).norm() - (ref_features[a] - ref_features[n]).norm()
        )
        for a in range(8)
        for p in range(8)
        for n in range(8)
        if a != p and labels[a] == labels[p] and labels[n] != labels[a]
    ]
    torch.stack(losses).mean().backward()
    assert torch.allclose(features.grad, ref_features.grad, atol=1e-6)


def test_with_miner_length_mismatch() -> None:
    with pytest.raises(ValueError, match="differ in length: 3 and 2"):
        TripletLossWithMiner(margin=0.1)(LINE, [0, 0])


@pytest.mark.parametrize("margin", [0.1, 1.0])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_triplet_loss_equals_torch_triplet_margin_loss(margin: float, reduction: str) -> None:
    generator = torch.Generator().manual_seed(5)
    anchor, positive, negative = torch.randn(3, 40, 8, generator=generator)
    # eps=0: torch's pairwise_distance otherwise measures ||a - p + eps||
    expected = torch.nn.TripletMarginLoss(margin=margin, p=2, eps=0.0, reduction=reduction)(
        anchor, positive, negative
    )
    loss = TripletLoss(margin=margin, reduction=reduction)(anchor, positive, negative)
    assert torch.allclose(loss, expected, rtol=1e-6, atol=1e-6)
    assert bool((loss > 0).any())  # not a trivial case


def test_soft_triplet_of_identical_vectors_is_log_2() -> None:
    same = torch.full((3, 4), 0.7, requires_grad=True)
    loss = TripletLoss(margin=None, reduction="none")(same, same, same)
    assert torch.allclose(loss, torch.full((3,), math.log(2.0)))
    loss.sum().backward()
    assert torch.equal(same.grad, torch.zeros(3, 4))  # the norm of a zero vector has a zero gradient
