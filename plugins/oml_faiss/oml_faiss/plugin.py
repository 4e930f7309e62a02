"""Hook implementations of the ``oml_faiss`` plugin: the faiss kNN backends and their default configs.

Factories are lazy ``"module:attr"`` strings: registering imports neither faiss nor torch. The default config
of a backend ``name`` is ``oml_faiss/configs/knn_backend/<name>.yaml``.
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback

#: ``(name, factory, description)`` of every backend this plugin registers.
KNN_BACKENDS = (
    ("faiss_flat", "oml_faiss.indexes:FaissFlatIndex", "exact search by faiss's brute force (IndexFlat)"),
    (
        "faiss_ivf",
        "oml_faiss.indexes:FaissIVFIndex",
        "approximate search in an inverted file of full vectors (IndexIVFFlat: nlist, nprobe)",
    ),
    (
        "faiss_hnsw",
        "oml_faiss.indexes:FaissHNSWIndex",
        "approximate search in an HNSW graph (IndexHNSWFlat: M, efConstruction, efSearch)",
    ),
    (
        "faiss_ivfpq",
        "oml_faiss.indexes:FaissIVFPQIndex",
        "approximate search in an inverted file of product-quantised codes, re-ranked (IndexIVFPQ + refine)",
    ),
)


@hookimpl
def oml_register_knn_backends(register: RegisterCallback) -> None:
    """Register ``faiss_flat``, ``faiss_ivf``, ``faiss_hnsw`` and ``faiss_ivfpq``."""
    for name, factory, description in KNN_BACKENDS:
        register(name, factory, description=description)


@hookimpl
def oml_register_config_dirs(register: RegisterCallback) -> None:
    """The default configs: ``knn_backend/<name>.yaml``."""
    register("pkg://oml_faiss.configs")
