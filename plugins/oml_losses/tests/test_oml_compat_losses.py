"""OML 4.0's names and signatures of the losses and miners, at OML's paths (``oml_core.losses.*``,
``oml_core.miners.*``), on hand-computed cases: ``get_available_triplets(_naive)``, ``ArcFaceLoss.criterion``
and its ``AssertionError``s, the miners' ``_sample_from_distmat``, ``MinerWithBank._prepare_logs`` and
``HardClusterMiner``'s helpers."""

from __future__ import annotations

import random
from itertools import permutations

import pytest
import torch
from oml_core.losses.arcface import ArcFaceLoss
from oml_core.miners.inbatch_all_tri import (
    AllTripletsMiner,
    get_available_triplets,
    get_available_triplets_naive,
)
from oml_core.miners.inbatch_hard_tri import HardTripletsMiner
from oml_core.miners.inbatch_nhard_tri import NHardTripletsMiner
from oml_core.miners.miner_with_bank import MinerWithBank
from oml_losses.miners.inbatch_hard_cluster import HardClusterMiner
from oml_losses.reduction import get_reduced as plugin_get_reduced
from oml_losses.surrogate_precision import surrogate_precision as plugin_surrogate_precision
from torch import nn

from oml_core.functional.losses import get_reduced, surrogate_precision


def test_the_plugin_takes_the_reduction_and_surrogate_precision_from_the_core():
    assert plugin_surrogate_precision is surrogate_precision and plugin_get_reduced is get_reduced


def test_arcface_criterion_is_the_cross_entropy_it_uses():
    loss = ArcFaceLoss(2, 3, m=0.3, s=4.0, reduction="sum")
    assert isinstance(loss.criterion, nn.CrossEntropyLoss) and loss.criterion.reduction == "sum"
    x, y = torch.tensor([[1.0, 0.5], [-1.0, 2.0]]), torch.tensor([2, 0])
    assert torch.allclose(loss(x, y), loss.criterion(loss.logits(x, y), y))
    assert "criterion.weight" not in loss.state_dict()  # the cross-entropy holds no weights


@pytest.mark.parametrize("epsilon", [-1, 1, 1.5])
def test_arcface_bad_smoothing_is_also_an_assertion_error(epsilon):
    with pytest.raises(AssertionError, match=r"smoothing_epsilon must be in \[0, 1\)"):
        ArcFaceLoss(1, 1, smoothing_epsilon=epsilon)
    with pytest.raises(ValueError, match=r"smoothing_epsilon must be in \[0, 1\)"):
        ArcFaceLoss(1, 1, smoothing_epsilon=epsilon)


def test_arcface_smoothing_none_is_no_smoothing_and_bad_labels_assert():
    torch.manual_seed(0)
    plain, none = ArcFaceLoss(2, 2), ArcFaceLoss(2, 2, smoothing_epsilon=None)
    none.load_state_dict(plain.state_dict())
    x, y = torch.tensor([[1.0, 0.0]]), torch.tensor([1])
    assert torch.equal(plain(x, y), none(x, y))
    with pytest.raises(AssertionError, match=r"y must hold labels in \[0, 2\)"):
        plain(x, torch.tensor([2]))


LABELS = [0, 0, 1, 1, 1]


def naive_triplets(labels: list[int]) -> set[tuple[int, int, int]]:
    return {
        (a, p, n)
        for a, p in permutations(range(len(labels)), 2)
        for n in range(len(labels))
        if labels[a] == labels[p] and labels[n] != labels[a]
    }


def test_get_available_triplets_and_the_naive_reference():
    # label 0: 2 ordered pairs x 3 negatives; label 1: 6 ordered pairs x 2 negatives -> 18 triplets
    expected = naive_triplets(LABELS)
    assert len(expected) == 18
    ids = get_available_triplets(LABELS)
    assert set(zip(*ids)) == expected and all(isinstance(i, list) for i in ids)
    assert set(zip(*get_available_triplets_naive(LABELS))) == expected
    state = random.getstate()
    random.seed(3)
    five = get_available_triplets_naive(LABELS, max_out_triplets=5)
    random.setstate(state)
    assert len(set(zip(*five))) == 5 and set(zip(*five)) <= expected
    some = get_available_triplets(LABELS, max_out_triplets=4, generator=torch.Generator().manual_seed(0))
    assert len(set(zip(*some))) == 4 and set(zip(*some)) <= expected
    assert list(zip(*some)) == sorted(zip(*some))  # kept in lexicographic order
    with pytest.raises(ValueError, match="no triplet is available"):
        get_available_triplets_naive([0, 1, 2])


def test_all_triplets_miner_sample_needs_no_features():
    ids = AllTripletsMiner()._sample(labels=LABELS)
    assert set(zip(*(t.tolist() for t in ids))) == naive_triplets(LABELS)
    with pytest.raises(TypeError, match="needs labels"):
        AllTripletsMiner()._sample(torch.zeros(5, 2))


# distances of 4 items, labels 0, 0, 1, 1 (OML's manual example)
DISTMAT = torch.tensor(
    [[0.0, 0.3, 0.2, 0.4], [0.3, 0.0, 0.4, 0.8], [0.2, 0.4, 0.0, 0.5], [0.4, 0.8, 0.5, 0.0]]
)


def test_hard_miner_sample_from_distmat():
    ids_a, ids_p, ids_n = HardTripletsMiner._sample_from_distmat(DISTMAT, [0, 0, 1, 1])
    # 0: its positive 1, its closest negative 2 (0.2); 1: 0, then 2 (0.4 < 0.8); 2: 3, then 0; 3: 2, then 0
    assert (ids_a, ids_p, ids_n) == ([0, 1, 2, 3], [1, 0, 3, 2], [2, 2, 0, 0])


def test_nhard_miner_sample_from_distmat_with_ignored_anchors():
    miner = NHardTripletsMiner(n_positive=1, n_negative=2)
    ids = miner._sample_from_distmat(
        DISTMAT, torch.tensor([0, 0, 1, 1]), ignore_anchor_mask=torch.tensor([0, 1, 1, 0])
    )
    # anchors 0 and 3 only; 0: positive 1, negatives 2 (0.2) and 3 (0.4); 3: positive 2, negatives 0 (0.4), 1 (0.8)
    assert set(zip(*ids)) == {(0, 1, 2), (0, 1, 3), (3, 2, 0), (3, 2, 1)}
    assert all(isinstance(i, list) for i in ids)
    assert miner._sample_from_distmat(DISTMAT, [0, 0, 1, 1]) == tuple(
        t.tolist() for t in miner.sample_from_distmat(DISTMAT, torch.tensor([0, 0, 1, 1]))
    )


def test_miner_with_bank_prepare_logs():
    # items 0, 3, 6 are the batch's, the others the bank's
    in_bank = torch.tensor([0, 1, 1, 0, 1, 1, 0, 1, 1])
    logs = MinerWithBank._prepare_logs([0, 0, 3, 6], [1, 3, 4, 7], [2, 2, 5, 8], ignore_anchor_mask=in_bank)
    # anchor 0: positives {1 (bank), 3 (batch)}, negatives {2 (bank)}; anchors 3, 6: one of each from the bank
    assert logs == {
        "positives_from_bank": 1.0,
        "positives_from_batch": pytest.approx(1 / 3),
        "negatives_from_bank": 1.0,
        "negatives_from_batch": 0.0,
    }
    assert MinerWithBank._prepare_logs([], [], [], ignore_anchor_mask=in_bank) == {}


def test_hard_cluster_miner_helpers():
    mask = HardClusterMiner._get_labels_mask([2, 0, 2, 1])
    assert mask.tolist() == [
        [False, True, False, False],
        [False, False, False, True],
        [True, False, True, False],
    ]
    grouped = torch.tensor([[[0.0, 0.0], [2.0, 0.0]], [[1.0, 1.0], [1.0, 5.0]]])
    means = grouped.mean(dim=1)  # [1, 0] and [1, 3]
    assert HardClusterMiner._count_intra_label_distances(grouped, means).tolist() == [[1.0, 1.0], [4.0, 4.0]]
    assert HardClusterMiner._count_inter_label_distances(means).tolist() == [[0.0, 3.0], [3.0, 0.0]]
