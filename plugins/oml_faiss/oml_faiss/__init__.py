"""oml plugin: exact and approximate k-nearest-neighbour backends on faiss (kind ``knn_backend``).

The public classes are importable from the top level (``from oml_faiss import FaissHNSWIndex``); they are
imported lazily on first access, so that loading the plugin module (``oml_faiss.plugin``, which only registers
lazy ``"module:attr"`` strings) imports neither faiss nor torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from oml_faiss.indexes import (
        FaissFlatIndex,
        FaissHNSWIndex,
        FaissIVFIndex,
        FaissIVFPQIndex,
        FaissKnnIndex,
    )

_EXPORTS = {
    name: "oml_faiss.indexes"
    for name in ("FaissKnnIndex", "FaissFlatIndex", "FaissIVFIndex", "FaissHNSWIndex", "FaissIVFPQIndex")
}

__all__ = ["FaissFlatIndex", "FaissHNSWIndex", "FaissIVFIndex", "FaissIVFPQIndex", "FaissKnnIndex"]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
