"""The table a plugin registers its components from, and lazy top-level exports for plugin packages (PEP 562).

**One way to register.** A plugin keeps each fact about its components in one place, a table of
:class:`Component` rows (kind, name, factory, description, aliases), and declares it as ``OML_COMPONENTS``: the
registry registers every row with :func:`register_components`, through the ``register`` callback of its kind's
hook, with no hook function of the plugin's. The core's built-ins, every first-party plugin, the example plugin
and ``oml plugin new`` are written so (``tests/test_one_way_to_register.py`` checks them)::

    # oml_losses/plugin.py
    COMPONENTS = (Component("loss", "triplet", "oml_losses.triplet:TripletLoss", "triplet loss"),)
    EXTRA_EXPORTS = {"pairwise_l2": "oml_core.utils.misc_torch"}
    OML_COMPONENTS = COMPONENTS

A factory is a lazy ``"package.module:attr"`` string, so that importing the table imports no torch. A plugin's
package may also take its lazy exports and ``__all__`` from the table, through :func:`table_exports`, and
re-export its public classes at the top level (``from oml_losses import TripletLoss``) without importing them
when only its ``plugin`` module is loaded::

    # oml_losses/__init__.py
    from oml_losses.plugin import COMPONENTS, EXTRA_EXPORTS

    if TYPE_CHECKING:  # the same names for static type checkers and IDEs, as explicit re-exports
        from oml_core.utils.misc_torch import pairwise_l2 as pairwise_l2
        from oml_losses.triplet import TripletLoss as TripletLoss

    __getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)

(``__all__`` is computed, so linters and type checkers cannot read it: the ``name as name`` form is what marks
the ``TYPE_CHECKING`` imports as the package's public names.) :func:`lazy_exports` is the same for a package
without a table::

    __getattr__, __dir__ = lazy_exports(__name__, {"TripletLoss": "oml_losses.triplet"})
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from oml_core.utils.imports import resolve

if TYPE_CHECKING:
    from oml_core.registry.hookspecs import RegisterCallback


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return ``(__getattr__, __dir__)`` for ``package`` importing ``name`` from ``exports[name]`` on first
    access; the value is then cached in the package's namespace, so later lookups cost nothing."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = resolve(f"{exports[name]}:{name}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__


class Component(NamedTuple):
    """One row of a plugin's table: a component the registry registers, and whether its package exports it.

    Attributes:
        kind: The singular kind (``loss``), as in :mod:`oml_core.registry.kinds`.
        name: The name configs use.
        factory: What ``register`` gets as the factory: a lazy ``"package.module:attr"`` string (the usual form:
            nothing is imported until the component is built), or the callable itself where a string cannot
            name it (the zoo's ``PretrainedModel`` factories, partials of one class; their module must then be as
            light as the table).
        description: The one line registered with it (shown by ``oml registry`` and ``oml plugins``).
        aliases: Other names registered for it.
        export: The package exports the factory's ``attr`` at its top level, under that name, when it takes its
            exports from the table (:func:`table_exports`); only a string factory can be exported.
        every_run: A callback added to every training run (``oml_register_callbacks``); refused for other kinds.
    """

    kind: str
    name: str
    factory: str | Callable[..., Any]
    description: str
    aliases: tuple[str, ...] = ()
    export: bool = True
    every_run: bool = False

    @property
    def export_name(self) -> str:
        """The factory's attribute: the name the package exports it under when :attr:`export` is true.

        Raises:
            TypeError: the factory is not a ``"module:attr"`` string.
        """
        return self.export_target[1]

    @property
    def export_target(self) -> tuple[str, str]:
        """``(module, attr)`` of the factory, what the package exports when :attr:`export` is true.

        Raises:
            TypeError: the factory is not a ``"module:attr"`` string.
        """
        if not isinstance(self.factory, str):
            raise TypeError(
                f"{self.kind} {self.name!r}: only a 'module:attr' factory can be exported, got {self.factory!r}; "
                "give the row export=False"
            )
        module, _, attr = self.factory.rpartition(":")
        return module, attr


def register_components(register: RegisterCallback, components: Iterable[Component], kind: str) -> None:
    """Call ``register(name, factory, aliases=..., description=..., every_run=...)`` for every component of
    ``kind`` in ``components``, in their order: how the registry registers a plugin's declared table
    (``OML_COMPONENTS``) with the ``register`` callback of the hook of ``kind``
    (:class:`~oml_core.registry.hookspecs.RegisterCallback`); a hook may call it too."""
    for component in components:
        if component.kind == kind:
            register(
                component.name,
                component.factory,
                aliases=component.aliases,
                description=component.description,
                every_run=component.every_run,
            )


def table_exports(
    package: str, components: Iterable[Component], extra_exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """Return ``(__getattr__, __dir__, __all__)`` for ``package``: the lazy exports (see :func:`lazy_exports`)
    of every exported component of ``components`` (its factory's ``attr`` from the factory's module) and of
    ``extra_exports`` (``{name: module}``, public names that are not registered components), and their sorted
    names.

    Raises:
        ValueError: a name is exported twice (by two components, or by a component and ``extra_exports``).
        TypeError: an exported component's factory is not a ``"module:attr"`` string.
    """
    exports = dict(extra_exports)
    for component in components:
        if not component.export:
            continue
        module, name = component.export_target
        if name in exports:
            raise ValueError(f"{package}: {name!r} is exported twice")
        exports[name] = module
    getattr_, dir_ = lazy_exports(package, exports)
    return getattr_, dir_, sorted(exports)
