"""The plugin module of the ``oml_qdrant`` plugin: the Qdrant kNN backend and its default config.

:data:`COMPONENTS` is the plugin's one table: declared as ``OML_COMPONENTS``, the registry registers it, and the
package ``oml_qdrant`` takes its lazy exports and ``__all__`` from it. Factories are lazy ``"module:attr"``
strings: registering imports neither qdrant-client nor torch. The default config is
``oml_qdrant/configs/knn_backend/qdrant.yaml``."""

from __future__ import annotations

from types import MappingProxyType

from oml_core.utils.lazy import Component

#: The backend of the plugin, exported by ``oml_qdrant`` under its class name.
COMPONENTS: tuple[Component, ...] = (
    Component(
        "knn_backend",
        "qdrant",
        "oml_qdrant.indexes:QdrantKnnIndex",
        "search in a Qdrant collection: in-process, on a local path (exact) or on a server (url)",
    ),
)

#: The other public names of ``oml_qdrant``: none.
EXTRA_EXPORTS: MappingProxyType[str, str] = MappingProxyType({})

#: The declarations the registry reads (no hook function): the table, and the package of the default config.
OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://oml_qdrant.configs",)
