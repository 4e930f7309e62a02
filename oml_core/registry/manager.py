"""Plugin discovery: a fresh pluggy ``PluginManager`` with the built-ins and the ``oml`` entry points.

Each entry point is loaded on its own inside ``try``: a broken plugin is skipped with a
:class:`~oml_core.registry.errors.PluginWarning` naming it, its distribution and the error, or raises
:class:`~oml_core.registry.errors.PluginLoadError` when strict (``OML_STRICT_PLUGINS=1``).
``OML_LOAD_PLUGINS`` is an allow-list of entry-point or distribution names (comma separated; set and empty
means none); the built-ins of the core are always loaded.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points

import pluggy

from oml_core.markers import PROJECT_NAME
from oml_core.registry import hookspecs
from oml_core.registry.entry import PluginInfo
from oml_core.registry.errors import PluginLoadError, PluginWarning

ENV_ALLOW = "OML_LOAD_PLUGINS"
ENV_STRICT = "OML_STRICT_PLUGINS"
BUILTINS_NAME = "oml_core"


@dataclass
class PluginRecord:
    """What ``oml plugins`` reports about one plugin: where it comes from, its hooks, or its load error."""

    info: PluginInfo
    hooks: list[str] = field(default_factory=list)
    error: str | None = None


def create_plugin_manager() -> pluggy.PluginManager:
    """Return a new plugin manager that knows the ``oml`` hook specifications and nothing else."""
    pm = pluggy.PluginManager(PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    return pm


def allow_list_from_env() -> frozenset[str] | None:
    """Parse ``OML_LOAD_PLUGINS``: ``None`` when unset (load all), else the set of allowed names."""
    raw = os.environ.get(ENV_ALLOW)
    if raw is None:
        return None
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


def strict_from_env() -> bool:
    """``OML_STRICT_PLUGINS`` set to 1/true/yes makes a broken plugin raise instead of warn."""
    return os.environ.get(ENV_STRICT, "").strip().lower() in {"1", "true", "yes", "on"}


def iter_entry_points() -> Iterator[EntryPoint]:
    """Entry points of group ``oml``, one per (name, value) even if a distribution is seen twice."""
    seen: set[tuple[str, str]] = set()
    for ep in sorted(entry_points(group=PROJECT_NAME), key=lambda e: e.name):
        if (ep.name, ep.value) not in seen:
            seen.add((ep.name, ep.value))
            yield ep


def plugin_info_for(ep: EntryPoint) -> PluginInfo:
    """Describe the plugin behind an entry point (its distribution and version when known)."""
    dist = getattr(ep, "dist", None)
    return PluginInfo(
        name=ep.name,
        distribution=dist.metadata["Name"] if dist is not None else None,
        version=dist.version if dist is not None else None,
        module=ep.value,
    )


def report_plugin_error(info: PluginInfo, what: str, error: BaseException, strict: bool) -> str:
    """Turn a plugin failure into a warning (or a :class:`PluginLoadError` when ``strict``).

    Returns:
        The one-line message, to be stored on the plugin's record.
    """
    message = f"oml plugin {info.provider}: {what}: {type(error).__name__}: {error}"
    if strict:
        raise PluginLoadError(message) from error
    warnings.warn(f"{message} (skipped; set {ENV_STRICT}=1 to raise)", PluginWarning, stacklevel=3)
    return message


def register_plugin(
    pm: pluggy.PluginManager, plugin: object, info: PluginInfo, records: dict[str, PluginRecord], strict: bool
) -> None:
    """Register ``plugin`` under ``info.name``, validating its hooks; failures are reported, not raised."""
    record = PluginRecord(info=info)
    records[info.name] = record
    try:
        pm.register(plugin, name=info.name)
        pm.check_pending()
    except Exception as e:  # pluggy raises ValueError / PluginValidationError for bad plugins
        if pm.is_registered(plugin):
            pm.unregister(plugin)
        record.error = report_plugin_error(info, "invalid plugin", e, strict)
        return
    record.hooks = sorted(caller.name for caller in pm.get_hookcallers(plugin) or ())


def load_entry_point_plugins(
    pm: pluggy.PluginManager,
    records: dict[str, PluginRecord],
    *,
    allow: Collection[str] | None,
    strict: bool,
) -> None:
    """Import and register every allowed ``oml`` entry point, each guarded on its own."""
    for ep in iter_entry_points():
        info = plugin_info_for(ep)
        if allow is not None and ep.name not in allow and info.distribution not in allow:
            continue
        if ep.name in records:
            error = ValueError(
                f"the plugin name {ep.name!r} is already taken by {records[ep.name].info.provider}"
            )
            report_plugin_error(info, "duplicate plugin name", error, strict)
            continue
        try:
            module = ep.load()
        except Exception as e:  # an import error of a third-party plugin must not break the host
            records[ep.name] = PluginRecord(
                info=info, error=report_plugin_error(info, "import failed", e, strict)
            )
            continue
        register_plugin(pm, module, info, records, strict)
