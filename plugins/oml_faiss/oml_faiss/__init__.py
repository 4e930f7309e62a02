"""oml plugin: exact and approximate k-nearest-neighbour backends on faiss (kind ``knn_backend``).

The public classes are importable from the top level (``from oml_faiss import FaissHNSWIndex``); they are
imported lazily on first access, so that loading the plugin module (``oml_faiss.plugin``, which only registers
lazy ``"module:attr"`` strings) imports neither faiss nor torch. The exports and ``__all__`` come from the
plugin's table (:data:`oml_faiss.plugin.COMPONENTS` and :data:`~oml_faiss.plugin.EXTRA_EXPORTS`); the imports
below, explicit re-exports, are for static type checkers and IDEs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import table_exports
from oml_faiss.plugin import COMPONENTS, EXTRA_EXPORTS

if TYPE_CHECKING:
    from oml_faiss.indexes import FaissFlatIndex as FaissFlatIndex
    from oml_faiss.indexes import FaissHNSWIndex as FaissHNSWIndex
    from oml_faiss.indexes import FaissIVFIndex as FaissIVFIndex
    from oml_faiss.indexes import FaissIVFPQIndex as FaissIVFPQIndex
    from oml_faiss.indexes import FaissKnnIndex as FaissKnnIndex

__getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)
