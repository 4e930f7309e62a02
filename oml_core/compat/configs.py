"""OML's ``CONFIGS_PATH`` holds every component's default config: the plugins' config dirs behind the core's.

OML 4.0 ships the default config of every registered component in one folder, ``oml/configs/<group>/<name>.yaml``,
and code written for it reads them there (``OmegaConf.load(CONFIGS_PATH / "extractor" / "vit.yaml")``). oml keeps
the core's in ``oml_core/configs`` and each plugin's in the config dir it registers with
``oml_register_config_dirs``. ``import oml_core`` calls :func:`install_plugin_config_dirs`, which makes
:data:`oml_core.const.CONFIGS_PATH` (an :class:`~oml_core.utils.overlay_path.OverlayPath` of the core's folder)
search those dirs too, in the registry's order, with OML's group names (:data:`OML_CONFIG_GROUPS`).

The dirs are those of :func:`~oml_core.registry.default_registry` (loaded on the first lookup, not at import);
call ``default_registry.cache_clear()`` after installing a plugin in a running process.
"""

from __future__ import annotations

from typing import Any

from oml_core.const import CONFIGS_PATH

#: OML's config folders whose oml name differs: OML's ``criterion`` holds what oml's kind ``loss`` names.
OML_CONFIG_GROUPS = {"criterion": "loss"}


def plugin_config_folders() -> list[Any]:
    """The folders of the config dirs of :func:`~oml_core.registry.default_registry` (the core's first, then
    each plugin's in load order), as ``Path`` or ``Traversable``."""
    from oml_core.registry.registry import config_dir_folders, default_registry

    return config_dir_folders(default_registry().config_dirs())


def install_plugin_config_dirs() -> None:
    """Make :data:`~oml_core.const.CONFIGS_PATH` search the plugins' config dirs after the core's folder, OML's
    group names read as oml's (called by ``import oml_core``; calling it again changes nothing)."""
    CONFIGS_PATH.search_also(plugin_config_folders, aliases=OML_CONFIG_GROUPS)


__all__ = ["OML_CONFIG_GROUPS", "install_plugin_config_dirs", "plugin_config_folders"]
