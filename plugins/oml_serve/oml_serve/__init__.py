"""oml plugin: ``oml serve``, an HTTP service (FastAPI on uvicorn) over a gallery index.

The public names are importable from the top level (``from oml_serve import create_app, ServedIndex``); they are
imported lazily on first access, so that loading the plugin module (``oml_serve.plugin``) imports neither FastAPI
nor torch. The exports and ``__all__`` come from the plugin's table (:data:`oml_serve.plugin.COMPONENTS` and
:data:`~oml_serve.plugin.EXTRA_EXPORTS`); the imports below, explicit re-exports, are for static type checkers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import table_exports
from oml_serve.plugin import COMPONENTS, EXTRA_EXPORTS

if TYPE_CHECKING:
    from oml_serve.app import create_app as create_app
    from oml_serve.batcher import MicroBatcher as MicroBatcher
    from oml_serve.command import serve_command as serve_command
    from oml_serve.service import ServedIndex as ServedIndex
    from oml_serve.settings import ServeSettings as ServeSettings

__getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)
