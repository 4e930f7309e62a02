"""Small helpers shared by the core and every plugin.

The helpers are imported lazily on first access (PEP 562), so that ``oml_core.utils.lazy``, which every
plugin package uses for its own lazy exports, can be imported without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from oml_core.utils.indexing import assign_2d, take_2d
    from oml_core.utils.misc_torch import pairwise_dist
    from oml_core.utils.pca import PCA

_EXPORTS = {
    "PCA": "oml_core.utils.pca",
    "assign_2d": "oml_core.utils.indexing",
    "pairwise_dist": "oml_core.utils.misc_torch",
    "take_2d": "oml_core.utils.indexing",
}

__all__ = ["PCA", "assign_2d", "pairwise_dist", "take_2d"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
