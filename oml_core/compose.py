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
in their order on the command line, whatever their place among the replacements. Where the primary config
selects ``GROUP@KEY`` in its own defaults list, the override is hydra's own (it switches that option).

``KEY=null`` is a replacement too (by null): hydra takes ``sampler=null`` for a choice in the config group
``sampler``, which plugins register, and refuses it; OML's configs use it for plain batches of ``bs_train``.

Every error of the composition is a :class:`~oml_core.registry.ConfigError` with a one-line message that names
the override, key or file at fault, in oml's words rather than hydra's advice:

- an override that does not parse (``max_epochs=[1,``): ``bad override 'max_epochs=[1,': <why>``, before any
  config is read;
- an override of a key the config does not have (``max_epoch=1``): ``unknown config key 'max_epoch'; did you
  mean 'max_epochs'?``, then the known keys at that level and, last, how to add a new key (``+KEY=VALUE``);
- a config or option that does not exist: its name, the close matches and the options there are;
- a yaml file that does not parse: the file, line and column (1-based) and yaml's reason.
"""

from __future__ import annotations

import difflib
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oml_core.registry import ConfigError, Registry

#: The directory of oml's own pipeline configs.
OML_CONFIGS_DIR = Path(__file__).parent / "configs"
#: ``GROUP@KEY=OPTION``: a group (``loss``, ``extractor``, ``a/b``), a dotted key, an option name.
_SELECTION = re.compile(r"^(?P<group>[\w/-]+)@(?P<key>[\w-]+(?:\.[\w-]+)*)=(?P<option>[\w/.-]+)$")
#: ``KEY=null``: the value of a (dotted) key set to null.
_NULL_VALUE = re.compile(r"^(?P<key>[\w-]+(?:\.[\w-]+)*)=null$")
#: The key an override sets (``+a.b=1``, ``++a.b=1``, ``~a.b``, ``a.b=1`` -> ``a.b``).
_OVERRIDDEN_KEY = re.compile(r"^(?:\+\+|\+|~)?(?P<key>[^=@~+]+?)(?:=|$)")
_MISSING = object()
#: Where hydra's override grammar is documented (the hint of a bad override).
OVERRIDE_GRAMMAR_URL = "https://hydra.cc/docs/advanced/override_grammar/basic/"
#: The top-level key of hydra's own config, present while hydra composes; never a key of a pipeline config.
_HYDRA_KEY = "hydra"


@dataclass(frozen=True)
class ComponentSelection:
    """The override ``GROUP@KEY=OPTION``: the value of ``key`` becomes the config ``<group>/<option>.yaml``;
    or ``KEY=null`` (``group`` and ``option`` None): it becomes null."""

    group: str | None
    key: str
    option: str | None

    @property
    def override(self) -> str:
        if self.option is None:
            return f"{self.key}=null" if self.group is None else f"{self.group}@{self.key}=null"
        return f"{self.group}@{self.key}={self.option}"


def compose_config(
    config_name: str,
    overrides: Sequence[str],
    config_path: str | None = None,
    registry: Registry | None = None,
) -> Any:
    """Compose the pipeline config ``config_name`` with hydra and ``overrides``.

    Args:
        config_name: The primary config, without ``.yaml``.
        overrides: Hydra overrides; ``GROUP@KEY=OPTION`` replaces the component at ``KEY`` and ``KEY=null``
            sets it to null (see the module's docstring), any other is hydra's.
        config_path: The directory of the primary config (default: oml's own configs).
        registry: Its plugins' config dirs (``oml_register_config_dirs``) are on the search path.

    Returns:
        The composed ``DictConfig`` (struct mode, interpolations unresolved).

    Raises:
        ConfigError: ``config_path`` is not a directory; an override that does not parse; a config or option
            that does not exist; a yaml file that does not parse; an override of a key that the config does not
            have (with the close matches); a replacement of a key that the config does not have. The message is
            one line (see the module's docstring).
    """
    registry = registry or Registry()
    check_override_syntax(overrides)
    if config_path is not None:
        primary = Path(config_path).expanduser().resolve()
        if not primary.is_dir():
            raise ConfigError(f"--config-path {str(primary)!r} is not a directory")
    else:
        primary = OML_CONFIGS_DIR
    search_path = f"hydra.searchpath=[{','.join(registry.config_dirs())}]"
    overrides = list(overrides)
    candidates = [s for s in (_selection(o) for o in overrides) if s is not None]
    if not candidates:
        return _compose(primary, config_name, [*overrides, search_path])
    choices = _compose(primary, config_name, [search_path], return_hydra_config=True).hydra.runtime.choices
    selections = [s for s in candidates if s.option is None or f"{s.group}@{s.key}" not in choices]
    if not selections:
        return _compose(primary, config_name, [*overrides, search_path])

    replaced = {s.key for s in selections}
    own = {s.override for s in selections}
    rest = [o for o in overrides if o not in own]
    later = [o for o in rest if _is_under(_overridden_key(o), replaced)]
    cfg = _compose(primary, config_name, [o for o in rest if o not in later] + [search_path])
    for selection in selections:
        _replace(cfg, selection, primary, search_path)
    if not later:
        return cfg
    return _compose_on(cfg, [*later, search_path])


def _selection(override: str) -> ComponentSelection | None:
    match = _SELECTION.match(override)
    if match:
        group, key, option = match.group("group", "key", "option")
        return ComponentSelection(group, key, None if option == "null" else option)
    match = _NULL_VALUE.match(override)
    return ComponentSelection(None, match.group("key"), None) if match else None


def _overridden_key(override: str) -> str | None:
    match = _OVERRIDDEN_KEY.match(override)
    return match.group("key") if match else None


def _is_under(key: str | None, roots: set[str]) -> bool:
    """Whether ``key`` is one of ``roots`` or below one (``criterion.args.m`` is below ``criterion``)."""
    return key is not None and any(key == root or key.startswith(f"{root}.") for root in roots)


def _replace(cfg: Any, selection: ComponentSelection, primary: Path, search_path: str) -> None:
    """Set ``cfg[selection.key]`` to the option ``selection.group/selection.option`` of the search path (to
    null for a null option)."""
    from omegaconf import OmegaConf

    if OmegaConf.select(cfg, selection.key, default=_MISSING) is _MISSING:
        raise ConfigError(
            f"{selection.override}: the config has no key {selection.key!r} to replace "
            f"(to add it: +{selection.override})"
        )
    if selection.option is None:
        OmegaConf.update(cfg, selection.key, None, merge=False)
        return
    option = _compose(primary, None, [search_path, f"+{selection.override}"])
    OmegaConf.update(cfg, selection.key, OmegaConf.select(option, selection.key), merge=False)


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

    User errors: a yaml file that does not parse, an override that does not parse, an override of a key that
    the config does not have, a config or option that does not exist, and any other error of hydra or omegaconf
    (its message folded onto one line).
    """
    import yaml
    from hydra.errors import ConfigCompositionException, MissingConfigException, OverrideParseException

    if isinstance(error, yaml.YAMLError):
        return _yaml_error_message(error)
    if isinstance(error, OverrideParseException):
        return _bad_override_message(error.override, error.message)
    if isinstance(error, MissingConfigException):
        return _missing_config_message(error, primary, config_name)
    if isinstance(error, ConfigCompositionException):
        unknown = _unknown_key_message(error, overrides)
        if unknown is not None:
            return unknown
    if type(error).__module__.startswith(("hydra", "omegaconf")):
        parts = (str(error), _omegaconf_message(error.__cause__))
        return one_line(": ".join(part for part in parts if part)) or type(error).__name__
    return None


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


def one_line(text: object) -> str:
    """``str(text)`` (a message, an exception) with its white space (new lines, tabs) folded into single spaces,
    for the one-line errors of the command line and the pipelines."""
    return " ".join(str(text).split())


__all__ = [
    "OML_CONFIGS_DIR",
    "OVERRIDE_GRAMMAR_URL",
    "ComponentSelection",
    "check_override_syntax",
    "compose_config",
    "one_line",
]
