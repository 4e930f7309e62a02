"""The plugin module of the ``oml_ray`` plugin: the command ``oml embed``.

:data:`COMPONENTS` is the plugin's one table: declared as ``OML_COMPONENTS``, the registry registers it, and the
package ``oml_ray`` takes its lazy exports and ``__all__`` from it and from :data:`EXTRA_EXPORTS`. The factory is
a lazy ``"module:attr"`` string: registering imports neither Ray nor torch."""

from __future__ import annotations

from types import MappingProxyType

from oml_core.utils.lazy import Component

#: The plugin's command.
COMPONENTS: tuple[Component, ...] = (
    Component(
        "command",
        "embed",
        "oml_ray.command:embed_command",
        "embed the items of a dataset component on Ray actors into restartable Parquet shards",
    ),
)

#: The other public names of ``oml_ray``: ``{name: module}``.
EXTRA_EXPORTS: MappingProxyType[str, str] = MappingProxyType(
    {"EmbedSettings": "oml_ray.embed", "EmbedResult": "oml_ray.embed", "embed_corpus": "oml_ray.embed"}
)

#: The declarations the registry reads (no hook function): the table.
OML_COMPONENTS = COMPONENTS
