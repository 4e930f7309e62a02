"""The door through which a run's config enters, once: :func:`validate_config` turns a dict, a ``DictConfig`` or
a typed config into the pipeline's schema object (:mod:`oml_core.config.schemas`), every key, type and range
checked; :func:`check_component_arguments` checks every component's arguments against its factory's
annotations (``criterion.args.margin: expected float, got 'abc'``, see :mod:`oml_core.registry.arg_types`).
"""

from __future__ import annotations

import difflib
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass
from typing import Any, cast

from oml_core.config.bounds import check_value_bounds
from oml_core.config.compose import resolved_config, unresolvable_config_error
from oml_core.config.rules import KIND, ComponentSpec, check_keys, validated
from oml_core.config.schemas import ConfigSchema, schema_of
from oml_core.registry import ConfigError, Registry
from oml_core.registry.registry import check_spec_argument_types

#: Top-level keys that belong to hydra, not to a pipeline (OML's configs have a ``hydra:`` section).
HYDRA_KEYS = ("hydra",)


def as_config(cfg: Any) -> dict[str, Any]:
    """A pipeline config (dict or ``DictConfig``) as a plain dict with interpolations resolved, without hydra's
    own section (:data:`HYDRA_KEYS`, whose interpolations such as ``${hydra:runtime.cwd}`` resolve only inside
    a hydra run).

    Raises:
        ConfigError: the config is not a mapping, or an interpolation does not resolve (one line naming the key
            and the reference, :func:`~oml_core.config.compose.unresolvable_config_error`).
    """
    from omegaconf import DictConfig, OmegaConf

    if isinstance(cfg, DictConfig):
        if any(key in cfg for key in HYDRA_KEYS):
            unresolved = OmegaConf.to_container(cfg, resolve=False)
            assert isinstance(unresolved, dict)  # a DictConfig's container is a dict
            cfg = OmegaConf.create({k: v for k, v in unresolved.items() if k not in HYDRA_KEYS})
    elif isinstance(cfg, Mapping):
        cfg = {k: v for k, v in cfg.items() if k not in HYDRA_KEYS}
    plain = resolved_config(cfg)
    if not isinstance(plain, Mapping):
        raise ConfigError(f"a pipeline config must be a mapping, got {type(cfg).__name__}")
    return dict(plain)


def validate_config(cfg: Mapping[str, Any] | ConfigSchema | Any, pipeline: str) -> ConfigSchema:
    """Check a config of ``pipeline`` against its schema, before anything is built: the door through which a
    run's config enters, once.

    ``cfg`` is a dict, a ``DictConfig`` (its interpolations resolved, hydra's section left out) or a typed config
    (a :class:`ConfigSchema`, e.g. this function's result), whose values are checked again like a dict's (an
    object built by hand is checked too). In order: every top-level key is one the pipeline knows (or, where the
    schema allows them, a variable of the user's, see :func:`without_user_variables`), the config is within the
    bounds of a config (:func:`~oml_core.config.bounds.check_value_bounds`: values, nesting, lists), every
    required key is there (the messages of :func:`~oml_core.config.rules.check_keys` and
    :func:`~oml_core.config.rules.require`), every value fits its field's rule (in the
    schema's order; inside a mapping value, its keys likewise), then the rules across keys
    (``check_combination``; for a pipeline, that the run's folder lies inside ``logs_root``). Component arguments
    are :func:`check_component_arguments`'s business.

    Returns:
        An instance of the pipeline's schema: every key, the defaults filling the optional ones the config leaves
        out; specs as :class:`ComponentSpec`, paths as strings.

    Raises:
        ConfigError: the first problem, in one line naming the key, the value and what is expected
            (``max_epochs: expected a positive int, got 'abc'``).
        ValueError: no pipeline is called ``pipeline``.
    """
    schema = schema_of(pipeline)
    if isinstance(cfg, ConfigSchema):
        cfg = _unstructured(cfg)
    if schema.user_variables:
        values = without_user_variables(cfg, [f.name for f in fields(schema)], pipeline)
    else:
        values = as_config(cfg)
    check_value_bounds(values, pipeline)
    config = validated(schema, values)
    config.check_combination()
    return config


def _unstructured(value: Any) -> Any:
    """``value`` (a typed config, or one of its values) as a config file gives it: dataclasses (a
    :class:`ComponentSpec` too) and mappings as dicts, tuples as lists, every other value as it is."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _unstructured(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {key: _unstructured(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_unstructured(item) for item in value]
    return value


#: How alike (difflib's ratio) an unknown top-level key and a known one must be for the unknown key to be taken
#: for a misspelling of the known one (``max_epoch``, ``valid_perod``, ``scheduler``: errors) rather than a
#: variable of the user's (``hydra_dir``, ``extractor_weights`` in OML's configs: ignored).
MISSPELLING_CUTOFF = 0.7
#: A hydra defaults list, applied only when hydra composes the config.
DEFAULTS_KEY = "defaults"
_INTERPOLATION = re.compile(r"\$\{\s*([A-Za-z_][\w-]*)")


def without_user_variables(
    cfg: Mapping[str, Any] | Any, known: Sequence[str], pipeline: str
) -> dict[str, Any]:
    """The config as a plain dict (interpolations resolved) of the keys that are ``pipeline``'s own, after
    the checks of the keys that are not.

    OML's pipelines read the keys they know and ignore the others, and OML's configs use that: ``hydra_dir``
    (used by the ``hydra:`` section), ``extractor_weights`` (interpolated into two specs). So a top-level key
    that the pipeline does not know is:

    - an error (one line, ``did you mean``) when it looks like a misspelling of a known key (difflib's ratio at
      least :data:`MISSPELLING_CUTOFF`: ``max_epoch``, ``valid_perod``) and no interpolation refers to it;
    - ignored without a word when it is hydra's (:data:`HYDRA_KEYS`) or an interpolation of the config refers to
      it (``${extractor_weights}``): a variable of the user's;
    - ignored with a warning naming it otherwise; a ``defaults`` list with a warning that only hydra's
      composition applies it (``oml COMMAND --config-path DIR --config-name NAME``).

    Raises:
        ConfigError: a misspelt key; the config is not a mapping.
    """
    from omegaconf import DictConfig, OmegaConf

    # a ListConfig is no mapping: as_config rejects it below
    is_omegaconf = isinstance(cfg, DictConfig)
    unresolved: Mapping[Any, Any]
    if is_omegaconf:
        # a DictConfig's container is a dict
        unresolved = cast(dict[Any, Any], OmegaConf.to_container(cfg, resolve=False))
    elif isinstance(cfg, Mapping):
        unresolved = dict(cfg)
    else:
        unresolved = as_config(cfg)  # not a mapping: as_config names what it is
    own = {key: value for key, value in unresolved.items() if key not in HYDRA_KEYS}
    unknown = [str(key) for key in own if key not in known]
    if unknown:
        referenced = _interpolated_keys(unresolved)  # the hydra section's references too (hydra_dir)
        for key in unknown:
            if key in referenced:
                continue
            if key == DEFAULTS_KEY:
                warnings.warn(
                    f"{pipeline}: the config's defaults list is ignored: only hydra's composition applies it "
                    "(oml COMMAND --config-path DIR --config-name NAME)",
                    stacklevel=4,
                )
                continue
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=MISSPELLING_CUTOFF)
            if close:
                check_keys({key: None}, known, pipeline)
            warnings.warn(
                f"{pipeline}: the config key {key!r} is not one of the pipeline's; it is ignored",
                stacklevel=4,
            )
    if not is_omegaconf:
        return {key: value for key, value in as_config(own).items() if key in known}
    full = OmegaConf.create(
        own
    )  # the user's variables stay for the interpolations, but only known keys resolve
    return {key: _resolved(full, key) for key in full if isinstance(key, str) and key in known}


def _resolved(cfg: Any, key: str) -> Any:
    """The value of ``cfg[key]`` with its interpolations resolved, as plain containers.

    Raises:
        ConfigError: an interpolation does not resolve (``seed: ${nope}``): one line naming the key and the
            reference (:func:`~oml_core.config.compose.unresolvable_config_error`).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        value = cfg[key]
        return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    except OmegaConfBaseException as e:
        raise unresolvable_config_error(e) from None


def _interpolated_keys(cfg: Any) -> set[str]:
    """The top-level keys that interpolations (``${key}``, ``${key.sub}``) anywhere in ``cfg`` refer to (a
    ``DictConfig`` is read without resolving)."""
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(cfg, resolve=False) if OmegaConf.is_config(cfg) else cfg
    found: set[str] = set()
    stack = [plain]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, str):
            found.update(_INTERPOLATION.findall(item))
    return found


def check_component_arguments(config: Any, registry: Registry, key: str = "") -> None:
    """Check the argument types of every component of a checked ``config`` (:func:`validate_config`'s result),
    nested specs included, against the annotations of their factories in ``registry``, before any is built; then
    the components together (:meth:`ConfigSchema.check_components`: a training run's plugin callbacks).

    Raises:
        ConfigError: ``<key>.args.<argument>: expected <annotation>, got <value>``
            (``criterion.args.margin: expected float, got 'abc'``); see
            :func:`~oml_core.registry.registry.check_spec_argument_types`.
        RegistryError: an unknown component name (the registry's message).
    """
    for f in fields(config):
        value = getattr(config, f.name)
        if value is None:
            continue
        if KIND in f.metadata and isinstance(value, list):  # a list of specs (specs())
            for i, item in enumerate(value):
                check_spec_argument_types(registry, f.metadata[KIND], item, f"{key}{f.name}[{i}]")
        elif KIND in f.metadata:
            check_spec_argument_types(registry, f.metadata[KIND], value, f"{key}{f.name}")
        elif is_dataclass(value) and not isinstance(value, ComponentSpec):
            check_component_arguments(value, registry, f"{key}{f.name}.")
    if isinstance(config, ConfigSchema):
        config.check_components(registry)


__all__ = [
    "DEFAULTS_KEY",
    "HYDRA_KEYS",
    "MISSPELLING_CUTOFF",
    "as_config",
    "check_component_arguments",
    "validate_config",
    "without_user_variables",
]
