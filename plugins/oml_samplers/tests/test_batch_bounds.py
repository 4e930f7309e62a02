"""A sampler's batch is bounded (``oml_core.config.bounds.MAX_BATCH_SIZE``): ``n_instances=10**9`` is refused in one
line naming the counts and the limit, when the sampler is built, before any batch is drawn."""

from __future__ import annotations

import pytest
from oml_samplers import BalanceSampler, CategoryBalanceSampler, DistinctCategoryBalanceSampler

from oml_core.config.bounds import MAX_BATCH_SIZE
from oml_core.utils.errors import OmlValueError

LABELS = [0, 0, 1, 1, 2, 2, 3, 3]
LABEL2CATEGORY = {0: "a", 1: "a", 2: "b", 3: "b"}


def test_a_balance_batch_past_the_limit_is_refused():
    with pytest.raises(OmlValueError) as error:
        BalanceSampler(LABELS, n_labels=2, n_instances=10**9)
    assert str(error.value) == (
        f"n_labels x n_instances = 2 x 1000000000 = 2,000,000,000 items per batch, past the limit of "
        f"{MAX_BATCH_SIZE:,}"
    )


def test_a_balance_batch_at_the_limit_is_accepted():
    assert BalanceSampler(LABELS, n_labels=2, n_instances=MAX_BATCH_SIZE // 2).batch_size == MAX_BATCH_SIZE


@pytest.mark.parametrize(
    "make",
    [
        lambda: CategoryBalanceSampler(LABELS, LABEL2CATEGORY, n_categories=2, n_labels=2, n_instances=10**9),
        lambda: DistinctCategoryBalanceSampler(
            LABELS, LABEL2CATEGORY, n_categories=2, n_labels=2, n_instances=10**9, epoch_size=1
        ),
    ],
    ids=["category_balance", "distinct_category_balance"],
)
def test_a_category_batch_past_the_limit_is_refused(make):
    with pytest.raises(
        OmlValueError, match=r"^n_categories x n_labels x n_instances = 2 x 2 x 1000000000 = "
    ):
        make()
