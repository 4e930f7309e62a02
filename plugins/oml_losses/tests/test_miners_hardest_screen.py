"""HardTripletsMiner's float32 screen with exact settlement of near ties (``hardest_triplets_ids``) against an
exact reference, and the training step's output on a seeded batch against the one captured before it."""

from __future__ import annotations

import pytest
import torch
from oml_losses.miners import HardTripletsMiner
from oml_losses.miners.hardest import _float32_matmul_is_ieee
from oml_losses.triplet import TripletLossWithMiner
from torch import Tensor

from oml_core.utils.misc_torch import l2_dist_mm


def exact_hardest(features: Tensor, labels: Tensor) -> tuple[list[int], list[int], list[int]]:
    """The reference: distances from the differences in float64 (no matrix-multiply shortcut), rounded to the
    features' dtype; the farthest positive and the closest negative, ties to the smallest index (``argmax`` and
    ``argmin`` return the first)."""
    x = features.double()
    dist = torch.cdist(x, x, compute_mode="donot_use_mm_for_euclid_dist").to(features.dtype).double()
    same = labels[:, None] == labels[None, :]
    is_pos = same & ~torch.eye(len(labels), dtype=torch.bool)
    anchors = (is_pos.any(dim=1) & (~same).any(dim=1)).nonzero().squeeze(1)
    positives = dist.masked_fill(~is_pos, -torch.inf).argmax(dim=1)
    negatives = dist.masked_fill(same, torch.inf).argmin(dim=1)
    return anchors.tolist(), positives[anchors].tolist(), negatives[anchors].tolist()


def mined(features: Tensor, labels: Tensor) -> tuple[list[int], ...]:
    return tuple(t.tolist() for t in HardTripletsMiner()._sample(features, labels))


def batch(kind: str, n: int, dim: int, n_labels: int, seed: int) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, n_labels, (n,), generator=g)
    if kind == "randn":
        return torch.randn(n, dim, generator=g), labels
    if kind == "repeated_rows":  # exact ties: equal rows are 0 apart, and equally far from the others
        rows = torch.randn(max(1, n // 3), dim, generator=g)
        return rows[torch.randint(0, len(rows), (n,), generator=g)], labels
    if kind == "unit_clusters":  # a trained model's embeddings: tight clusters on the unit sphere
        centres = torch.randn(4, dim, generator=g)
        x = centres[torch.randint(0, 4, (n,), generator=g)] + 1e-3 * torch.randn(n, dim, generator=g)
        return torch.nn.functional.normalize(x), labels
    if kind == "far_from_origin":  # |a|^2 + |b|^2 - 2 a.b cancels badly
        return 1000 + 1e-2 * torch.randn(n, dim, generator=g), labels
    if kind == "float64":
        return torch.randn(n, dim, generator=g, dtype=torch.float64), labels
    if kind == "float16":  # many ties after rounding the distances to float16
        return torch.randn(n, dim, generator=g).half(), labels
    raise ValueError(kind)


KINDS = ["randn", "repeated_rows", "unit_clusters", "far_from_origin", "float64", "float16"]


@pytest.mark.parametrize("kind", KINDS)
def test_hard_miner_equals_the_exact_reference(kind: str) -> None:
    for seed, (n, dim, n_labels) in enumerate([(2, 3, 2), (7, 1, 3), (40, 8, 4), (130, 64, 20), (64, 2, 2)]):
        features, labels = batch(kind, n, dim, n_labels, seed)
        assert mined(features, labels) == exact_hardest(features, labels), (kind, n, dim, seed)


def test_near_ties_that_float32_ranks_wrongly_are_settled_exactly() -> None:
    # far from the origin, |a|^2 + |b|^2 - 2 a.b in float32 loses everything to cancellation: it ranks the
    # negative 3 before 2 (checked below), whose exact distances to the anchor 0 are 0.3218 < 0.3705
    features = torch.tensor(
        [
            [-713.9365844726562, 552.3402709960938, 2068.3515625],
            [-713.9265747070312, 552.3502807617188, 2068.361572265625],
            [-713.8687744140625, 552.6357421875, 2068.45947265625],
            [-713.69775390625, 552.620361328125, 2068.30908203125],
        ]
    )
    labels = torch.tensor([0, 0, 1, 1])
    screen = l2_dist_mm(features, features, squared=True)[0, 2:]
    assert screen[0] > screen[1]  # the float32 screen alone would pick 3
    assert mined(features, labels) == ([0, 1, 2, 3], [1, 0, 3, 2], [2, 2, 1, 1])
    assert mined(features, labels) == exact_hardest(features, labels)


def test_equal_rows_tie_to_the_smallest_index() -> None:
    # five equal rows: every distance is exactly 0; l2_dist's cancellation used to leave some at 4e-8
    row = torch.randn(1, 8, generator=torch.Generator().manual_seed(7))
    features, labels = row.repeat(5, 1), torch.tensor([1, 0, 1, 0, 1])
    assert mined(features, labels) == ([0, 1, 2, 3, 4], [2, 3, 0, 1, 0], [1, 0, 1, 0, 1])


def test_reduced_precision_matmul_falls_back_to_float64() -> None:
    switch = torch.backends.mkldnn.matmul
    before = switch.fp32_precision
    features, labels = batch("unit_clusters", 60, 16, 5, seed=3)
    try:
        switch.fp32_precision = "bf16"  # float32 products in bfloat16: the screen's bound would not hold
        assert not _float32_matmul_is_ieee(torch.device("cpu"))
        assert mined(features, labels) == exact_hardest(features, labels)
    finally:
        switch.fp32_precision = before
    assert _float32_matmul_is_ieee(torch.device("cpu"))


def test_labels_without_anchors() -> None:
    features = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    assert mined(features, torch.tensor([0, 1, 2, 3])) == ([], [], [])  # no positives
    assert mined(features, torch.tensor([5, 5, 5, 5])) == ([], [], [])  # no negatives
    # only the items of label 0 have a positive; the singletons are still negatives
    assert mined(features, torch.tensor([0, 0, 1, 2]))[0] == [0, 1]


def test_training_step_on_a_seeded_batch_equals_the_output_before_the_screen() -> None:
    """The values printed by the miner of the float64 distance matrix (before the screen) on this batch:
    ``B = 256 x 4``, dim 384, seed 0; the positives' and negatives' sums and index-weighted sums, the loss."""
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(256).repeat_interleave(4)[torch.randperm(1024, generator=generator)]
    features = torch.randn(1024, 384, generator=generator).requires_grad_(True)
    ids_a, ids_p, ids_n = HardTripletsMiner()._sample(features.detach(), labels)
    position = torch.arange(1024)
    assert torch.equal(ids_a, position)
    assert (int(ids_p.sum()), int(ids_n.sum())) == (518221, 517934)
    assert (int((ids_p * position).sum()), int((ids_n * position).sum())) == (261832770, 263767484)
    assert (ids_p.tolist(), ids_n.tolist()) == exact_hardest(features.detach(), labels)[1:]
    loss = TripletLossWithMiner(margin=0.2, miner=HardTripletsMiner())(features, labels)
    assert loss.item() == pytest.approx(3.670027256011963, abs=1e-6)
