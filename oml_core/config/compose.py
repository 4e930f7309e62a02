"""Composing a pipeline config with hydra: oml's configs (or the user's), the config dirs of the plugins, and
the command line's overrides, where ``GROUP@KEY=OPTION`` *replaces* a component.

Hydra merges a config group option into a key that the primary config already sets, so that
``+loss@criterion=arcface`` on a config whose ``criterion`` is a triplet loss keeps the triplet loss's
``margin`` and ``miner`` among ArcFace's arguments. oml's configs keep OML's inline ``{name, args}`` specs,
so :func:`compose_config` gives the override ``GROUP@KEY=OPTION`` (no ``+``) the meaning a user expects: the
value of ``KEY`` becomes the option ``GROUP/OPTION.yaml`` of the config search path, whole, e.g.::

    oml train loss@criterion=arcface criterion.args.num_classes=4 criterion.args.in_features=512
    oml train miner@criterion.args.miner=hard_triplets

The replacements are made first, then the overrides of the replaced keys (``criterion.args.num_classes=4``),
in their order on the command line, whatever their place among the replacements. An override of a replaced key
itself follows hydra's order, the last one wins: ``max_epochs=3 'max_epochs={a: 1}'`` sets the mapping (which the
typed check refuses), ``'max_epochs={a: 1}' max_epochs=3`` sets 3. Where the primary config
selects ``GROUP@KEY`` in its own defaults list, the override is hydra's own (it switches that option).

``KEY=null`` is a replacement too (by null): hydra takes ``sampler=null`` for a choice in the config group
``sampler``, which plugins register, and refuses it; OML's configs use it for plain batches of ``bs_train``.
So are ``KEY={...}`` (hydra would merge the mapping into the value there, and refuse a key it lacks):
``'extractor={name: my_net, args: {dim: 32}}'`` and ``'extractor.args={dim: 32}'`` set the value whole; and
``KEY.name=OTHER`` where ``KEY`` holds the spec of another component: ``extractor.name=vit`` puts ``vit``'s
default config at ``extractor`` (the arguments of ``resnet`` would not fit it), then the overrides under
``extractor`` apply; a component without a default config is refused with the whole-spec form to use.

The primary config's own ``hydra.searchpath`` is kept (OML's ``pkg://oml.configs`` read as
``pkg://oml_core.configs``), before the plugins' config dirs, and its ``hydra:`` section is put back into the
composed config as written (hydra drops it), so that the pipelines know which of the config's keys it uses.

Every error of the composition is a :class:`~oml_core.registry.ConfigError` with a one-line message that names
the override, key or file at fault, in oml's words rather than hydra's advice:

- an override that does not parse (``max_epochs=[1,``): ``bad override 'max_epochs=[1,': <why>``, before any
  config is read;
- an override of a key the config does not have (``max_epoch=1``): ``unknown config key 'max_epoch'; did you
  mean 'max_epochs'?``, then the known keys at that level and, last, how to add a new key (``+KEY=VALUE``);
- a value of a component's key that is no spec (``extractor=5``, ``criterion=[1]``, ``extractor=vit``; hydra takes
  the key for its config group): what the key takes, ``KEY.name=NAME`` or ``'KEY={name: NAME, args: {...}}'``;
- a config or option that does not exist: its name, the close matches and the options there are;
- a yaml file that does not parse: the file, line and column (1-based) and yaml's reason.
"""

from __future__ import annotations

import difflib
import re
import tempfile
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oml_core.config.bounds import check_config_files, check_override_bounds
from oml_core.registry import ConfigError, Registry, RegistryError, to_plain
from oml_core.utils.text import one_line, undecodable_position

#: The directory of oml's own pipeline configs.
OML_CONFIGS_DIR = Path(__file__).parents[1] / "configs"
#: ``GROUP@KEY=OPTION``: a group (``loss``, ``extractor``, ``a/b``), a dotted key, an option name.
_SELECTION = re.compile(r"^(?P<group>[\w/-]+)@(?P<key>[\w-]+(?:\.[\w-]+)*)=(?P<option>[\w/.-]+)$")
#: ``KEY=null``: the value of a (dotted) key set to null.
_NULL_VALUE = re.compile(r"^(?P<key>[\w-]+(?:\.[\w-]+)*)=null$")
#: The key an override sets (``+a.b=1``, ``++a.b=1``, ``~a.b``, ``a.b=1`` -> ``a.b``).
_OVERRIDDEN_KEY = re.compile(r"^(?:\+\+|\+|~)?(?P<key>[^=@~+]+?)(?:=|$)")
_MISSING = object()
#: Where hydra's override grammar is documented (the hint of a bad override).
OVERRIDE_GRAMMAR_URL = "https://hydra.cc/docs/advanced/override_grammar/basic/"
#: The key of a hydra defaults list.
DEFAULTS_KEY = "defaults"
#: Hydra's refusals of ``KEY=VALUE`` where ``KEY`` is also a config group (``extractor``, OML's ``criterion``): a
#: value that is no option name (``extractor=5``), or any value when the config's defaults list selects no option of
#: the group (``key``: ``extractor=resnet``, ``criterion=[1]``).
_GROUP_VALUE = re.compile(
    r"^(?:Config group override must be a string or a list"
    r"|Could not override '(?P<key>[^']+)'\. No match in the defaults list)"
)
#: The top-level key of hydra's own config, present while hydra composes; never a key of a pipeline config.
_HYDRA_KEY = "hydra"


@dataclass(frozen=True)
class ComponentSelection:
    """An override that sets the value of ``key`` whole (never merged into the value there):

    - ``GROUP@KEY=OPTION``: the config ``<group>/<option>.yaml`` of the search path;
    - ``KEY=null`` (``group`` and ``option`` None, ``value`` None): null;
    - ``KEY={...}`` (``value`` the mapping): that mapping, e.g. ``extractor={name: my_net, args: {dim: 32}}``;
    - ``KEY.name=OTHER`` where ``KEY`` holds a ``{name, args}`` spec of another component (``name_switch``): the
      default config of ``OTHER``, see :func:`_switched_spec`.

    Attributes:
        override: The override as written on the command line.
    """

    group: str | None
    key: str
    option: str | None
    value: Any = None
    override: str = ""
    name_switch: bool = False


def compose_config(
    config_name: str,
    overrides: Sequence[str],
    config_path: str | None = None,
    registry: Registry | None = None,
    schema_keys: Collection[str] = (),
) -> Any:
    """Compose the pipeline config ``config_name`` with hydra and ``overrides``.

    Args:
        config_name: The primary config, without ``.yaml``.
        overrides: Hydra overrides; ``GROUP@KEY=OPTION``, ``KEY=null``, ``KEY={...}`` and ``KEY.name=OTHER``
            (another component) replace the value at ``KEY`` whole (see the module's docstring), any other is
            hydra's.
        config_path: The directory of the primary config (default: oml's own configs).
        registry: Its plugins' config dirs (``oml_register_config_dirs``) are on the search path; it gives the
            default config of a component switched by ``KEY.name=OTHER``.
        schema_keys: The top-level keys of the pipeline's schema: ``KEY=VALUE`` (a value, not a spec or null) of
            one that the primary config file does not have (a user's config of the keys it needs; no defaults
            list) adds it, as ``+KEY=VALUE`` would (``logs_folder=run`` with ``--config-name my_train``).

    Returns:
        The composed ``DictConfig`` (struct mode, interpolations unresolved). Hydra's composition drops the
        primary config's ``hydra:`` section; it is put back as it is written (unresolved), so that the pipelines
        know the variables it uses (OML's ``hydra_dir``), and ignore it.

    Raises:
        ConfigError: an override, or a yaml file of ``config_path`` or of its config's own search path, past
            the bounds of :mod:`~oml_core.config.bounds` (checked before hydra reads them); ``config_path`` is
            not a directory; an override that does not parse; a config or option
            that does not exist; a yaml file that does not parse; an override of a key that the config does not
            have (with the close matches); a replacement of a key that the config does not have;
            ``KEY.name=OTHER`` for an ``OTHER`` without a default config. The message is one line (see the
            module's docstring).
        RegistryError: ``KEY.name=OTHER`` names no registered component (with the close matches).
    """
    registry = registry or Registry()
    check_override_bounds(overrides)
    if config_path is not None:  # oml's and the plugins' configs are installed files
        check_config_files([Path(config_path).expanduser().resolve()])
    if schema_keys and config_path is not None:
        own_file = _primary_yaml(Path(config_path).expanduser().resolve(), config_name)
        overrides = _adding_schema_keys(overrides, schema_keys, own_file)
    cfg = _compose_pipeline_config(config_name, overrides, config_path, registry)
    primary = OML_CONFIGS_DIR if config_path is None else Path(config_path).expanduser().resolve()
    hydra_section = _primary_yaml(primary, config_name).get(_HYDRA_KEY)
    if isinstance(hydra_section, dict) and _HYDRA_KEY not in cfg:
        from omegaconf import open_dict

        with open_dict(cfg):
            cfg[_HYDRA_KEY] = hydra_section
    return cfg


def _compose_pipeline_config(
    config_name: str, overrides: Sequence[str], config_path: str | None, registry: Registry
) -> Any:
    """:func:`compose_config` but the ``hydra:`` section."""
    check_override_syntax(overrides)
    for override in overrides:
        if _overridden_key(override) == "hydra.searchpath":  # hydra would import a pkg:// entry's package
            raise ConfigError(
                f"{override}: the config search path is not set on the command line (nothing a config names is "
                f"imported); give --config-path DIR for a folder of configs, or install the plugin that has them"
            )
    if config_path is not None:
        primary = Path(config_path).expanduser().resolve()
        if not primary.is_dir():
            raise ConfigError(f"--config-path {str(primary)!r} is not a directory")
    else:
        primary = OML_CONFIGS_DIR
    search_dirs = _search_path(primary, config_name, registry)
    search_path = f"hydra.searchpath=[{','.join(search_dirs)}]"
    overrides = list(overrides)
    candidates = [s for s in (_selection(o) for o in overrides) if s is not None]
    if not candidates:
        return _compose(primary, config_name, [*overrides, search_path])
    choices: Any = {}
    if DEFAULTS_KEY in _primary_yaml(primary, config_name):  # only a defaults list makes choices of groups
        choices = _compose(
            primary, config_name, [search_path], return_hydra_config=True
        ).hydra.runtime.choices
    selections = [s for s in candidates if s.option is None or f"{s.group}@{s.key}" not in choices]
    if not selections:
        return _compose(primary, config_name, [*overrides, search_path])

    own = {s.override for s in selections}
    rest = [o for o in overrides if o not in own and not _superseded(o, overrides, selections)]
    replaced = {s.key for s in selections}
    later = [o for o in rest if _is_under(_overridden_key(o), replaced)]
    cfg = _compose(primary, config_name, [o for o in rest if o not in later] + [search_path])
    for selection in selections:
        if selection.name_switch and not _is_other_component(cfg, selection):
            later.insert(0, selection.override)  # the same component, or no spec: hydra's override
            continue
        _replace(cfg, selection, [str(primary), *search_dirs], search_path, registry)
    later = [o for o in overrides if o in set(later)]  # in their order on the command line
    if not later:
        return cfg
    return _compose_on(cfg, [*later, search_path])


def _superseded(override: str, overrides: Sequence[str], selections: Sequence[ComponentSelection]) -> bool:
    """Whether ``override`` sets a key (that key itself, not one below it) that a replacement later on the command
    line sets whole: as in hydra, the last override of a key wins (``max_epochs=3 'max_epochs={a: 1}'`` gives the
    mapping, which the typed check then refuses; the overrides below a replaced key apply after it, see the
    module's docstring)."""
    key = _overridden_key(override)
    return any(
        selection.key == key
        and not selection.name_switch
        and _last_place(overrides, selection.override) > _last_place(overrides, override)
        for selection in selections
    )


def _last_place(overrides: Sequence[str], override: str) -> int:
    """The index of the last occurrence of ``override`` in ``overrides``."""
    return len(overrides) - 1 - list(reversed(overrides)).index(override)


def _adding_schema_keys(
    overrides: Sequence[str], schema_keys: Collection[str], file_keys: Mapping[str, Any]
) -> list[str]:
    """``overrides`` with ``+`` before each plain ``KEY=VALUE`` of a top-level key of ``schema_keys`` that the
    config file (its top-level mapping ``file_keys``, without a defaults list) does not have; the others as they
    are (an override that does not parse too: :func:`check_override_syntax` names it)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    if not file_keys or DEFAULTS_KEY in file_keys:
        return list(overrides)
    parser, added = OverridesParser.create(), []
    for override in overrides:
        try:
            (parsed,) = parser.parse_overrides([override])
        except OverrideParseException:
            added.append(override)
            continue
        key = parsed.key_or_group
        plain = not (
            parsed.is_add() or parsed.is_force_add() or parsed.is_delete() or parsed.is_sweep_override()
        )
        value_only = plain and parsed.package is None and not isinstance(parsed.value(), dict | type(None))
        if value_only and "." not in key and key in schema_keys and key not in file_keys:
            override = f"+{override}"
        added.append(override)
    return added


def _search_path(primary: Path, config_name: str | None, registry: Registry) -> list[str]:
    """The config search path: the primary config's own ``hydra.searchpath`` (OML's ``pkg://oml.configs`` read
    as ``pkg://oml_core.configs``), then the plugins' config dirs.

    Raises:
        ConfigError: the config's own search path has a ``pkg://`` entry that is no loaded plugin's config dir
            (hydra would import that package to read it).
    """
    own: list[str] = []
    hydra_section = _primary_yaml(primary, config_name).get("hydra")
    entries = hydra_section.get("searchpath") if isinstance(hydra_section, dict) else None
    if isinstance(entries, list):
        own = [str(e).replace("pkg://oml.configs", "pkg://oml_core.configs") for e in entries]
    plugin_dirs = registry.config_dirs()
    check_config_files(Path(entry.removeprefix("file://")) for entry in own if entry.startswith("file://"))
    for entry in own:
        if entry.startswith("pkg://") and entry not in plugin_dirs:  # hydra would import the package
            raise ConfigError(
                f"{primary / f'{config_name}.yaml'}: hydra.searchpath: {entry!r} is no loaded plugin's config dir; "
                f"a config adds folders (file://...) and the plugins' pkg:// dirs only, never a package to import"
            )
    return list(dict.fromkeys([*own, *plugin_dirs]))


def _primary_yaml(primary: Path, config_name: str | None) -> dict[str, Any]:
    """The primary config file's top-level mapping as yaml reads it (empty when there is none or it does not
    parse: hydra's composition then reports it, with the line and column)."""
    import yaml

    path = primary / f"{config_name}.yaml"
    if config_name is None or not path.is_file():
        return {}
    try:
        text = yaml.safe_load(read_config_text(path))
    except yaml.YAMLError:
        return {}
    return text if isinstance(text, dict) else {}


def read_config_text(path: Path) -> str:
    """The text of the yaml config file ``path``, which must be UTF-8 (as hydra reads it).

    Raises:
        ConfigError: the file is not UTF-8 text (a binary file, another encoding): one line naming the file and
            where its first undecodable byte is (line and column, 1-based).
    """
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, column = undecodable_position(data, e)
        raise ConfigError(
            f"the config file {str(path)!r} is not UTF-8 text: the byte 0x{data[e.start]:02x} at line {line}, "
            f"column {column} is not UTF-8 (a config is a yaml text file, saved as UTF-8)"
        ) from None


def _selection(override: str) -> ComponentSelection | None:
    """The replacement ``override`` asks for (see :class:`ComponentSelection`), or None for hydra's own."""
    match = _SELECTION.match(override)
    if match:
        group, key, option = match.group("group", "key", "option")
        return ComponentSelection(group, key, None if option == "null" else option, override=override)
    match = _NULL_VALUE.match(override)
    if match:
        return ComponentSelection(None, match.group("key"), None, override=override)
    from hydra.core.override_parser.overrides_parser import OverridesParser

    (parsed,) = OverridesParser.create().parse_overrides([override])
    if parsed.is_add() or parsed.is_force_add() or parsed.is_delete() or parsed.is_sweep_override():
        return None
    key, value = parsed.key_or_group, parsed.value()
    if isinstance(value, dict):
        return ComponentSelection(None, key, None, value=value, override=override)
    parent, _, leaf = key.rpartition(".")
    if leaf == "name" and parent and isinstance(value, str):
        return ComponentSelection(None, parent, value, override=override, name_switch=True)
    return None


def _overridden_key(override: str) -> str | None:
    match = _OVERRIDDEN_KEY.match(override)
    return match.group("key") if match else None


def _is_under(key: str | None, roots: set[str]) -> bool:
    """Whether ``key`` is one of ``roots`` or below one (``criterion.args.m`` is below ``criterion``)."""
    return key is not None and any(key == root or key.startswith(f"{root}.") for root in roots)


def _is_other_component(cfg: Any, selection: ComponentSelection) -> bool:
    """Whether ``KEY.name=OTHER`` switches the ``{name, args}`` spec at ``KEY`` to another component."""
    from omegaconf import DictConfig, OmegaConf

    current = OmegaConf.select(cfg, selection.key, default=None)
    return isinstance(current, DictConfig) and "name" in current and current.get("name") != selection.option


def _replace(
    cfg: Any, selection: ComponentSelection, search_dirs: list[str], search_path: str, registry: Registry
) -> None:
    """Set ``cfg[selection.key]`` whole to what ``selection`` asks for (see :class:`ComponentSelection`)."""
    from omegaconf import OmegaConf

    if OmegaConf.select(cfg, selection.key, default=_MISSING) is _MISSING:
        raise ConfigError(
            f"{selection.override}: the config has no key {selection.key!r} to replace "
            f"(to add it: +{selection.override})"
        )
    if selection.name_switch:
        current = OmegaConf.select(cfg, f"{selection.key}.name")
        value: Any = _switched_spec(registry, selection, str(current))
    elif selection.group is not None and selection.option is not None:
        value = _plain_option(search_dirs, selection.group, selection.option)
        if value is None:  # not a plain file: hydra composes it (its defaults list, package header, errors)
            option = _compose(Path(search_dirs[0]), None, [search_path, f"+{selection.override}"])
            value = OmegaConf.select(option, selection.key)
    else:
        value = selection.value
    OmegaConf.update(cfg, selection.key, value, merge=False)


def _plain_option(search_dirs: list[str], group: str, option: str) -> Any:
    """The content of the first ``<group>/<option>.yaml`` on the search path (the primary config's dir first,
    as hydra looks), when it is a plain mapping hydra would take as it is: no defaults list, no ``@package``
    header. None otherwise (hydra then composes the option itself), which spares a composition per
    ``GROUP@KEY=OPTION``."""
    from omegaconf import DictConfig, OmegaConf

    from oml_core.registry.registry import find_option_file

    candidate = find_option_file(search_dirs, group, option)
    if candidate is None:
        return None
    text = read_config_text(candidate)
    if "@package" in text:
        return None
    try:
        value = OmegaConf.create(text)
    except Exception:  # hydra's composition reports a yaml error with the line and column
        return None
    return value if isinstance(value, DictConfig) and DEFAULTS_KEY not in value else None


def _switched_spec(registry: Registry, selection: ComponentSelection, current: str) -> dict[str, Any]:
    """The spec that ``KEY.name=OTHER`` puts at ``KEY`` in place of the component ``current``: the default
    config of ``OTHER`` of the kind that ``current`` is registered as (``OTHER`` as written, qualified or not),
    so that the arguments of two components are never mixed. The arguments every component of the kind takes
    (:attr:`~oml_core.registry.kinds.Kind.core_args`, an extractor's ``weights``) are in it, ``null`` unless its
    default config sets them, so that ``extractor.name=OTHER extractor.args.weights=best.ckpt`` works.

    Raises:
        RegistryError: no component of that kind is called ``OTHER`` (with the close matches).
        ConfigError: ``OTHER`` has no default config; the message says how to give the whole spec.
    """
    from oml_core.registry import KINDS

    other = str(selection.option)
    kinds = [kind for kind in KINDS if _registers(registry, kind, current)]
    kinds = kinds or [kind for kind in KINDS if _registers(registry, kind, other)]
    if not kinds:
        raise ConfigError(
            f"{selection.override}: neither {current!r} nor {other!r} is a registered component "
            "(see `oml registry`)"
        )
    kind = next((k for k in kinds if _registers(registry, k, other)), kinds[0])
    entry = registry.get(kind, other)  # an unknown name: the registry's error, with the close matches
    spec = registry.default_config(kind, entry.name)
    if spec is None:
        raise ConfigError(
            f"{selection.override}: {kind} {other!r} has no default config, and {current!r}'s arguments do not fit "
            f"it; give the whole spec: '{selection.key}={{name: {other}, args: {{...}}}}'"
        )
    # the arguments every component of the kind takes (an extractor's weights) can be overridden after a switch
    args = {**{name: None for name in KINDS[kind].core_args}, **(spec.get("args") or {})}
    return {**spec, "name": other, "args": args}


def _registers(registry: Registry, kind: str, name: str) -> bool:
    """Whether ``registry`` has a component of ``kind`` called ``name`` (one, or several: ambiguous)."""
    from oml_core.registry import UnknownNameError

    try:
        registry.get(kind, name)
    except UnknownNameError:
        return False
    except RegistryError:
        return True
    return True


def _compose_on(cfg: Any, overrides: list[str]) -> Any:
    """Apply hydra ``overrides`` to the config ``cfg`` (written as a primary config to a temporary dir)."""
    from omegaconf import OmegaConf

    with tempfile.TemporaryDirectory(prefix="oml_config_") as folder:
        OmegaConf.save(cfg, Path(folder) / "composed.yaml")
        return _compose(Path(folder), "composed", overrides)


def _compose(primary: Path, config_name: str | None, overrides: list[str], **kwargs: Any) -> Any:
    """Hydra's ``compose`` with ``primary`` as the primary config dir; hydra's, omegaconf's and yaml's errors
    as a one-line ``ConfigError`` (see :func:`_composition_error`)."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(primary), version_base=None):
        try:
            return compose(config_name=config_name, overrides=overrides, **kwargs)
        except Exception as e:  # hydra's own errors (missing config, bad override) are user errors
            message = _composition_error(e, primary, config_name, overrides)
            if message is None:
                raise
            raise ConfigError(message) from e


def check_override_syntax(overrides: Sequence[str]) -> None:
    """Raise a ``ConfigError`` naming the first of ``overrides`` that hydra's override grammar does not parse.

    The message is one line: ``bad override '<override>': <the parser's reason> (see <grammar url>)``.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for override in overrides:
        try:
            parser.parse_overrides([override])
        except OverrideParseException as e:
            raise ConfigError(_bad_override_message(override, e.message)) from e


def _bad_override_message(override: str, reason: str) -> str:
    """The message of an override that does not parse; ``reason`` is the parser's (its first line is kept, the
    versioned link to hydra's docs that follows is replaced by :data:`OVERRIDE_GRAMMAR_URL`)."""
    first_line = reason.strip().splitlines()[0] if reason.strip() else "it does not parse"
    return f"bad override {override!r}: {first_line} (see {OVERRIDE_GRAMMAR_URL})"


def _composition_error(
    error: Exception, primary: Path, config_name: str | None, overrides: Sequence[str]
) -> str | None:
    """The one-line message of an error of hydra's ``compose``, or None when it is no user error (a bug).

    User errors: a yaml file that does not parse or is not UTF-8, an override that does not parse, an override
    of a key that the config does not have, a config or option that does not exist, and any other error of hydra
    or omegaconf (its message folded onto one line).
    """
    import yaml
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException

    if isinstance(error, yaml.YAMLError):
        return _yaml_error_message(error)
    if isinstance(error, UnicodeDecodeError):
        return _undecodable_config_message(error, primary)
    if isinstance(error, OverrideParseException):
        return _bad_override_message(error.override, error.message)
    if isinstance(error, MissingConfigException):
        return _missing_config_message(error, primary, config_name)
    component = _component_value_message(error, overrides)
    if component is not None:
        return component
    if isinstance(error, ConfigCompositionException):
        unknown = _unknown_key_message(error, overrides)
        if unknown is not None:
            return unknown
    if type(error).__module__.startswith(("hydra", "omegaconf")):
        parts = (str(error), _omegaconf_message(error.__cause__))
        return one_line(": ".join(part for part in parts if part)) or type(error).__name__
    return None


def _component_value_message(error: Exception, overrides: Sequence[str]) -> str | None:
    """For hydra's refusal of ``KEY=VALUE`` where ``KEY`` is a config group of components (``extractor``,
    ``criterion``) that the config's defaults list does not select (:data:`_GROUP_VALUE`): what the key takes
    (:func:`_component_value_text`), for the first such override. None for any other error."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    refusal = _GROUP_VALUE.match(str(error))
    if refusal is None:
        return None
    parser = OverridesParser.create()
    for line in overrides:
        (override,) = parser.parse_overrides([line])
        if override.is_add() or override.is_force_add() or override.is_delete() or override.package:
            continue
        key, value = override.key_or_group, override.value()
        named = refusal["key"] is not None
        if "." in key or isinstance(value, dict) or (named and key != refusal["key"]):
            continue
        if named or not isinstance(value, str | list):
            return _component_value_text(line, key, value)
    return None


def _component_value_text(override: str, key: str, value: Any) -> str:
    """``extractor=5: config key 'extractor' takes a component, by its name (extractor.name=NAME) or as a spec
    ('extractor={name: NAME, args: {...}}'), not 5``; for a name (``extractor=resnet``), how to give it."""
    if isinstance(value, str):
        return (
            f"{override}: config key {key!r} takes a component: give its name as {key}.name={value} (or its spec, "
            f"'{key}={{name: {value}, args: {{...}}}}')"
        )
    return (
        f"{override}: config key {key!r} takes a component, by its name ({key}.name=NAME) or as a spec "
        f"('{key}={{name: NAME, args: {{...}}}}'), not {value!r}"
    )


def _undecodable_config_message(error: UnicodeDecodeError, primary: Path) -> str:
    """The message of a config file that hydra could not decode (its error does not name the file): that of
    the first ``.yaml`` file under the primary config dir ``primary`` that is not UTF-8
    (:func:`read_config_text`), else hydra's reason."""
    for path in sorted(primary.rglob("*.yaml")):
        try:
            read_config_text(path)
        except ConfigError as e:
            return str(e)
    return one_line(f"a config file is not UTF-8 text: {error}")


def _yaml_error_message(error: Any) -> str:
    """``cannot parse the config file '<file>': line L, column C: <problem> (<context> at line L, column C)``
    for a yaml error with marks (lines and columns 1-based), else yaml's message on one line."""
    mark = getattr(error, "problem_mark", None)
    if mark is None:
        return f"cannot parse a config file: {one_line(str(error))}"
    message = (
        f"cannot parse the config file {mark.name!r}: {_position(mark)}: {error.problem or 'invalid yaml'}"
    )
    if error.context and error.context_mark is not None:
        message += f" ({error.context} at {_position(error.context_mark)})"
    return one_line(message)


def _position(mark: Any) -> str:
    """``line L, column C`` (1-based) of a yaml mark (0-based)."""
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _missing_config_message(error: Any, primary: Path, config_name: str | None) -> str:
    """A config (``--config-name``) or an option of a config group (``loss/arcfase``) that does not exist,
    with the close match among the configs or options there are, and those."""
    missing = str(error.missing_cfg_file)
    if error.options is None and missing == config_name:
        known = sorted(path.stem for path in primary.glob("*.yaml"))
        where = f"in {str(primary)!r}"
    else:
        known = sorted(error.options or [])
        group = missing.rpartition("/")[0]
        where = f"in the config group {group!r}" if group else "on the config search path"
    close = difflib.get_close_matches(missing.rpartition("/")[2], known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"no config {missing!r} {where}{hint} (there are: {', '.join(known) or 'none'})"


def _unknown_key_message(error: Exception, overrides: Sequence[str]) -> str | None:
    """For hydra's "Could not override 'KEY'" (an override of a key the config does not have): ``unknown config
    key 'KEY'; did you mean 'KNOWN'? (known keys [under 'PARENT']: ...; to add a new key: +OVERRIDE)``, where the
    known keys are the composed config's keys at that level. None for any other error."""
    from omegaconf import DictConfig
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    cause = error.__cause__
    if not isinstance(cause, (ConfigAttributeError, ConfigKeyError)) or not cause.full_key:
        return None
    key = str(cause.full_key)
    parent, _, name = key.rpartition(".")
    node = cause.parent_node
    known = sorted(str(k) for k in node.keys()) if isinstance(node, DictConfig) else []
    if not parent:
        known = [k for k in known if k != _HYDRA_KEY]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {'.'.join(filter(None, (parent, close[0])))!r}?" if close else ""
    level = f" under {parent!r}" if parent else ""
    listed = f"known keys{level}: {', '.join(known)}" if known else f"there are no keys{level}"
    override = _failed_override(key, overrides)
    add = f"; to add a new key: +{override}" if override else ""
    return f"unknown config key {key!r}{hint} ({listed}{add})"


def _failed_override(key: str, overrides: Sequence[str]) -> str | None:
    """The first override that changes ``key`` or a key below it (the one hydra could not apply), as written."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for line in overrides:
        (override,) = parser.parse_overrides([line])
        if override.is_add() or override.is_force_add() or override.is_delete():
            continue
        if _is_under(override.key_or_group, {key}):
            return line
    return None


def _omegaconf_message(error: BaseException | None) -> str:
    """An omegaconf error's own message (without its ``full_key: ...`` lines) after the key at fault; empty for
    anything else."""
    from omegaconf.errors import OmegaConfBaseException

    if not isinstance(error, OmegaConfBaseException):
        return ""
    message = str(error).partition("\n")[0]
    return f"config key {error.full_key!r}: {message}" if error.full_key else message


def unresolvable_config_error(error: Exception) -> ConfigError:
    """The one-line ``ConfigError`` of omegaconf's ``error`` while resolving a config's interpolations (``seed:
    ${nope}``): ``cannot resolve the config: config key 'seed': Interpolation key 'nope' not found`` (the key at
    fault and omegaconf's reason, which names the reference)."""
    reason = str(error).partition("\n")[0]
    full_key = getattr(error, "full_key", None)
    key = f"config key {full_key!r}: " if full_key else ""
    return ConfigError(one_line(f"cannot resolve the config: {key}{reason}"))


def resolved_config(cfg: Any) -> Any:
    """``cfg`` (a ``DictConfig``, or any value) as plain containers with its interpolations resolved
    (:func:`~oml_core.registry.to_plain`).

    Raises:
        ConfigError: an interpolation does not resolve (:func:`unresolvable_config_error`).
    """
    from omegaconf.errors import OmegaConfBaseException

    try:
        return to_plain(cfg)
    except OmegaConfBaseException as e:
        raise unresolvable_config_error(e) from None


__all__ = [
    "OML_CONFIGS_DIR",
    "OVERRIDE_GRAMMAR_URL",
    "ComponentSelection",
    "check_override_syntax",
    "compose_config",
    "read_config_text",
    "resolved_config",
    "unresolvable_config_error",
]
