"""What ``oml plugins`` reports about each plugin: a json-ready row per plugin, built from a loaded registry.

A row is ``{"name", "distribution", "version", "hooks", "provides": {kind: [names]}, "every_run": [names],
"error"}`` (``every_run``: those of its callbacks that are added to every training run), and, when the
components are checked, ``"broken"``: the one-line errors of the components that do not import.
"""

from __future__ import annotations

from typing import Any

from oml_core.registry.entry import PluginInfo
from oml_core.registry.errors import RegistryError
from oml_core.registry.kinds import KINDS
from oml_core.registry.manager import BUILTINS_NAME, PluginRecord, watch_loading
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
        "error": error,
    }


def _provided(registry: Registry, info: PluginInfo) -> dict[str, list[str]]:
    provided: dict[str, list[str]] = {}
    for kind in KINDS:
        names = sorted(e.name for e in registry.entries(kind) if e.plugin == info)
        if names:
            provided[kind] = names
    return provided


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
