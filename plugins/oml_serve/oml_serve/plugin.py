"""The plugin module of the ``oml_serve`` plugin: the command ``oml serve``.

:data:`COMPONENTS` is the plugin's one table: declared as ``OML_COMPONENTS``, the registry registers it, and the
package ``oml_serve`` takes its lazy exports and ``__all__`` from it and from :data:`EXTRA_EXPORTS`. The factory is
a lazy ``"module:attr"`` string: registering imports neither FastAPI nor torch."""

from __future__ import annotations

from types import MappingProxyType

from oml_core.utils.lazy import Component

#: The plugin's command.
COMPONENTS: tuple[Component, ...] = (
    Component(
        "command",
        "serve",
        "oml_serve.command:serve_command",
        "serve a gallery index over HTTP: search by upload, text or embedding, a search page, OpenAPI",
    ),
)

#: The other public names of ``oml_serve``: ``{name: module}``.
EXTRA_EXPORTS: MappingProxyType[str, str] = MappingProxyType(
    {
        "MicroBatcher": "oml_serve.batcher",
        "ServeSettings": "oml_serve.settings",
        "ServedIndex": "oml_serve.service",
        "create_app": "oml_serve.app",
    }
)

#: The declarations the registry reads (no hook function): the table.
OML_COMPONENTS = COMPONENTS
