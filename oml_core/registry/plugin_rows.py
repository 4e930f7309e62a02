"""What ``oml plugins`` reports about each plugin: a json-ready row per plugin, built from a loaded registry.

A row is ``{"name", "distribution", "version", "hooks", "provides": {kind: [names]}, "every_run": [names],
"shadowed": [{"kind", "name", "by", "qualified"}], "error"}`` (``every_run``: those of its callbacks that are added
to every training run; ``shadowed``: the names it gives that a first-party plugin gives too, ``by`` that plugin's
distribution, so that a config's ``name`` builds the first party's and this plugin's is reachable only as
``qualified``), and, when the components are checked, ``"broken"``: the one-line errors of the components that do
not import.
"""

from __future__ import annotations

from typing import Any

from oml_core.registry.catalog import FIRST_PARTY_PROVIDERS
from oml_core.registry.entry import Entry, PluginInfo
from oml_core.registry.errors import RegistryError
from oml_core.registry.kinds import KINDS
from oml_core.registry.manager import (
    BUILTINS_NAME,
    PluginRecord,
    installed_distributions,
    is_first_party,
    normalized_name,
    watch_loading,
)
from oml_core.registry.registry import Registry


def plugins_report(
    registry: Registry, include_builtins: bool = False, check: bool = False
) -> list[dict[str, Any]]:
    """One row per plugin of ``registry``, in load order (the built-ins only with ``include_builtins``).

    With ``check``, every component is imported and the failures are listed under ``broken``.
    """
    return [
        plugin_row(registry, record, check)
        for record in registry.plugins()
        if include_builtins or record.info.name != BUILTINS_NAME
    ]


def plugin_row(registry: Registry, record: PluginRecord, check: bool = False) -> dict[str, Any]:
    """The row of the plugin of ``record`` (see the module's docstring); ``provides`` counts only what this very
    plugin registered (a plugin refused for its name's sake provides nothing, whoever holds the name)."""
    row = failed_row(record.info, record.error)
    row["hooks"] = list(record.hooks)
    row["provides"] = _provided(registry, record.info)
    row["every_run"] = sorted(e.name for e in registry.every_run_callbacks() if e.plugin == record.info)
    row["shadowed"] = shadowed_names(registry, record.info)
    if check:
        row["broken"] = broken_components(registry, record.info)
    return row


def failed_row(info: PluginInfo, error: str | None) -> dict[str, Any]:
    """The row of a plugin that registered nothing: no hooks, no components, ``error`` (and no broken one)."""
    return {
        "name": info.name,
        "distribution": info.distribution,
        "version": info.version,
        "hooks": [],
        "provides": {},
        "every_run": [],
        "shadowed": [],
        "error": error,
    }


def _provided(registry: Registry, info: PluginInfo) -> dict[str, list[str]]:
    provided: dict[str, list[str]] = {}
    for kind in KINDS:
        names = sorted(e.name for e in registry.entries(kind) if e.plugin == info)
        if names:
            provided[kind] = names
    return provided


def shadowed_names(registry: Registry, info: PluginInfo) -> list[dict[str, str]]:
    """The names (and aliases) of the components of the plugin ``info`` that a first-party plugin gives too,
    ``{"kind", "name", "by": <its distribution>, "qualified": "<plugin>:<name>"}`` each: a first-party component
    of ``registry``, or one that the first-party catalog lists for an installed distribution (so that a plugin
    checked beside the built-ins alone, as ``oml plugins --check`` checks it, is told all the same). ``[]`` for a
    first-party plugin."""
    if is_first_party(info):
        return []
    installed = {normalized_name(name) for name, _ in installed_distributions(None)}
    shadowed = []
    for kind in KINDS:
        entries = registry.entries(kind)
        for entry in entries:
            if entry.plugin != info:
                continue
            for name in (entry.name, *entry.aliases):
                by = _first_party_owner(entries, kind, name, installed)
                if by is not None:
                    shadowed.append(
                        {"kind": kind, "name": name, "by": by, "qualified": f"{info.name}:{name}"}
                    )
    return shadowed


def _first_party_owner(entries: list[Entry], kind: str, name: str, installed: set[str]) -> str | None:
    """The distribution of the first-party component of ``kind`` called ``name`` among ``entries``, or of the
    catalog's when its distribution is ``installed`` (normalized names); ``None`` when no first party gives it."""
    for entry in entries:
        if is_first_party(entry.plugin) and name in (entry.name, *entry.aliases):
            return entry.plugin.distribution
    catalogued = FIRST_PARTY_PROVIDERS.get((kind, name))
    return catalogued if catalogued is not None and normalized_name(catalogued) in installed else None


def broken_components(registry: Registry, info: PluginInfo) -> list[str]:
    """Import every component of the plugin ``info``, each under :func:`watch_loading` (step ``import of loss
    'x'``); returns the errors of those that do not import, one line each."""
    broken = []
    for kind in KINDS:
        for entry in registry.entries(kind):
            if entry.plugin != info:
                continue
            with watch_loading(info, f"import of {kind} {entry.name!r} ({entry.factory_path})"):
                try:
                    entry.load()
                except RegistryError as e:
                    broken.append(str(e))
    return broken
