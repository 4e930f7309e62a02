"""The hydra search-path plugin of oml-core: every hydra app's search path ends with ``oml://configs``."""

from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

#: The search-path entry of OML's config groups (read by :class:`~.config_source.OmlConfigSource`).
OML_CONFIGS_ENTRY = "oml://configs"
#: The provider hydra shows for the entry (``--info searchpath``).
OML_CONFIGS_PROVIDER = "oml-core"


class OmlSearchPathPlugin(SearchPathPlugin):
    """Appends :data:`OML_CONFIGS_ENTRY` to the config search path of every hydra app of the environment.

    Hydra calls it when it builds an app's search path: after the app's own config dir (``config_path``), before
    the entries of the primary config's ``hydra.searchpath``. The app's own configs win over oml's; an option
    that both oml and a folder of ``hydra.searchpath`` have is oml's. The entry is only a name: nothing is read
    until hydra looks a config up in it.
    """

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        """Append ``oml://configs`` to ``search_path`` (once, whatever the number of calls)."""
        if not any(element.path == OML_CONFIGS_ENTRY for element in search_path.get_path()):
            search_path.append(provider=OML_CONFIGS_PROVIDER, path=OML_CONFIGS_ENTRY)
