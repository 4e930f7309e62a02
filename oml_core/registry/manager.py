"""Plugin discovery: a fresh pluggy ``PluginManager`` with the built-ins and the ``oml`` entry points.

Each entry point is loaded on its own inside ``try``: a broken plugin is skipped with a
:class:`~oml_core.registry.errors.PluginWarning` naming it, its distribution and the error, or raises
:class:`~oml_core.registry.errors.PluginLoadError` when strict (``OML_STRICT_PLUGINS=1``). "Broken" means any
``BaseException`` out of the plugin's import or hooks, ``SystemExit`` included (a plugin calling
``sys.exit`` must not end the host's command), except :data:`PROPAGATED_EXCEPTIONS` (a user's Ctrl-C).
``OML_LOAD_PLUGINS`` is an allow-list of entry-point or distribution names (comma separated; set and empty
means none); a name in it that no installed entry point or distribution has is reported the same way. The
built-ins of the core are always loaded.
"""

from __future__ import annotations

import difflib
import os
import warnings
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points

import pluggy

from oml_core.markers import PROJECT_NAME
from oml_core.registry import hookspecs
from oml_core.registry.entry import PluginInfo
from oml_core.registry.errors import (
    PluginLoadError,
    PluginWarning,
    describe_error,
    is_plugin_failure,
)

ENV_ALLOW = "OML_LOAD_PLUGINS"
ENV_STRICT = "OML_STRICT_PLUGINS"
BUILTINS_NAME = "oml_core"
BUILTINS_DISTRIBUTION = "oml-core"


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

    Raises:
        PluginLoadError: ``strict`` is true (chained to ``error``).
    """
    message = f"oml plugin {info.provider}: {what}: {describe_error(error)}"
    if strict:
        raise PluginLoadError(message) from error
    warnings.warn(f"{message} (skipped; set {ENV_STRICT}=1 to raise)", PluginWarning, stacklevel=3)
    return message


#: The prefix of every oml hook; a function of a plugin named with it must be one of the hooks.
HOOK_PREFIX = "oml_register_"
#: pluggy's hookimpl options that oml cannot honour: its registration hooks are called one by one, each with its
#: own ``register`` callback (see ``Registry``), so a wrapper would be called like a plain hook.
WRAPPER_OPTIONS = ("wrapper", "hookwrapper")


def hook_names() -> list[str]:
    """The names of oml's hooks (:mod:`~oml_core.registry.hookspecs`)."""
    return sorted(name for name in vars(hookspecs) if name.startswith(HOOK_PREFIX))


def check_hooks(pm: pluggy.PluginManager, plugin: object) -> None:
    """Raise when ``plugin`` has a hook that oml would silently ignore: a ``@hookimpl`` whose name (or
    ``specname``) is no oml hook, e.g. the singular ``oml_register_extractor`` (the message names the closest
    hook); a function named like a hook (``oml_register_...``) without ``@hookimpl``; a wrapper
    (``@hookimpl(wrapper=True)`` or ``hookwrapper=True``), which oml does not support.

    Raises:
        pluggy.PluginValidationError: naming the function, and the hook it was probably meant to be.
    """
    known = hook_names()
    for attribute in dir(plugin):
        opts = pm.parse_hookimpl_opts(plugin, attribute)
        if opts is None:
            if attribute.startswith(HOOK_PREFIX) and callable(getattr(plugin, attribute, None)):
                hint = "" if attribute in known else _closest_hook(attribute, known)
                raise pluggy.PluginValidationError(
                    plugin,
                    f"{attribute} is named like an oml hook but has no @hookimpl, so it is never called{hint}",
                )
            continue
        hook = opts.get("specname") or attribute
        if hook not in known:
            raise pluggy.PluginValidationError(
                plugin,
                f"{attribute}: {hook!r} is no oml hook{_closest_hook(hook, known)}",
            )
        wrapper = [option for option in WRAPPER_OPTIONS if opts.get(option)]
        if wrapper:
            raise pluggy.PluginValidationError(
                plugin,
                f"{attribute}: @hookimpl({wrapper[0]}=True) is not supported: oml calls each plugin's "
                f"{hook} on its own, with its own register callback; register the components directly",
            )


def _closest_hook(name: str, known: list[str]) -> str:
    """``; did you mean 'x'?`` with the closest of the ``known`` hooks (compared without the prefix that they all
    share), else the list of them."""
    kinds = {hook.removeprefix(HOOK_PREFIX): hook for hook in known}
    close = difflib.get_close_matches(name.removeprefix(HOOK_PREFIX), list(kinds), n=1, cutoff=0.6)
    return f"; did you mean {kinds[close[0]]!r}?" if close else f" (the hooks: {', '.join(known)})"


def register_plugin(
    pm: pluggy.PluginManager, plugin: object, info: PluginInfo, records: dict[str, PluginRecord], strict: bool
) -> None:
    """Register ``plugin`` under ``info.name``, validating its hooks (:func:`check_hooks`, then pluggy's own
    checks); failures are reported, not raised."""
    record = PluginRecord(info=info)
    records[info.name] = record
    try:
        check_hooks(pm, plugin)
        pm.register(plugin, name=info.name)
        pm.check_pending()
    except BaseException as e:  # pluggy raises ValueError / PluginValidationError for bad plugins
        if not is_plugin_failure(e):
            raise
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
    """Import and register every allowed ``oml`` entry point, each guarded on its own.

    A name of ``allow`` that is neither an installed entry point nor a distribution is reported (a warning, or
    :class:`PluginLoadError` when ``strict``) with the installed names and the close matches.
    """
    installed = list(iter_entry_points())
    if allow is not None:
        report_unknown_allowed(allow, installed, strict)
    for ep in installed:
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
        except BaseException as e:  # a third-party plugin's import (even sys.exit) must not end the host
            if not is_plugin_failure(e):
                raise
            records[ep.name] = PluginRecord(
                info=info, error=report_plugin_error(info, "import failed", e, strict)
            )
            continue
        register_plugin(pm, module, info, records, strict)


def report_unknown_allowed(allow: Collection[str], installed: Collection[EntryPoint], strict: bool) -> None:
    """Warn (or raise :class:`PluginLoadError` when ``strict``) for each name of the allow-list ``allow`` that no
    entry point of ``installed`` has as its name or its distribution's (the core's built-ins always count).

    The message names the unknown name, the close matches (difflib) and the installed entry-point names.
    """
    ep_names = sorted({ep.name for ep in installed})
    distributions = {info.distribution for info in map(plugin_info_for, installed) if info.distribution}
    known = {BUILTINS_NAME, BUILTINS_DISTRIBUTION, *ep_names, *distributions}
    # suggested: the entry-point names, and the distributions not spelled like one (oml-losses ~ oml_losses)
    spelled = {_normalized(n) for n in ep_names}
    suggestions = sorted({*ep_names, *(d for d in distributions if _normalized(d) not in spelled)})
    for name in sorted(set(allow) - known):
        close = difflib.get_close_matches(name, suggestions, n=3, cutoff=0.6)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        message = (
            f"The plugin allow-list ({ENV_ALLOW}) names {name!r}, which is no installed oml plugin "
            f"(entry point or distribution).{hint} "
            f"Installed oml entry points: {', '.join(ep_names) if ep_names else '(none)'}."
        )
        if strict:
            raise PluginLoadError(message)
        warnings.warn(f"{message} (set {ENV_STRICT}=1 to raise)", PluginWarning, stacklevel=3)


def _normalized(name: str) -> str:
    """``name`` lower-cased with ``-`` and ``.`` as ``_`` (how a distribution's name maps to a module's)."""
    return name.lower().replace("-", "_").replace(".", "_")
