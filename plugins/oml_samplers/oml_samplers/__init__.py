"""oml plugin: batch samplers.

The public classes are importable from the top level (``from oml_samplers import BalanceSampler``); they
are imported lazily on first access, so that loading the plugin module (``oml_samplers.plugin``, which only
registers lazy ``"module:attr"`` strings) does not import torch. The exports and ``__all__`` come from the
plugin's table (:data:`oml_samplers.plugin.COMPONENTS`); the imports below, explicit re-exports, are for static
type checkers and IDEs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import table_exports
from oml_samplers.plugin import COMPONENTS, EXTRA_EXPORTS

if TYPE_CHECKING:
    from oml_samplers.balance import BalanceSampler as BalanceSampler
    from oml_samplers.category_balance import CategoryBalanceSampler as CategoryBalanceSampler
    from oml_samplers.distinct_category_balance import (
        DistinctCategoryBalanceSampler as DistinctCategoryBalanceSampler,
    )

__getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)
