"""Plugin discovery: a fresh pluggy ``PluginManager`` with the built-ins and the ``oml`` entry points.

Each entry point is loaded on its own inside ``try``: a broken plugin is skipped with a
:class:`~oml_core.registry.errors.PluginWarning` naming it, its distribution and the error, or raises
:class:`~oml_core.registry.errors.PluginLoadError` when strict (``OML_STRICT_PLUGINS=1``). "Broken" means any
``BaseException`` out of the plugin's import or hooks, ``SystemExit`` included (a plugin calling
``sys.exit`` must not end the host's command), except :data:`PROPAGATED_EXCEPTIONS` (a user's Ctrl-C).
``OML_LOAD_PLUGINS`` is an allow-list of entry-point or distribution names (comma separated; set and empty
means none); a name in it that no installed entry point or distribution has is reported the same way. The
built-ins of the core are always loaded.

Entry-point names are settled from the distributions' metadata before anything is imported
(:func:`discover_plugins`): the name of a first-party plugin (:data:`FIRST_PARTY_PLUGINS`: ``oml_core`` for the
built-ins, ``oml_losses`` for oml-losses, ...) belongs to its distribution alone, so another distribution
claiming it is refused, whether the first-party one is installed or not; a name that several third-party
distributions claim loads none of them. A refused plugin is reported as a broken one is, naming the name and the
distributions.

Every plugin's import and hook runs under :func:`watch_loading`: a watchdog thread warns, once, when it has been
running for ``OML_PLUGIN_SLOW_SECONDS`` (default 5; 0: never), naming the plugin, where it is stuck and the
allow-list that skips it. ``OML_PLUGIN_TRACE=1`` warns before each step ("loading plugin X (dist 1.2): import"),
so that the last such line names a plugin that ends the process.

Under a :class:`LoadingGuard` (:func:`guarded_loading`; every ``oml`` command has one,
:mod:`oml_core.registry.vetting`), a plugin is imported only once it has passed a check in a process of its own:
the guard's verdicts (:meth:`LoadingGuard.vet`) name the plugins to skip, each reported as a broken plugin is; and
a step that still runs after ``OML_PLUGIN_TIMEOUT`` seconds (default 60) is handed to the guard
(:meth:`LoadingGuard.hung`), which ends the command with one line: a thread cannot stop a hung import or hook.
Without a guard (library use) every allowed plugin is imported in the process and never stopped.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import logging
import math
import os
import threading
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from types import MappingProxyType
from typing import Any, Protocol

import pluggy

from oml_core.markers import PROJECT_NAME
from oml_core.registry import hookspecs
from oml_core.registry.catalog import FIRST_PARTY_PROVIDERS
from oml_core.registry.entry import PluginInfo
from oml_core.registry.errors import (
    ConfigError,
    PluginLoadError,
    PluginWarning,
    describe_error,
    is_plugin_failure,
)
from oml_core.registry.kinds import KINDS
from oml_core.utils.lazy import Component

ENV_ALLOW = "OML_LOAD_PLUGINS"
ENV_STRICT = "OML_STRICT_PLUGINS"
#: Seconds after which a plugin's import or hook still running is reported (0: never).
ENV_SLOW = "OML_PLUGIN_SLOW_SECONDS"
DEFAULT_SLOW_SECONDS = 5.0
#: Seconds that one step of loading a plugin (its import, a hook) may take before it counts as hung: in the
#: isolated checks (:mod:`oml_core.registry.isolation`) and, under a :class:`LoadingGuard`, in the command itself.
ENV_TIMEOUT = "OML_PLUGIN_TIMEOUT"
DEFAULT_TIMEOUT = 60.0
#: Set to 1 (true, yes, on), a warning names each plugin's import and hook before it runs.
ENV_TRACE = "OML_PLUGIN_TRACE"
#: The logger that records, at ``DEBUG``, each step of loading a plugin (``<plugin name>\t<step>``) as it begins;
#: silent unless configured (``oml plugins --check`` reads it from each plugin's process).
LOADING_LOGGER = "oml_core.registry.loading"
BUILTINS_NAME = "oml_core"
BUILTINS_DISTRIBUTION = "oml-core"


def normalized_name(name: str) -> str:
    """``name`` lower-cased with ``-`` and ``.`` as ``_`` (how a distribution's name maps to a module's)."""
    return name.lower().replace("-", "_").replace(".", "_")


#: The entry-point names reserved to oml's first-party distributions: the built-ins' name, and the name of each
#: distribution of the first-party catalog (:mod:`~oml_core.registry.catalog`) spelled as its package
#: (``oml_losses`` -> ``oml-losses``).
FIRST_PARTY_PLUGINS: MappingProxyType[str, str] = MappingProxyType(
    {
        BUILTINS_NAME: BUILTINS_DISTRIBUTION,
        **{normalized_name(d): d for d in sorted(set(FIRST_PARTY_PROVIDERS.values()))},
    }
)

_loading_log = logging.getLogger(LOADING_LOGGER)


def is_first_party(info: PluginInfo) -> bool:
    """Whether ``info`` is a first-party plugin: the core's built-ins or a distribution of this repository, loaded
    under its own entry-point name (:data:`FIRST_PARTY_PLUGINS`). A name that a first-party plugin and another
    give resolves to the first party's (see :meth:`~oml_core.registry.registry.Registry.get`)."""
    owner = FIRST_PARTY_PLUGINS.get(info.name)
    return owner is not None and normalized_name(info.distribution or "") == normalized_name(owner)


@dataclass
class PluginRecord:
    """What ``oml plugins`` reports about one plugin: where it comes from, its hooks, or its load error.

    Attributes:
        info: The plugin's name, distribution and version.
        hooks: The hooks it contributes to, by a ``@hookimpl`` function or by its declarations (a row of kind
            ``loss`` in ``OML_COMPONENTS`` counts as ``oml_register_losses``).
        error: Why it failed to load, or ``None``.
        components: Its declared table, ``OML_COMPONENTS`` (:func:`read_declarations`), registered by the registry.
        config_dirs: Its declared config search-path entries, ``OML_CONFIG_DIRS``.
    """

    info: PluginInfo
    hooks: list[str] = field(default_factory=list)
    error: str | None = None
    components: tuple[Component, ...] = ()
    config_dirs: tuple[str, ...] = ()


@dataclass(frozen=True)
class FoundPlugin:
    """An installed ``oml`` entry point, as :func:`discover_plugins` settled it (nothing imported).

    Attributes:
        info: The plugin's name, distribution and version.
        entry_point: Its entry point.
        refused: ``None`` for a plugin to load; else the one-line message (already reported) of why it is not.
    """

    info: PluginInfo
    entry_point: EntryPoint
    refused: str | None = None


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


def _flag_from_env(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def strict_from_env() -> bool:
    """``OML_STRICT_PLUGINS`` set to 1/true/yes makes a broken plugin raise instead of warn."""
    return _flag_from_env(ENV_STRICT)


def slow_seconds_from_env() -> float:
    """``OML_PLUGIN_SLOW_SECONDS``: after how many seconds a plugin's import or hook is reported as still running
    (:data:`DEFAULT_SLOW_SECONDS` when unset or empty; 0: never).

    Raises:
        ConfigError: the value is not a finite number >= 0.
    """
    seconds = _seconds_from_env(ENV_SLOW, DEFAULT_SLOW_SECONDS)
    if not seconds >= 0:  # NaN too
        raise ConfigError(
            f"{ENV_SLOW} must be a number of seconds >= 0 (0: never warn), got {os.environ[ENV_SLOW].strip()!r}"
        )
    return seconds


def timeout_from_env() -> float:
    """``OML_PLUGIN_TIMEOUT``: the seconds one step of loading a plugin may take before it counts as hung
    (:data:`DEFAULT_TIMEOUT` when unset or empty).

    Raises:
        ConfigError: the value is not a finite number > 0.
    """
    seconds = _seconds_from_env(ENV_TIMEOUT, DEFAULT_TIMEOUT)
    if not seconds > 0:  # NaN too
        raise ConfigError(
            f"{ENV_TIMEOUT} must be a number of seconds > 0, got {os.environ[ENV_TIMEOUT].strip()!r}"
        )
    return seconds


def _seconds_from_env(name: str, default: float) -> float:
    """The number of seconds of the variable ``name`` (``default`` when unset or empty; NaN when it is no finite
    number, which its caller refuses)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        seconds = float(raw)
    except ValueError:
        return math.nan
    return seconds if math.isfinite(seconds) else math.nan


def is_allowed(info: PluginInfo, allow: Collection[str] | None) -> bool:
    """Whether the allow-list ``allow`` (``None``: everything) names the plugin or its distribution."""
    return allow is None or info.name in allow or info.distribution in allow


def iter_entry_points() -> Iterator[EntryPoint]:
    """Entry points of group ``oml`` sorted by name, one per (name, distribution) even if a distribution is seen
    twice."""
    seen: set[tuple[str, str]] = set()
    for ep in sorted(entry_points(group=PROJECT_NAME), key=lambda e: e.name):
        dist = getattr(ep, "dist", None)
        key = (ep.name, normalized_name(dist.metadata["Name"]) if dist is not None else ep.value)
        if key not in seen:
            seen.add(key)
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


def installed_distributions(allow: Collection[str] | None) -> list[tuple[str, str | None]]:
    """``(distribution, version)`` of each distribution with an ``oml`` entry point that ``allow`` admits, in
    the order of their entry points' names, read from the metadata alone: no plugin is imported."""
    found: dict[str, str | None] = {}
    for info in map(plugin_info_for, iter_entry_points()):
        if info.distribution is not None and is_allowed(info, allow):
            found.setdefault(info.distribution, info.version)
    return list(found.items())


def report_plugin_failure(message: str, strict: bool, cause: BaseException | None = None) -> str:
    """Warn with ``message`` (a :class:`PluginWarning`), or raise it as a :class:`PluginLoadError` (chained to
    ``cause``) when ``strict``; returns ``message``, to be stored on the plugin's record."""
    if strict:
        raise PluginLoadError(message) from cause
    warnings.warn(f"{message} (skipped; set {ENV_STRICT}=1 to raise)", PluginWarning, stacklevel=3)
    return message


def report_plugin_error(info: PluginInfo, what: str, error: BaseException, strict: bool) -> str:
    """Turn a plugin failure into a warning (or a :class:`PluginLoadError` when ``strict``).

    Returns:
        The one-line message ``oml plugin <provider>: <what>: <error>``, to be stored on the plugin's record.

    Raises:
        PluginLoadError: ``strict`` is true (chained to ``error``).
    """
    return report_plugin_failure(
        f"oml plugin {info.provider}: {what}: {describe_error(error)}", strict, error
    )


# ---------------------------------------------------------------------------------------------- guard
class LoadingGuard(Protocol):
    """What keeps a command safe from its plugins (see the module's docstring; the CLI's is
    :class:`oml_core.registry.vetting.PluginVetting`)."""

    timeout: float

    def vet(self, plugins: Sequence[FoundPlugin]) -> Mapping[PluginInfo, str | None]:
        """The verdict of each of ``plugins`` (none of them imported here): ``None`` to import it, or the one-line
        failure (``oml plugin x (x-plugin 0.3): exited with status 3 during import``) for which it is skipped."""
        ...

    def hung(self, plugin: PluginInfo, step: str) -> None:
        """Called from a watchdog's thread when ``step`` of loading ``plugin`` has run for ``timeout`` seconds in
        this process; it may end the process."""
        ...


_guard: contextvars.ContextVar[LoadingGuard | None] = contextvars.ContextVar(
    "oml_loading_guard", default=None
)


@contextlib.contextmanager
def guarded_loading(guard: LoadingGuard) -> Iterator[None]:
    """Load the plugins under ``guard`` in the block: every registry that loads entry points imports only the
    plugins that it passes, and a step that hangs is handed to it (see the module's docstring)."""
    token = _guard.set(guard)
    try:
        yield
    finally:
        _guard.reset(token)


# ------------------------------------------------------------------------------------------- watching
def skip_hint(plugin: PluginInfo) -> str:
    """``; OML_LOAD_PLUGINS=<every other allowed entry point> skips it`` (empty for the core's built-ins, which
    are always loaded, and for plugins added in code)."""
    if plugin.name == BUILTINS_NAME or plugin.distribution is None:
        return ""
    allow = allow_list_from_env()
    names = allow if allow is not None else {ep.name for ep in iter_entry_points()}
    others = sorted(set(names) - {plugin.name, plugin.distribution})
    return f"; {ENV_ALLOW}={','.join(others)} skips it"


def _warn_still_loading(plugin: PluginInfo, step: str, seconds: float) -> None:
    warnings.warn(
        f"still loading plugin {plugin.provider} in {step} after {seconds:g} s{skip_hint(plugin)}",
        PluginWarning,
        stacklevel=1,  # from the watchdog's thread: there is no caller to point at
    )


@contextlib.contextmanager
def watch_loading(plugin: PluginInfo, step: str) -> Iterator[None]:
    """Run one step of loading ``plugin`` (``import``, ``hook oml_register_losses``) under a watchdog.

    The step is logged to :data:`LOADING_LOGGER` (``DEBUG``) as it begins, and warned when ``OML_PLUGIN_TRACE``
    is set; a ``threading.Timer`` warns (a :class:`PluginWarning`) if it still runs after
    ``OML_PLUGIN_SLOW_SECONDS``: ``still loading plugin X (dist 1.2) in hook oml_register_losses after 5 s;
    OML_LOAD_PLUGINS=<the other plugins> skips it``. Under a :class:`LoadingGuard`, a second one hands the step
    to the guard after its ``timeout`` (:meth:`LoadingGuard.hung`); without one, the step is never stopped.

    Raises:
        ConfigError: ``OML_PLUGIN_SLOW_SECONDS`` is not a number of seconds >= 0 (before the step runs).
    """
    seconds = slow_seconds_from_env()
    _loading_log.debug("%s\t%s", plugin.name, step)
    if _flag_from_env(ENV_TRACE):
        warnings.warn(f"loading plugin {plugin.provider}: {step}", PluginWarning, stacklevel=3)
    timers = []
    if seconds > 0:
        timers.append(threading.Timer(seconds, _warn_still_loading, args=(plugin, step, seconds)))
    guard = _guard.get()
    if guard is not None:
        timers.append(threading.Timer(guard.timeout, guard.hung, args=(plugin, step)))
    for timer in timers:
        timer.daemon = True  # a plugin stuck for good must not keep the process alive at exit
        timer.start()
    try:
        yield
    finally:
        for timer in timers:
            timer.cancel()


# ------------------------------------------------------------------------------------------ discovery
def discover_plugins(allow: Collection[str] | None, strict: bool) -> list[FoundPlugin]:
    """The installed ``oml`` entry points that ``allow`` admits, each to load or refused, from metadata alone.

    A first-party name (:data:`FIRST_PARTY_PLUGINS`) is loaded from its own distribution only; any other
    distribution claiming it is refused. A name that several other distributions claim is refused for every one
    of them. Each refusal (and each name of ``allow`` that nothing installed has, see
    :func:`report_unknown_allowed`) is reported: a :class:`PluginWarning`, or a :class:`PluginLoadError` when
    ``strict``.
    """
    installed = list(iter_entry_points())
    if allow is not None:
        report_unknown_allowed(allow, installed, strict)
    claims: dict[str, list[tuple[EntryPoint, PluginInfo]]] = {}
    for ep in installed:  # sorted by name, then by distribution: the same order wherever they are installed
        claims.setdefault(ep.name, []).append((ep, plugin_info_for(ep)))
    for claimants in claims.values():
        claimants.sort(key=lambda claim: normalized_name(claim[1].distribution or ""))
    found = []
    for name, claimants in claims.items():
        refusals = refused_claimants(name, [info for _, info in claimants])
        for ep, info in claimants:
            if not is_allowed(info, allow):
                continue
            reason = refusals.get(info)
            refused = None
            if reason is not None:
                refused = report_plugin_failure(f"oml plugin {info.provider}: refused: {reason}", strict)
            found.append(FoundPlugin(info, ep, refused))
    return found


def refused_claimants(name: str, claimants: list[PluginInfo]) -> dict[PluginInfo, str]:
    """Why each refused one of the ``claimants`` of the entry-point name ``name`` is refused (the others may
    load); see :func:`discover_plugins`."""
    owner = FIRST_PARTY_PLUGINS.get(name)
    if owner is None:
        if len(claimants) == 1:
            return {}
        listed = ", ".join(f"{info.distribution} {info.version or '?'}" for info in claimants)
        reason = (
            f"the entry-point name {name!r} is claimed by {len(claimants)} distributions ({listed}); "
            f"none of them is loaded: uninstall all but one"
        )
        return dict.fromkeys(claimants, reason)
    own = [info for info in claimants if normalized_name(info.distribution or "") == normalized_name(owner)]
    if name == BUILTINS_NAME:
        holder = "oml-core's built-in plugin"
    else:
        state = f"installed: {own[0].version or '?'}" if own else "not installed"
        holder = f"oml's first-party distribution {owner} ({state})"
    return {
        info: (
            f"the entry-point name {name!r} is reserved for {holder}; {info.distribution or info.module} must give "
            f"its entry point a name of its own"
        )
        for info in claimants
        if info not in own
    }


def import_plugin(ep: EntryPoint, info: PluginInfo, strict: bool) -> tuple[object | None, str | None]:
    """Import the plugin object of ``ep`` under :func:`watch_loading` (step ``import``).

    Returns:
        ``(plugin, None)``, or ``(None, message)`` when the import failed (reported, see
        :func:`report_plugin_error`).

    Raises:
        PluginLoadError: the import failed and ``strict``.
    """
    with watch_loading(info, "import"):
        try:
            return ep.load(), None
        except BaseException as e:  # a third-party plugin's import (even sys.exit) must not end the host
            if not is_plugin_failure(e):
                raise
            return None, report_plugin_error(info, "import failed", e, strict)


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


#: The module-level name under which a plugin declares its table of components (a tuple of
#: :class:`~oml_core.utils.lazy.Component` rows), registered for it with no hook function.
COMPONENTS_DECLARATION = "OML_COMPONENTS"
#: The module-level name under which a plugin declares its config search-path entries (a tuple of strings,
#: ``"pkg://my_pkg.configs"``), registered for it as ``oml_register_config_dirs`` would.
CONFIG_DIRS_DECLARATION = "OML_CONFIG_DIRS"
DECLARATIONS = (COMPONENTS_DECLARATION, CONFIG_DIRS_DECLARATION)
CONFIG_DIRS_HOOK = "oml_register_config_dirs"


def read_declarations(plugin: object) -> tuple[tuple[Component, ...], tuple[str, ...]]:
    """The plugin's declared table (``OML_COMPONENTS``) and config search-path entries (``OML_CONFIG_DIRS``),
    ``()`` for one it does not declare; read, checked and returned as tuples, nothing imported (a row's factory
    stays the lazy ``"module:attr"`` string it is).

    Raises:
        pluggy.PluginValidationError: a declaration that is not a tuple or list; an ``OML_COMPONENTS`` item that
            is not a ``Component`` or whose kind is no oml kind (naming the closest); an ``OML_CONFIG_DIRS`` item
            that is not a non-empty string; an ``OML_*`` attribute spelt close to a declaration but not as it
            (``OML_COMPONENT``), which oml would silently ignore.
    """
    for attribute in dir(plugin):
        if attribute.startswith("OML_") and attribute not in DECLARATIONS:
            close = difflib.get_close_matches(attribute, DECLARATIONS, n=1, cutoff=0.8)
            if close:
                raise pluggy.PluginValidationError(
                    plugin,
                    f"{attribute} is no oml declaration, so it is never read; did you mean {close[0]!r}?",
                )
    components = _declared(plugin, COMPONENTS_DECLARATION)
    for index, row in enumerate(components):
        if not isinstance(row, Component):
            raise pluggy.PluginValidationError(
                plugin,
                f"{COMPONENTS_DECLARATION}[{index}] must be a oml_core.utils.lazy.Component, got {row!r}",
            )
        if row.kind not in KINDS:
            close = difflib.get_close_matches(str(row.kind), list(KINDS), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f" (the kinds: {', '.join(KINDS)})"
            raise pluggy.PluginValidationError(
                plugin, f"{COMPONENTS_DECLARATION}[{index}] ({row.name!r}): {row.kind!r} is no oml kind{hint}"
            )
    config_dirs = _declared(plugin, CONFIG_DIRS_DECLARATION)
    for index, entry in enumerate(config_dirs):
        if not isinstance(entry, str) or not entry:
            raise pluggy.PluginValidationError(
                plugin,
                f"{CONFIG_DIRS_DECLARATION}[{index}] must be a search path such as 'pkg://my_pkg.configs', "
                f"got {entry!r}",
            )
    return components, config_dirs


def _declared(plugin: object, declaration: str) -> tuple[Any, ...]:
    """The items of the plugin's ``declaration`` as a tuple (``()`` when it has none).

    Raises:
        pluggy.PluginValidationError: the declaration is not a tuple or list.
    """
    value = getattr(plugin, declaration, ())
    if not isinstance(value, (tuple, list)):
        raise pluggy.PluginValidationError(
            plugin, f"{declaration} must be a tuple or list, got {type(value).__name__}"
        )
    return tuple(value)


def declared_hooks(components: tuple[Component, ...], config_dirs: tuple[str, ...]) -> set[str]:
    """The hooks that a plugin's declarations stand for: the hook of each row's kind, and
    ``oml_register_config_dirs`` when it declares config dirs."""
    return {KINDS[row.kind].hook for row in components} | ({CONFIG_DIRS_HOOK} if config_dirs else set())


def register_plugin(
    pm: pluggy.PluginManager, plugin: object, info: PluginInfo, records: dict[str, PluginRecord], strict: bool
) -> None:
    """Register ``plugin`` under ``info.name``, validating its hooks (:func:`check_hooks`, then pluggy's own
    checks) and reading its declarations (:func:`read_declarations`) onto its record; failures are reported, not
    raised."""
    record = PluginRecord(info=info)
    records[info.name] = record
    try:
        check_hooks(pm, plugin)
        components, config_dirs = read_declarations(plugin)
        pm.register(plugin, name=info.name)
        pm.check_pending()
    except BaseException as e:  # pluggy raises ValueError / PluginValidationError for bad plugins
        if not is_plugin_failure(e):
            raise
        if pm.is_registered(plugin):
            pm.unregister(plugin)
        record.error = report_plugin_error(info, "invalid plugin", e, strict)
        return
    record.components, record.config_dirs = components, config_dirs
    implemented = {caller.name for caller in pm.get_hookcallers(plugin) or ()}
    record.hooks = sorted(implemented | declared_hooks(components, config_dirs))


def load_entry_point_plugins(
    pm: pluggy.PluginManager,
    records: dict[str, PluginRecord],
    *,
    allow: Collection[str] | None,
    strict: bool,
) -> None:
    """Import and register every allowed ``oml`` entry point (:func:`discover_plugins`), each guarded on its own.

    A refused plugin's record is keyed by its ``provider`` (``oml_losses (squatter 0.3)``), as its name is another
    plugin's; every other record by the plugin's name. Under a :class:`LoadingGuard`, a plugin that it does not
    pass is not imported: its failure is reported (a :class:`PluginWarning`, or a :class:`PluginLoadError` when
    ``strict``) and is its record's error.
    """
    discovered = discover_plugins(allow, strict)
    guard = _guard.get()
    verdicts = guard.vet([f for f in discovered if f.refused is None]) if guard is not None else {}
    for found in discovered:
        info = found.info
        if found.refused is not None:
            records[info.provider] = PluginRecord(info=info, error=found.refused)
            continue
        failure = verdicts.get(info)
        if failure is not None:
            records[info.name] = PluginRecord(info=info, error=report_plugin_failure(failure, strict))
            continue
        plugin, error = import_plugin(found.entry_point, info, strict)
        if error is not None:
            records[info.name] = PluginRecord(info=info, error=error)
            continue
        register_plugin(pm, plugin, info, records, strict)


def report_unknown_allowed(allow: Collection[str], installed: Collection[EntryPoint], strict: bool) -> None:
    """Warn (or raise :class:`PluginLoadError` when ``strict``) for each name of the allow-list ``allow`` that no
    entry point of ``installed`` has as its name or its distribution's (the core's built-ins always count).

    The message names the unknown name, the close matches (difflib) and the installed entry-point names.
    """
    ep_names = sorted({ep.name for ep in installed})
    distributions = {info.distribution for info in map(plugin_info_for, installed) if info.distribution}
    known = {BUILTINS_NAME, BUILTINS_DISTRIBUTION, *ep_names, *distributions}
    # suggested: the entry-point names, and the distributions not spelled like one (oml-losses ~ oml_losses)
    spelled = {normalized_name(n) for n in ep_names}
    suggestions = sorted({*ep_names, *(d for d in distributions if normalized_name(d) not in spelled)})
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
