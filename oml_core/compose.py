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
"""

from __future__ import annotations

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
        ConfigError: ``config_path`` is not a directory; a config or option that does not exist, a bad
            override (hydra's message); a replacement of a key that the config does not have.
    """
    registry = registry or Registry()
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
    """Hydra's ``compose`` with ``primary`` as the primary config dir; hydra's errors as ``ConfigError``."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(primary), version_base=None):
        try:
            return compose(config_name=config_name, overrides=overrides, **kwargs)
        except Exception as e:  # hydra's own errors (missing config, bad override) are user errors
            if type(e).__module__.startswith(("hydra", "omegaconf")):
                raise ConfigError(f"{type(e).__name__}: {e}") from e
            raise


__all__ = ["OML_CONFIGS_DIR", "ComponentSelection", "compose_config"]
