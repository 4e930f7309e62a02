"""Lazy top-level exports for plugin packages (PEP 562), and the table a plugin registers and exports from.

A plugin package re-exports its public classes at the top level (``from oml_losses import TripletLoss``)
without importing them when only its ``plugin`` module is loaded::

    __getattr__, __dir__ = lazy_exports(__name__, {"TripletLoss": "oml_losses.triplet"})

A plugin keeps each fact about its components in one place, a table of :class:`Component` rows holding strings
only (importing it imports no torch): its hooks register from it with :func:`register_components`, and its
package's lazy exports and ``__all__`` come from it through :func:`table_exports`::

    # oml_losses/plugin.py
    COMPONENTS = (Component("loss", "triplet", "oml_losses.triplet:TripletLoss", "triplet loss"),)
    EXTRA_EXPORTS = {"pairwise_l2": "oml_core.utils.misc_torch"}

    @hookimpl
    def oml_register_losses(register):
        register_components(register, COMPONENTS, "loss")

    # oml_losses/__init__.py
    from oml_losses.plugin import COMPONENTS, EXTRA_EXPORTS

    if TYPE_CHECKING:  # the same names for static type checkers and IDEs, as explicit re-exports
        from oml_core.utils.misc_torch import pairwise_l2 as pairwise_l2
        from oml_losses.triplet import TripletLoss as TripletLoss

    __getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)

(``__all__`` is computed, so linters and type checkers cannot read it: the ``name as name`` form is what marks
the ``TYPE_CHECKING`` imports as the package's public names.)
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
    """One row of a plugin's table: a component its hooks register, and whether its package exports it.

    Attributes:
        kind: The singular kind (``loss``), as in :mod:`oml_core.registry.kinds`.
        name: The name configs use.
        factory: The lazy ``"package.module:attr"`` string registered as the factory.
        description: The one line registered with it (shown by ``oml registry`` and ``oml plugins``).
        aliases: Other names registered for it.
        export: The package exports the factory's ``attr`` at its top level, under that name.
    """

    kind: str
    name: str
    factory: str
    description: str
    aliases: tuple[str, ...] = ()
    export: bool = True

    @property
    def export_name(self) -> str:
        """The factory's attribute: the name the package exports it under when :attr:`export` is true."""
        return self.factory.rpartition(":")[2]


def register_components(register: RegisterCallback, components: Iterable[Component], kind: str) -> None:
    """Call ``register(name, factory, aliases=..., description=...)`` for every component of ``kind`` in
    ``components``, in their order (a hook of ``kind`` passes its ``register`` callback)."""
    for component in components:
        if component.kind == kind:
            register(
                component.name,
                component.factory,
                aliases=component.aliases,
                description=component.description,
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
    """
    exports = dict(extra_exports)
    for component in components:
        if not component.export:
            continue
        name = component.export_name
        if name in exports:
            raise ValueError(f"{package}: {name!r} is exported twice")
        exports[name] = component.factory.partition(":")[0]
    getattr_, dir_ = lazy_exports(package, exports)
    return getattr_, dir_, sorted(exports)
