"""oml plugin: batch samplers.

The public classes are importable from the top level (``from oml_samplers import BalanceSampler``); they
are imported lazily on first access, so that loading the plugin module (``oml_samplers.plugin``, which only
registers lazy ``"module:attr"`` strings) does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from oml_samplers.balance import BalanceSampler
    from oml_samplers.category_balance import CategoryBalanceSampler
    from oml_samplers.distinct_category_balance import DistinctCategoryBalanceSampler

_EXPORTS = {
    "BalanceSampler": "oml_samplers.balance",
    "CategoryBalanceSampler": "oml_samplers.category_balance",
    "DistinctCategoryBalanceSampler": "oml_samplers.distinct_category_balance",
}

__all__ = ["BalanceSampler", "CategoryBalanceSampler", "DistinctCategoryBalanceSampler"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
