"""``check_criterion_fits``: a classification loss that does not fit the extractor or the labels is a one-line
config error before training; other losses are not checked."""

from __future__ import annotations

import pytest
from oml_losses import ArcFaceLoss, ArcFaceLossWithMLP, TripletLossWithMiner

from oml_core.lightning.pipelines.shared.training import check_criterion_fits
from oml_core.registry import ConfigError


def test_a_fitting_arcface_passes():
    check_criterion_fits(ArcFaceLoss(in_features=8, num_classes=3), 8, [0, 2, 1, 1], "p")


@pytest.mark.parametrize(
    "labels, message",
    [
        (
            [0, 1, 3],
            r"p: criterion.args.num_classes=3, but the training labels range over \[0, 3\] \(3 distinct\)",
        ),
        ([-1, 0, 1], r"range over \[-1, 1\] \(3 distinct\)"),
    ],
)
def test_labels_outside_the_classes_are_named(labels, message):
    with pytest.raises(ConfigError, match=message):
        check_criterion_fits(ArcFaceLoss(in_features=8, num_classes=3), 8, labels, "p")


def test_in_features_must_be_the_extractors_feat_dim_with_or_without_mlp():
    with pytest.raises(
        ConfigError, match=r"^p: criterion.args.in_features=8, but the extractor gives 16-dim"
    ):
        check_criterion_fits(ArcFaceLoss(in_features=8, num_classes=3), 16, [0], "p")
    with_mlp = ArcFaceLossWithMLP(in_features=16, num_classes=3, mlp_features=[4, 2])
    assert (with_mlp.in_features, with_mlp.num_classes) == (16, 3)
    check_criterion_fits(with_mlp, 16, [0, 1, 2], "p")
    with pytest.raises(ConfigError, match="num_classes=3, but the training labels range over"):
        check_criterion_fits(with_mlp, 16, [0, 5], "p")


def test_losses_and_extractors_without_the_attributes_are_not_checked():
    check_criterion_fits(TripletLossWithMiner(margin=0.1), 16, [-5, 100], "p")
    check_criterion_fits(ArcFaceLoss(in_features=8, num_classes=3), None, [0, 1], "p")
