"""OML 4.0's errors of the samplers, at OML's paths: ``BalanceSampler`` asserts its arguments in OML, so oml's
``ValueError`` is also an ``AssertionError``; the category samplers' message starts with OML's sentence."""

from __future__ import annotations

import pytest
from oml_core.samplers.balance import BalanceSampler
from oml_core.samplers.category_balance import CategoryBalanceSampler
from oml_core.samplers.distinct_category_balance import DistinctCategoryBalanceSampler

LABELS = [0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"n_labels": 1, "n_instances": 2},
            r"n_labels \(the number of labels in a batch\) should be > 1, got 1",
        ),
        ({"n_labels": 2, "n_instances": 1}, r"should be > 1, got 1"),
        ({"n_labels": 4, "n_instances": 2}, r"n_labels \(4\) must not exceed the number of unique labels"),
        ({"n_labels": 2.0, "n_instances": 2}, "n_labels must be an int, got float"),
    ],
)
def test_balance_sampler_errors_are_also_assertion_errors(kwargs, message):
    for caught in (AssertionError, ValueError):
        with pytest.raises(caught, match=message):
            BalanceSampler(LABELS, **kwargs)


@pytest.mark.parametrize(
    ("sampler", "extra"), [(CategoryBalanceSampler, {}), (DistinctCategoryBalanceSampler, {"epoch_size": 4})]
)
def test_a_small_category_starts_with_oml_sentence(sampler, extra):
    label2category = {0: "a", 1: "a", 2: "b"}
    with pytest.raises(
        ValueError,
        match=r"^All the categories must have at least 2 unique labels \(n_labels\): the category 'b' has only 1",
    ):
        sampler(LABELS, label2category, n_categories=1, n_labels=2, n_instances=2, **extra)
