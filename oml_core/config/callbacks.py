"""Which plugins' callbacks a training run adds (``oml_register_callbacks``): those its config names in
``callbacks``, in the list's order, with their arguments; then every *every-run* callback (registered with
``every_run=True``, :meth:`~oml_core.registry.Registry.every_run_callbacks`: the plugins' load order, then the
name) that the config neither names nor switches off in ``callbacks_disabled``, built with its default arguments;
:func:`callback_in_messages`: how an error names one of them, and how a run switches it off.

Lightning's own entry-point callbacks (the ``lightning.pytorch.callbacks_factory`` group) are added to every
Trainer likewise, but cannot be switched off or given arguments by a run; here a run can do both, and a callback
that the config names is added once, with the config's arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oml_core.registry import ConfigError, Registry, RegistryError
from oml_core.registry.entry import Entry
from oml_core.registry.registry import EVERY_RUN_KIND
from oml_core.registry.specs import required_arguments

#: The config key listing the every-run callbacks that a run switches off.
DISABLED_KEY = "callbacks_disabled"
#: The config key naming the callbacks a run adds, with their arguments.
CALLBACKS_KEY = "callbacks"


def plugin_callback_specs(
    registry: Registry, callbacks: Sequence[Mapping[str, Any]], disabled: Sequence[str]
) -> list[tuple[str, Mapping[str, Any]]]:
    """The callbacks of plugins that a training run adds, in order, as ``(key, {name, args})``: ``key`` names
    where each comes from in messages (``callbacks[0]``, ``every-run callback 'my_plugin:epoch_log'``).

    Args:
        registry: Where the callbacks are registered.
        callbacks: The config's ``callbacks`` (checked specs: their names and arguments are
            :func:`~oml_core.config.typed.check_component_arguments`'s business).
        disabled: The config's ``callbacks_disabled``: names (an alias, or ``plugin:name``) of every-run
            callbacks that the run does not add.

    Raises:
        RegistryError: an unknown or ambiguous name in ``callbacks``, or in ``disabled`` (the registry's message
            after ``callbacks_disabled[i]: ``).
        ConfigError: ``disabled`` names a callback that is not an every-run one, or one that ``callbacks`` names
            too; an every-run callback to add has a required argument (it cannot be built with its defaults).
    """
    named = [registry.get(EVERY_RUN_KIND, spec["name"]) for spec in callbacks]
    every_run = registry.every_run_callbacks()
    switched_off = [
        _disabled_entry(registry, name, f"{DISABLED_KEY}[{i}]", named, every_run)
        for i, name in enumerate(disabled)
    ]
    added: list[tuple[str, Mapping[str, Any]]] = [
        (f"{CALLBACKS_KEY}[{i}]", spec) for i, spec in enumerate(callbacks)
    ]
    for entry in every_run:
        if entry in named or entry in switched_off:
            continue
        missing = required_arguments(entry.load())
        if missing:
            raise ConfigError(
                f"the every-run callback {entry.qualified_name!r} of plugin {entry.plugin.provider} needs the "
                f"argument(s) {missing}: give them in callbacks ({{name: {entry.name}, args: {{...}}}}) or switch "
                f"it off ({DISABLED_KEY}: [{entry.name}])"
            )
        added.append(
            (f"every-run callback {entry.qualified_name!r}", {"name": entry.qualified_name, "args": {}})
        )
    return added


def callback_in_messages(
    registry: Registry, key: str, spec: Mapping[str, Any], disabled: Sequence[str]
) -> tuple[str, str | None]:
    """How messages name the callback that :func:`plugin_callback_specs` gave as ``(key, spec)``, and the override
    that switches it off:

    - an every-run callback: ``("the callback 'p:log' of the plugin p (p-dist 1.0)", "callbacks_disabled=[...,
      p:log]")``, the override keeping the config's ``disabled``;
    - one the config names: ``("the callback 'p:log' (callbacks[0]) of the plugin p (p-dist 1.0)", None)``: it
      is switched off by taking it out of ``callbacks``.
    """
    entry = registry.get(EVERY_RUN_KIND, spec["name"])
    if key.startswith(f"{CALLBACKS_KEY}["):
        return f"the callback {entry.qualified_name!r} ({key}) of the plugin {entry.plugin.provider}", None
    names = ",".join([*disabled, entry.qualified_name])
    return (
        f"the callback {entry.qualified_name!r} of the plugin {entry.plugin.provider}",
        f"{DISABLED_KEY}=[{names}]",
    )


def _disabled_entry(
    registry: Registry, name: str, key: str, named: Sequence[Entry], every_run: Sequence[Entry]
) -> Entry:
    """The every-run callback that ``name`` (at the config key ``key``) switches off."""
    try:
        entry = registry.get(EVERY_RUN_KIND, name)
    except RegistryError as e:
        raise type(e)(f"{key}: {e}") from e
    if entry not in every_run:
        known = ", ".join(e.qualified_name for e in every_run) or "(none)"
        raise ConfigError(
            f"{key}: the callback {name!r} is not added to every run, so there is nothing to switch off (the "
            f"every-run callbacks: {known}); a callback that is not every-run runs only where callbacks names it"
        )
    if entry in named:
        raise ConfigError(
            f"{key}: the callback {name!r} is named in callbacks[{named.index(entry)}] too; name it there or "
            f"switch it off here, not both"
        )
    return entry
