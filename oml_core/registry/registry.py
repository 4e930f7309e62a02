"""The registry: names of every kind, collected from plugins through the hooks, built from configs.

Configs keep OML's shape, ``{name: ..., args: {...}}``; an argument that is itself such a spec (a loss's
``miner``) is built first, its kind told by the argument's name (``miner``, ``extractor``, ``criterion``)
or else by its type annotation. Example::

    registry = Registry()
    loss = registry.build("loss", {"name": "triplet_with_miner",
                                   "args": {"margin": 0.1, "miner": {"name": "all_triplets", "args": {}}}})
    opt = registry.build("optimizer", {"name": "adam", "args": {"lr": 1e-3}}, params=model.parameters())
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from oml_core.registry.arg_types import check_argument_types, check_no_import_paths, is_import_path
from oml_core.registry.catalog import FIRST_PARTY_PROVIDERS
from oml_core.registry.entry import Entry, PluginInfo
from oml_core.registry.errors import (
    AmbiguousNameError,
    ConfigError,
    DuplicateRegistrationError,
    InterfaceError,
    MissingArgumentError,
    RegistryError,
    UnexpectedArgumentError,
    UnknownNameError,
    is_plugin_failure,
)
from oml_core.registry.kinds import KINDS, Kind, get_kind
from oml_core.registry.manager import (
    BUILTINS_NAME,
    COMPONENTS_DECLARATION,
    PluginRecord,
    allow_list_from_env,
    create_plugin_manager,
    is_first_party,
    load_entry_point_plugins,
    register_plugin,
    report_plugin_error,
    strict_from_env,
    watch_loading,
)
from oml_core.registry.specs import (
    SPEC_KEYS,
    is_spec,
    nested_specs,
    parameter_names,
    required_arguments,
    to_plain,
)
from oml_core.utils.imports import resolve
from oml_core.utils.lazy import register_components

#: The only kind whose components may be registered ``every_run=True`` (added to every training run).
EVERY_RUN_KIND = "callback"

#: The attribute that :meth:`Registry.build` sets on an exception raised by a component's factory: its entry
#: (read it with :func:`failed_component`).
FAILED_COMPONENT_ATTR = "oml_failed_component"


def config_dir_path(config_dir: str) -> Any:
    """The folder of a hydra search-path entry: ``pkg://package.sub`` (a ``Traversable`` of the package) or
    ``file:///path``; ``None`` for another scheme or a package that cannot be imported."""
    scheme, _, location = config_dir.partition("://")
    if scheme == "pkg":
        import importlib.resources

        try:
            return importlib.resources.files(location.replace("/", "."))
        except ModuleNotFoundError:
            return None
    if scheme == "file":
        from pathlib import Path

        return Path(location)
    return None


def config_dir_folders(search_dirs: Sequence[str]) -> list[Any]:
    """The folders of the hydra search-path entries ``search_dirs`` (``pkg://...``, ``file://...`` or a plain
    folder), in their order, as ``Path`` or ``Traversable``; an entry :func:`config_dir_path` cannot read is
    left out."""
    from pathlib import Path

    folders = (config_dir_path(entry) if "://" in entry else Path(entry) for entry in search_dirs)
    return [folder for folder in folders if folder is not None]


def find_option_file(search_dirs: Sequence[str], group: str, option: str) -> Any:
    """The first ``<group>/<option>.yaml`` in the hydra search-path entries ``search_dirs`` (``pkg://...``,
    ``file://...`` or a plain folder), in their order, as a ``Path`` or ``Traversable``; None when none has it."""
    for folder in config_dir_folders(search_dirs):
        candidate = folder / group / f"{option}.yaml"
        if candidate.is_file():
            return candidate
    return None


class Registry:
    """Every component of every kind that the loaded plugins provide.

    Args:
        plugins: Extra plugin objects (modules, classes or instances with ``@hookimpl`` methods) to
            register, each given as the object or as ``(name, object)``.
        load_entrypoints: Discover the installed ``oml`` entry points.
        builtins: Register the core's own plugin (optimizers, schedulers, transforms, retrieval metrics).
        allow: Allow-list of entry-point or distribution names; defaults to ``OML_LOAD_PLUGINS``.
        strict: Raise on a broken plugin instead of warning; defaults to ``OML_STRICT_PLUGINS``.
    """

    def __init__(
        self,
        plugins: Iterable[object | tuple[str, object]] = (),
        *,
        load_entrypoints: bool = True,
        builtins: bool = True,
        allow: Collection[str] | None = None,
        strict: bool | None = None,
    ) -> None:
        self.pm = create_plugin_manager()
        self.strict = strict_from_env() if strict is None else strict
        self._records: dict[str, PluginRecord] = {}
        self._entries: dict[str, list[Entry]] | None = None
        self._config_dirs: list[str] = []
        if builtins:
            from oml_core import __version__
            from oml_core.builtins import plugin as builtins_plugin

            info = PluginInfo(BUILTINS_NAME, "oml-core", __version__, builtins_plugin.__name__)
            register_plugin(self.pm, builtins_plugin, info, self._records, self.strict)
        if load_entrypoints:
            allowed = allow_list_from_env() if allow is None else frozenset(allow)
            load_entry_point_plugins(self.pm, self._records, allow=allowed, strict=self.strict)
        for plugin in plugins:
            name, obj = plugin if isinstance(plugin, tuple) else (None, plugin)
            self.add_plugin(obj, name=name)

    # ----------------------------------------------------------------------------------------- plugins
    def add_plugin(
        self,
        plugin: object,
        *,
        name: str | None = None,
        distribution: str | None = None,
        version: str | None = None,
    ) -> None:
        """Register a plugin object given in code (tests, notebooks); it is validated like an entry point."""
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        module = getattr(plugin, "__name__", None) or type(plugin).__module__
        register_plugin(
            self.pm, plugin, PluginInfo(name, distribution, version, module), self._records, self.strict
        )
        self._entries = None

    def remove_plugin(self, name: str) -> None:
        """Unregister the plugin ``name`` (added in code or loaded) and forget what it registered.

        Raises:
            KeyError: no plugin of that name.
        """
        if name not in self._records:
            raise KeyError(f"no plugin named {name!r}; plugins: {sorted(self._records)}")
        if self.pm.get_plugin(name) is not None:
            self.pm.unregister(name=name)
        del self._records[name]
        self._entries = None

    def plugins(self) -> list[PluginRecord]:
        """Every plugin seen, loaded or failed, in load order (built-ins first)."""
        self._collect()
        return list(self._records.values())

    def plugin_names(self) -> frozenset[str]:
        """The names of every plugin seen, loaded or failed: the ``plugin`` of a qualified ``plugin:name``."""
        return frozenset(self._records)

    def provided_by(self, plugin_name: str) -> dict[str, list[str]]:
        """``{kind: [names]}`` that the plugin ``plugin_name`` registers."""
        provided: dict[str, list[str]] = {}
        for kind, entries in self._collect().items():
            names = sorted(e.name for e in entries if e.plugin.name == plugin_name)
            if names:
                provided[kind] = names
        return provided

    def config_dirs(self) -> list[str]:
        """Hydra search-path entries registered through ``oml_register_config_dirs``."""
        self._collect()
        return list(self._config_dirs)

    def default_config(self, kind: str, name: str) -> dict[str, Any] | None:
        """The default ``{name, args}`` config of a component, or ``None`` when no config dir has one.

        A plugin ships the default config of its component ``name`` of kind ``kind`` as
        ``<kind>/<name>.yaml`` in a config dir it registers with ``oml_register_config_dirs`` (``pkg://package.sub``
        or ``file:///path``); the first dir that has the file wins. On the command line the same file is a
        hydra group option, e.g. ``oml train +sampler@sampler=category_balance``.

        Raises:
            ConfigError: the file is not a ``{name, args}`` mapping naming ``name``.
        """
        get_kind(kind)
        candidate = find_option_file(self.config_dirs(), kind, name)
        if candidate is None:
            return None
        from omegaconf import OmegaConf

        spec = to_plain(OmegaConf.load(str(candidate)))
        if not is_spec(spec) or spec["name"].rpartition(":")[2] != name:
            raise ConfigError(
                f"{candidate}: a default config must be a mapping {{name: {name}, args: {{...}}}}, got {spec!r}"
            )
        return spec

    # ------------------------------------------------------------------------------------- collection
    def _collect(self) -> dict[str, list[Entry]]:
        if self._entries is not None:
            return self._entries
        entries: dict[str, list[Entry]] = {kind: [] for kind in KINDS}
        config_dirs: list[str] = []
        for kind in KINDS.values():
            # one callback per plugin and kind: a name in both its table and a hook of its is registered twice
            callbacks: dict[str, Callable[..., None]] = {}
            for name, record in self._records.items():  # the declared tables first, in load order
                if any(row.kind == kind.name for row in record.components):
                    callbacks[name] = self._registering(kind, name, entries[kind.name])
                    self._register_table(record, kind, callbacks[name])
            for impl in getattr(self.pm.hook, kind.hook).get_hookimpls():
                if impl.plugin_name not in callbacks:
                    callbacks[impl.plugin_name] = self._registering(
                        kind, impl.plugin_name, entries[kind.name]
                    )
                self._call_impl(impl, callbacks[impl.plugin_name])
        for record in self._records.values():
            config_dirs.extend(record.config_dirs)
        for impl in self.pm.hook.oml_register_config_dirs.get_hookimpls():
            self._call_impl(impl, config_dirs.append)
        self._entries, self._config_dirs = entries, config_dirs
        return entries

    def _register_table(self, record: PluginRecord, kind: Kind, register: Callable[..., None]) -> None:
        """Register the rows of kind ``kind`` of the plugin's declared table (``OML_COMPONENTS``) with its
        ``register`` callback, as a hook would (:func:`~oml_core.utils.lazy.register_components`); a row that
        cannot be registered is reported as a failing hook is, naming the declaration."""
        try:
            register_components(register, record.components, kind.name)
        except (RegistryError, ValueError, TypeError) as e:
            record.error = report_plugin_error(
                record.info, f"{COMPONENTS_DECLARATION} failed", e, self.strict
            )

    def _call_impl(self, impl: Any, register: Callable[..., None]) -> None:
        """Call one plugin's hook with its own ``register`` callback; a failing hook is reported (any
        ``BaseException``, ``SystemExit`` included; a ``KeyboardInterrupt`` or ``GeneratorExit`` propagates)."""
        record = self._records[impl.plugin_name]
        with watch_loading(record.info, f"hook {impl.function.__name__}"):  # warns when it takes long
            try:
                impl.function(**{arg: register for arg in impl.argnames})
            except BaseException as e:
                if not is_plugin_failure(e):
                    raise
                record.error = report_plugin_error(
                    record.info, f"hook {impl.function.__name__} failed", e, self.strict
                )

    def _registering(self, kind: Kind, plugin_name: str, sink: list[Entry]) -> Callable[..., None]:
        info = self._records[plugin_name].info
        taken: set[str] = set()  # the names and aliases this plugin registered for this kind so far

        def register(
            name: str,
            factory: Callable[..., Any] | str,
            *,
            aliases: Iterable[str] = (),
            description: str | None = None,
            every_run: bool = False,
        ) -> None:
            if not isinstance(name, str) or not name or ":" in name:
                raise ValueError(f"{kind.name} name must be a non-empty string without ':', got {name!r}")
            if not (isinstance(factory, str) and ":" in factory) and not callable(factory):
                raise TypeError(f"{kind.name} {name!r}: factory must be callable or a 'module:attr' string")
            if not isinstance(every_run, bool):
                raise TypeError(f"{kind.name} {name!r}: every_run must be True or False, got {every_run!r}")
            if every_run and kind.name != EVERY_RUN_KIND:
                raise ValueError(
                    f"{kind.name} {name!r} of plugin {info.provider}: only a {EVERY_RUN_KIND} can be added to "
                    f"every training run (every_run=True), not a {kind.name}"
                )
            self._check_factory_class(kind, name, factory, info)
            for n in (name, *aliases):
                if n in kind.reserved:
                    raise ValueError(
                        f"{kind.name} {n!r} of plugin {info.provider}: {n!r} is a built-in {kind.name} of oml; "
                        f"register it under another name"
                    )
                if n in taken:
                    raise DuplicateRegistrationError(
                        f"plugin {info.provider} registers {kind.name} {n!r} twice"
                    )
            entry = Entry(kind.name, name, factory, info, tuple(aliases), description, every_run)
            taken.update((entry.name, *entry.aliases))
            sink.append(entry)

        return register

    @staticmethod
    def _check_factory_class(kind: Kind, name: str, factory: Any, info: PluginInfo) -> None:
        """A class registered directly must already subclass its kind's interface."""
        if kind.interface is None or not inspect.isclass(factory):
            return
        interface = resolve(kind.interface)
        if not issubclass(factory, interface):
            raise InterfaceError(
                f"{kind.name} {name!r} of plugin {info.provider}: {factory.__qualname__} does not implement "
                f"{interface.__module__}.{interface.__qualname__}"
            )

    # ---------------------------------------------------------------------------------------- lookups
    def entries(self, kind: str) -> list[Entry]:
        """Every entry of ``kind``, conflicting ones included."""
        return list(self._collect()[get_kind(kind).name])

    def every_run_callbacks(self) -> list[Entry]:
        """The callbacks registered with ``every_run=True`` (added to every training run), in a stable order: the
        plugins' load order (:meth:`plugins`), then the name."""
        load_order = {name: i for i, name in enumerate(self._records)}
        return sorted(
            (e for e in self.entries(EVERY_RUN_KIND) if e.every_run),
            key=lambda e: (load_order[e.plugin.name], e.name),
        )

    def names(self, kind: str) -> list[str]:
        """Sorted distinct names of ``kind`` (aliases not included)."""
        return sorted({e.name for e in self.entries(kind)})

    def get(self, kind: str, name: str) -> Entry:
        """Return the entry of ``kind`` called ``name`` (an alias, or ``plugin:name``).

        A name that a first-party plugin (the core's built-ins, a distribution of this repository:
        :func:`~oml_core.registry.manager.is_first_party`) and other plugins give is the first party's: another
        plugin cannot change what ``{name: adam}`` builds; its own is reachable by its qualified name, and ``oml
        plugins`` lists it as shadowed.

        Raises:
            UnknownNameError: nothing of that name; the message has close matches, the known names, the
                distribution that would provide it (for first-party names) and a hint to run ``oml plugins``.
            AmbiguousNameError: two plugins, none or both first-party, give the name; the message names both and
                the qualified forms.
        """
        entries = self.entries(kind)
        plugin_name, sep, short = name.rpartition(":")
        if sep:
            found = [e for e in entries if e.plugin.name == plugin_name and short in (e.name, *e.aliases)]
        else:
            found = [e for e in entries if name in (e.name, *e.aliases)]
        first_party = [e for e in found if is_first_party(e.plugin)]
        if len(found) > 1 and len(first_party) == 1:
            return first_party[0]
        if len(found) == 1:
            return found[0]
        if found:
            providers = "; ".join(f"{e.qualified_name} from {e.plugin.provider}" for e in found)
            raise AmbiguousNameError(
                f"{kind} {name!r} is given by {len(found)} plugins: {providers}. "
                f"Use the qualified form 'plugin:name' to choose one."
            )
        raise UnknownNameError(self._unknown_message(kind, name, entries))

    def _unknown_message(self, kind: str, name: str, entries: list[Entry]) -> str:
        known = sorted({n for e in entries for n in (e.name, *e.aliases)})
        lines = [f"Unknown {kind} {name!r}."]
        close = difflib.get_close_matches(name.rpartition(":")[2], known, n=3, cutoff=0.6)
        if close:
            lines.append(f"Did you mean: {', '.join(close)}?")
        distribution = FIRST_PARTY_PROVIDERS.get((kind, name.rpartition(":")[2]))
        if distribution is not None:
            lines.append(
                f"The {kind} {name!r} is provided by the plugin distribution {distribution!r}, which is not "
                f"installed or not loaded: `pip install {distribution}` (and check OML_LOAD_PLUGINS)."
            )
        failed = [r.info.provider for r in self._records.values() if r.error]
        if failed:
            lines.append(f"Plugins that failed to load: {', '.join(failed)}.")
        lines.append(f"Known {kind} names: {', '.join(known) if known else '(none)'}.")
        lines.append("Run `oml plugins` to see the installed plugins and what they provide.")
        return " ".join(lines)

    def describe(self, kind: str, name: str) -> dict[str, Any]:
        """Provider, distribution, version, factory, signature, description and ``every_run`` of one component."""
        entry = self.get(kind, name)
        try:
            signature = _signature_text(entry.load())
        except Exception as e:  # described, not raised: `oml registry` must list a broken entry too
            signature = f"<unavailable: {type(e).__name__}: {e}>"
        return {
            "kind": entry.kind,
            "name": entry.name,
            "qualified_name": entry.qualified_name,
            "aliases": list(entry.aliases),
            "plugin": entry.plugin.name,
            "distribution": entry.plugin.distribution,
            "version": entry.plugin.version,
            "factory": entry.factory_path,
            "signature": signature,
            "description": entry.description,
            "every_run": entry.every_run,
        }

    # ----------------------------------------------------------------------------------------- build
    def build(
        self, kind: str, cfg: Any, /, offers: Mapping[str, Callable[[], Any]] | None = None, **runtime: Any
    ) -> Any:
        """Build a component from ``{name, args}`` (a dict, a ``DictConfig`` or just the name).

        ``runtime`` are arguments known only at run time (an optimizer's ``params``); they may not repeat a config
        argument. ``offers`` are what a pipeline holds and any component may take, by parameter name: ``offers[
        name]()`` is passed for every ``name`` the factory accepts that neither ``args`` nor ``runtime`` sets (a
        sampler's ``labels`` and ``generator``, a loss's ``label2category``, a logger's ``save_dir``, a
        post-processor's ``pairwise_model``, a dataset component's data keys), and not called otherwise (see
        :meth:`offered`). Nested ``{name, args}`` arguments are built first, as the
        component of the kind their argument name or type annotation tells; but those that the factory lists
        in its attribute :data:`SELF_BUILT_ARGS_ATTR` are passed to it as they are (a bridge to another
        library builds its own distances or reducers from such specs).

        Raises:
            ConfigError: malformed spec, an argument given both in ``args`` and at runtime, or an argument whose
                value does not fit its annotation (``loss 'triplet_with_miner': argument margin: expected float,
                got 'abc'``; see :mod:`oml_core.registry.arg_types`).
            UnexpectedArgumentError: an argument the factory does not accept (the accepted ones are listed).
            MissingArgumentError: a required argument not given.
            InterfaceError: the built object does not implement the kind's interface.
            Exception: whatever the factory raises, as it is; :func:`failed_component` of it tells the entry whose
                factory raised it (the innermost, for a nested spec).
        """
        spec = to_plain(cfg)
        if isinstance(spec, str):
            spec = {"name": spec}
        where = f"{kind} config"
        if not isinstance(spec, Mapping) or not isinstance(spec.get("name"), str):
            raise ConfigError(
                f"{where} must be a mapping with a string 'name' (and optional 'args'), got {spec!r}"
            )
        extra = set(spec) - SPEC_KEYS
        if extra:
            raise ConfigError(
                f"{where} {spec['name']!r} has unknown keys {sorted(extra)}; only 'name' and 'args'"
            )
        args = spec.get("args") or {}
        if not isinstance(args, Mapping):
            raise ConfigError(
                f"{where} {spec['name']!r}: 'args' must be a mapping, got {type(args).__name__}"
            )
        entry = self.get(kind, spec["name"])
        factory = entry.load()
        clash = set(args) & set(runtime)
        if clash:
            raise ConfigError(
                f"{kind} {entry.name!r}: argument(s) {sorted(clash)} are set by the pipeline at run time and "
                f"must not be given in the config's args"
            )
        check_argument_types(factory, args, f"{kind} {entry.name!r}: argument ")
        check_no_import_paths(factory, args, f"{kind} {entry.name!r}: argument ", self.plugin_names())
        kwargs = self._build_nested(entry, factory, dict(args))
        kwargs.update(runtime)
        kwargs.update(self.offered(kind, spec, offers or {}, set(runtime)))
        applied = _core_applied_args(kind, factory, kwargs)
        self._check_arguments(entry, factory, kwargs)
        try:
            obj = factory(**kwargs)
        except RegistryError:
            raise
        except Exception as e:  # raised as it is, marked with the component whose factory raised it
            if failed_component(e) is None:  # the innermost: a nested component's own failure is kept
                setattr(e, FAILED_COMPONENT_ATTR, entry)
            raise
        self._check_product(entry, obj)
        for apply, value in applied:
            apply(obj, value)
        return obj

    def offered(
        self,
        kind: str,
        cfg: Any,
        offers: Mapping[str, Callable[[], Any]],
        taken: Collection[str] = (),
    ) -> dict[str, Any]:
        """The offered arguments the component of ``cfg`` takes: ``{name: offers[name]()}`` for every ``name``
        among its factory's parameters (of ``__init__`` for a class) that its config's ``args`` and ``taken``
        leave unset; the other offers are not called.

        Raises:
            UnknownNameError: no component of ``kind`` has that name.
        """
        spec = to_plain(cfg)
        spec = {"name": spec} if isinstance(spec, str) else spec
        accepted = parameter_names(self.get(kind, spec["name"]).load())
        given = set(spec.get("args") or {}) | set(taken)
        return {name: offer() for name, offer in offers.items() if name in accepted and name not in given}

    def _build_nested(
        self, entry: Entry, factory: Callable[..., Any], args: dict[str, Any]
    ) -> dict[str, Any]:
        for key, sub_kind, value in nested_specs(factory, args):
            if sub_kind is None:
                raise ConfigError(
                    f"{entry.kind} {entry.name!r}: argument {key!r} is a {{name, args}} spec but its kind cannot be "
                    f"told from its name or type annotation; name the argument after a kind ({', '.join(KINDS)})"
                )
            args[key] = self.build(sub_kind, value)
        return args

    @staticmethod
    def _check_arguments(entry: Entry, factory: Callable[..., Any], kwargs: dict[str, Any]) -> None:
        try:
            params = inspect.signature(factory).parameters
        except (TypeError, ValueError):  # some builtins have no signature: let the call itself decide
            return
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            accepted = None
        else:
            accepted = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if accepted is not None:
            unexpected = sorted(set(kwargs) - set(accepted))
            if unexpected:
                raise UnexpectedArgumentError(
                    f"{entry.kind} {entry.name!r} ({entry.factory_path}, from {entry.plugin.provider}) got "
                    f"unexpected argument(s) {unexpected}; it accepts: {', '.join(accepted) or '(none)'}"
                )
        missing = [n for n in required_arguments(factory) if n not in kwargs]
        if missing:
            raise MissingArgumentError(
                f"{entry.kind} {entry.name!r} ({entry.factory_path}) is missing required argument(s) {missing}"
            )

    @staticmethod
    def _check_product(entry: Entry, obj: Any) -> None:
        kind = KINDS[entry.kind]
        if kind.interface is not None:
            interface = resolve(kind.interface)
            if not isinstance(obj, interface):
                raise InterfaceError(
                    f"{entry.kind} {entry.name!r} from {entry.plugin.provider} built a {type(obj).__qualname__}, "
                    f"which does not implement {interface.__module__}.{interface.__qualname__}"
                )
        if kind.callable and not callable(obj):
            raise InterfaceError(
                f"{entry.kind} {entry.name!r} from {entry.plugin.provider} built a non-callable"
            )


def failed_component(error: BaseException) -> Entry | None:
    """The entry whose factory raised ``error`` in :meth:`Registry.build` (for a nested spec, the innermost
    component that failed), or None when no factory raised it."""
    entry = getattr(error, FAILED_COMPONENT_ATTR, None)
    return entry if isinstance(entry, Entry) else None


def _core_applied_args(
    kind: str, factory: Callable[..., Any], kwargs: dict[str, Any]
) -> list[tuple[Callable[[Any, Any], None], Any]]:
    """Take out of ``kwargs`` the :attr:`Kind.core_args` of ``kind`` that ``factory`` does not name as a
    parameter (``**kwargs`` does not count); return their ``(apply, value)`` to call once the component is built.
    """
    core_args = KINDS[kind].core_args
    if not core_args or not set(core_args) & set(kwargs):
        return []
    try:
        named = set(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        named = set()
    return [
        (resolve(core_args[name]), kwargs.pop(name))
        for name in list(kwargs)
        if name in core_args and name not in named
    ]


def _signature_text(factory: Callable[..., Any]) -> str:
    """The factory's signature with string annotations evaluated where they resolve."""
    try:
        return str(inspect.signature(factory, eval_str=True))
    except Exception:  # unresolvable forward references: show them as written
        return str(inspect.signature(factory))


def check_spec_argument_types(registry: Registry, kind: str, spec: Any, key: str) -> None:
    """Check the component spec ``spec`` (of ``kind``, at the config key ``key``) and the components nested in
    its arguments before anything is built or imported: its name is no Python import path, its arguments' types
    fit (:func:`check_argument_types`) and hold no import path (:func:`check_no_import_paths`).

    The kind of a nested spec (or of a name given to a :class:`~oml_core.registry.kinds.ComponentOf` argument)
    is told as the registry tells it when it builds (the argument's name or its annotation); a nested spec whose
    kind cannot be told, and the arguments the factory builds itself (``SELF_BUILT_ARGS_ATTR``), are left to the
    registry. A malformed spec is left to the registry too.

    Raises:
        ConfigError: ``<key>.args.<name>: expected <annotation>, got <value>`` (``<key>.args.miner.args.<name>``
            for a nested spec); ``scheduling.scheduler.args.lr_lambda: 'os:_exit' is not a registered
            lr_function; configs name registered components only (oml registry lr_function): constant, ...``.
        RegistryError: an unknown or ambiguous component name (the registry's message).
    """
    spec = to_plain(spec)
    if isinstance(spec, str):
        spec = {"name": spec}
    if not is_spec(spec) or not isinstance(spec.get("args") or {}, Mapping):
        return
    plugins = registry.plugin_names()
    if is_import_path(spec["name"], plugins):
        raise ConfigError(
            f"{key}: {spec['name']!r} is not a registered {kind}; configs name registered components only "
            f"(oml registry {kind}): {', '.join(registry.names(kind)) or '(none)'}"
        )
    factory = registry.get(kind, spec["name"]).load()
    args = spec.get("args") or {}
    check_argument_types(factory, args, f"{key}.args.")
    check_no_import_paths(factory, args, f"{key}.args.", plugins)
    for name, nested_kind, value in nested_specs(factory, args):
        if nested_kind is not None:
            check_spec_argument_types(registry, nested_kind, value, f"{key}.args.{name}")


@functools.cache
def default_registry() -> Registry:
    """The process-wide registry for library use (installed plugins + built-ins), built on first call.

    Pipelines accept ``registry=`` so that tests and applications can pass their own; call
    ``default_registry.cache_clear()`` after installing a plugin in a running process.
    """
    return Registry()


#: The runtime argument through which a sampler gets the dataset's categories (``oml_register_samplers``): a
#: sampler whose factory requires it is one of OML's category-based samplers (``SAMPLERS_CATEGORIES_BASED``).
CATEGORIES_ARGUMENT = "label2category"


def needs_categories(registry: Registry, sampler: str) -> bool:
    """Whether the sampler ``sampler`` of ``registry`` draws batches by category: its factory requires the
    argument :data:`CATEGORIES_ARGUMENT` (OML's ``SAMPLERS_CATEGORIES_BASED``: ``category_balance``,
    ``distinct_category_balance``).

    Raises:
        RegistryError: no sampler of that name (the registry's message).
    """
    return CATEGORIES_ARGUMENT in required_arguments(registry.get("sampler", sampler).load())
