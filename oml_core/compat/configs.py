"""OML's ``CONFIGS_PATH`` holds every component's default config: the plugins' config dirs behind the core's.

OML 4.0 ships the default config of every registered component in one folder, ``oml/configs/<group>/<name>.yaml``,
and code written for it reads them there (``OmegaConf.load(CONFIGS_PATH / "extractor" / "vit.yaml")``). oml keeps
the core's in ``oml_core/configs`` and each plugin's in the config dir it registers with
``oml_register_config_dirs``. :data:`CONFIGS_PATH` is an :class:`~oml_core.utils.overlay_path.OverlayPath` of the
core's folder that searches those dirs too, in the registry's order, with OML's group names
(:data:`OML_CONFIG_GROUPS`); :mod:`oml_core.const` gives it as OML's ``oml_core.const.CONFIGS_PATH``, importing this
module when that name is first read.

The dirs are those of :func:`~oml_core.registry.default_registry`, asked on each lookup (the registry is loaded on
the first one, not at import); call ``default_registry.cache_clear()`` after installing a plugin in a running
process.
"""

from __future__ import annotations

from typing import Any

from oml_core.const import OML_PATH
from oml_core.utils.overlay_path import FolderSource, OverlayPath

#: OML's config folders whose oml name differs: OML's ``criterion`` holds what oml's kind ``loss`` names.
OML_CONFIG_GROUPS = {"criterion": "loss"}


def plugin_config_folders() -> list[Any]:
    """The folders of the config dirs of :func:`~oml_core.registry.default_registry` (the core's first, then
    each plugin's in load order), as ``Path`` or ``Traversable``."""
    from oml_core.registry.registry import config_dir_folders, default_registry

    return config_dir_folders(default_registry().config_dirs())


def configs_path(core_configs: Any, folders: FolderSource = plugin_config_folders) -> OverlayPath:
    """The folder ``core_configs`` read through the folders of ``folders`` (asked on each lookup), OML's group
    names read as oml's: OML's ``CONFIGS_PATH`` with the defaults."""
    overlay = OverlayPath(core_configs)
    overlay.search_also(folders, aliases=OML_CONFIG_GROUPS)
    return overlay


#: OML's folder of every default config, ``CONFIGS_PATH / <group> / "<name>.yaml"``: the core's folder
#: ``oml_core/configs`` (its ``os.fspath`` and ``str``, and the core's own files) read through the plugins' config
#: dirs, OML's group ``criterion`` naming oml's ``loss``.
CONFIGS_PATH = configs_path(OML_PATH / "configs")

__all__ = ["CONFIGS_PATH", "OML_CONFIG_GROUPS", "configs_path", "plugin_config_folders"]
