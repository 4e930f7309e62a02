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
from oml_core.registry.registry import Registry, default_registry
from oml_core.registry.specs import SELF_BUILT_ARGS_ATTR, is_spec, to_plain
from oml_core.utils.lazy import lazy_exports
from oml_core.utils.oml_path_folders import oml_paths_folder

# OML's module paths here that live elsewhere (oml_core.registry.models): the folder of compat's tree
__path__.append(oml_paths_folder(__name__))

#: OML's names that ``oml_core.registry`` exports too (``from oml.registry import TRANSFORMS_REGISTRY``).
OML_REGISTRY_NAMES = (
    "EXTRACTORS_REGISTRY",
    "LOGGERS_REGISTRY",
    "LOSSES_REGISTRY",
    "MINERS_REGISTRY",
    "OPTIMIZERS_REGISTRY",
    "PAIRWISE_MODELS_REGISTRY",
    "POSTPROCESSORS_REGISTRY",
    "SAMPLERS_REGISTRY",
    "SCHEDULERS_REGISTRY",
    "TRANSFORMS_REGISTRY",
    "get_transforms_for_pretrained",
    "show_registry",
)

# OML's names (``from oml.registry import TRANSFORMS_REGISTRY``): views of ``default_registry()`` that the OML
# compatibility package defines (:mod:`oml_core.compat.registries`), imported on first use
__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(OML_REGISTRY_NAMES, "oml_core.compat.registries"))

__all__ = [
    "KINDS",
    "OML_REGISTRY_NAMES",
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
