"""The plugin module of the ``oml_faiss`` plugin: the faiss kNN backends and their default configs.

:data:`COMPONENTS` is the plugin's one table: declared as ``OML_COMPONENTS``, the registry registers it, and the
package ``oml_faiss`` takes its lazy exports and ``__all__`` from it and from :data:`EXTRA_EXPORTS`. Factories are
lazy ``"module:attr"`` strings: registering imports neither faiss nor torch. The default config of a backend
``name`` is ``oml_faiss/configs/knn_backend/<name>.yaml``."""

from __future__ import annotations

from types import MappingProxyType

from oml_core.utils.lazy import Component

#: Every backend of the plugin, each exported by ``oml_faiss`` under its class name.
COMPONENTS: tuple[Component, ...] = (
    Component(
        "knn_backend",
        "faiss_flat",
        "oml_faiss.indexes:FaissFlatIndex",
        "exact search by faiss's brute force (IndexFlat)",
    ),
    Component(
        "knn_backend",
        "faiss_ivf",
        "oml_faiss.indexes:FaissIVFIndex",
        "approximate search in an inverted file of full vectors (IndexIVFFlat: nlist, nprobe)",
    ),
    Component(
        "knn_backend",
        "faiss_hnsw",
        "oml_faiss.indexes:FaissHNSWIndex",
        "approximate search in an HNSW graph (IndexHNSWFlat: M, efConstruction, efSearch)",
    ),
    Component(
        "knn_backend",
        "faiss_ivfpq",
        "oml_faiss.indexes:FaissIVFPQIndex",
        "approximate search in an inverted file of product-quantised codes, re-ranked (IndexIVFPQ + refine)",
    ),
)

#: The other public names of ``oml_faiss`` (the backends' base class): ``{name: module}``.
EXTRA_EXPORTS: MappingProxyType[str, str] = MappingProxyType({"FaissKnnIndex": "oml_faiss.indexes"})

#: The declarations the registry reads (no hook function): the table, and the package of the default configs
#: (``<kind>/<name>.yaml``).
OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://oml_faiss.configs",)
