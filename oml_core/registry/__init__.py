"""The plugin registry: ``Registry``, ``default_registry`` and the hook specifications."""

from oml_core.registry.entry import Entry, PluginInfo
from oml_core.registry.errors import (
    AmbiguousNameError,
    ConfigError,
    DuplicateRegistrationError,
    InterfaceError,
    MissingArgumentError,
    PluginLoadError,
    PluginWarning,
    RegistryError,
    UnexpectedArgumentError,
    UnknownNameError,
)
from oml_core.registry.kinds import KINDS, Kind
from oml_core.registry.registry import SELF_BUILT_ARGS_ATTR, Registry, default_registry, is_spec, to_plain

__all__ = [
    "KINDS",
    "SELF_BUILT_ARGS_ATTR",
    "AmbiguousNameError",
    "ConfigError",
    "DuplicateRegistrationError",
    "Entry",
    "InterfaceError",
    "Kind",
    "MissingArgumentError",
    "PluginInfo",
    "PluginLoadError",
    "PluginWarning",
    "Registry",
    "RegistryError",
    "UnexpectedArgumentError",
    "UnknownNameError",
    "default_registry",
    "is_spec",
    "to_plain",
]
