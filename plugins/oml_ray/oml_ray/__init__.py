"""oml plugin: ``oml embed``, the items of a dataset component embedded by Ray Data actors into Parquet shards.

The exports and ``__all__`` come from the plugin's table (:data:`oml_ray.plugin.COMPONENTS`) and are imported
lazily, so that loading the plugin module (``oml_ray.plugin``) imports neither Ray nor torch; the import below is
for static type checkers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import table_exports
from oml_ray.plugin import COMPONENTS, EXTRA_EXPORTS

if TYPE_CHECKING:
    from oml_ray.command import embed_command as embed_command
    from oml_ray.embed import EmbedResult as EmbedResult
    from oml_ray.embed import EmbedSettings as EmbedSettings
    from oml_ray.embed import embed_corpus as embed_corpus

__getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)
