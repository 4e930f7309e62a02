"""oml plugin: a k-nearest-neighbour backend on Qdrant (kind ``knn_backend``, name ``qdrant``).

``QdrantKnnIndex`` is importable from the top level and imported lazily on first access, so that loading the
plugin module (``oml_qdrant.plugin``) imports neither qdrant-client nor torch. The exports and ``__all__`` come
from the plugin's table (:data:`oml_qdrant.plugin.COMPONENTS`); the import below is for static type checkers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import table_exports
from oml_qdrant.plugin import COMPONENTS, EXTRA_EXPORTS

if TYPE_CHECKING:
    from oml_qdrant.indexes import QdrantKnnIndex as QdrantKnnIndex

__getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)
