"""The hydra config source ``oml://``: OML's config groups, the core's and every loaded oml plugin's."""

from __future__ import annotations

import io
from typing import Any

from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource


def oml_configs_folder() -> Any:
    """OML's ``CONFIGS_PATH`` as one folder: an :class:`~oml_core.utils.overlay_path.OverlayPath` of the core's
    configs (``oml_core/configs``), then the config dirs of :func:`~oml_core.registry.default_registry` in load
    order (the first folder that has ``<group>/<option>.yaml`` gives it), with OML's group names read as oml's
    (:data:`~oml_core.compat.configs.OML_CONFIG_GROUPS`: ``criterion/arcface`` is ``loss/arcface.yaml``). The
    plugins' folders are found once, when it is called."""
    from oml_core.compat.configs import configs_path, plugin_config_folders
    from oml_core.config.compose import OML_CONFIGS_DIR

    folders = plugin_config_folders()
    return configs_path(OML_CONFIGS_DIR, lambda: folders)


class OmlConfigSource(ConfigSource):
    """The configs of OML's ``CONFIGS_PATH`` as a hydra config source (scheme ``oml``).

    The folder it reads is :func:`oml_configs_folder`'s; it serves its config groups only, those named as a kind
    of component (``sampler``, ``loss``, ...; :data:`~oml_core.registry.kinds.KINDS`) or as OML names one
    (``criterion``), not the pipeline configs at its top level. A lookup of any other name (another hydra app's
    ``hydra/run``, ``db/mysql``) is answered without loading a plugin; the plugins are loaded
    (``OML_LOAD_PLUGINS``, ``OML_STRICT_PLUGINS`` apply) on the first lookup in an oml group, and their folders
    are found once per source.

    Args:
        provider: The provider hydra names the source with.
        path: The search-path entry (``oml://configs``).
    """

    def __init__(self, provider: str, path: str) -> None:
        super().__init__(provider=provider, path=path)
        self._folder: Any = None

    @staticmethod
    def scheme() -> str:
        """``oml``: the scheme of the entries this source reads."""
        return "oml"

    def _configs(self) -> Any:
        """The folder of OML's configs (:func:`oml_configs_folder`, on the first call)."""
        if self._folder is None:
            self._folder = oml_configs_folder()
        return self._folder

    @staticmethod
    def _in_oml_group(config_path: str) -> bool:
        """Whether ``config_path`` (``sampler``, ``criterion/arcface``) is in a config group of oml: its first
        part a kind of component or OML's name of one."""
        from oml_core.compat.configs import OML_CONFIG_GROUPS
        from oml_core.registry.kinds import KINDS

        first = config_path.strip("/").partition("/")[0]
        return first in KINDS or first in OML_CONFIG_GROUPS

    def available(self) -> bool:
        """``True``: the source is oml-core's own, installed with this plugin (nothing is loaded to say so)."""
        return True

    def load_config(self, config_path: str) -> ConfigResult:
        """The config ``config_path`` (``sampler/balance``; ``.yaml`` optional) of the first folder that has it.

        Raises:
            ConfigLoadError: no folder has it, or it is in no config group of oml.
            ConfigError: the file is not UTF-8 text (one line naming the file, line and column).
            yaml.YAMLError: the file does not parse (its marks name the file).
        """
        from omegaconf import OmegaConf

        from oml_core.config.compose import read_config_text

        name = self._normalize_file_name(config_path)
        found = self._configs() / name if self._in_oml_group(name) else None
        if found is None or not found.is_file():
            raise ConfigLoadError(f"Config not found : {name}")
        text = read_config_text(found)
        stream = io.StringIO(text)
        stream.name = str(found)  # yaml's errors name the file
        return ConfigResult(
            config=OmegaConf.load(stream),
            path=f"{self.scheme()}://{self.path}",
            provider=self.provider,
            header=ConfigSource._get_header_dict(text),
        )

    def is_group(self, config_path: str) -> bool:
        """Whether ``config_path`` is a config group of oml that a folder holds (``criterion`` read as ``loss``)."""
        return self._in_oml_group(config_path) and bool((self._configs() / config_path).is_dir())

    def is_config(self, config_path: str) -> bool:
        """Whether a folder holds the config ``config_path`` (``.yaml`` optional) of a config group of oml."""
        name = self._normalize_file_name(config_path)
        return self._in_oml_group(name) and bool((self._configs() / name).is_file())

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        """The groups and configs in the group ``config_path`` of every folder, sorted; at the top level, oml's
        config groups, OML's names of them too (``criterion``) where oml's group exists."""
        from oml_core.compat.configs import OML_CONFIG_GROUPS

        if config_path.strip("/") and not self._in_oml_group(config_path):
            return []
        folder = self._configs() / config_path
        names = [entry.name for entry in folder.iterdir()] if folder.is_dir() else []
        if config_path in ("", "/"):
            names += [alias for alias in OML_CONFIG_GROUPS if folder.is_dir() and (folder / alias).is_dir()]
        found: list[str] = []
        for name in names:
            self._list_add_result(
                files=found,
                file_path=f"{config_path}/{name}" if config_path else name,
                file_name=name,
                results_filter=results_filter,
            )
        return sorted(set(found))
