"""A registry entry: one name of one kind, with where it came from and how to build it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oml_core.registry.errors import PluginLoadError, describe_error, is_plugin_failure
from oml_core.utils.imports import resolve


@dataclass(frozen=True)
class PluginInfo:
    """Where a plugin comes from.

    Attributes:
        name: The plugin's name in the plugin manager (its entry-point name; ``oml_core`` for built-ins).
        distribution: The installed distribution that ships it (``None`` for plugins added in code).
        version: The distribution's version.
        module: The imported object's module name (or ``repr`` for objects).
    """

    name: str
    distribution: str | None = None
    version: str | None = None
    module: str | None = None

    @property
    def provider(self) -> str:
        """``"name (distribution version)"`` as shown in messages."""
        if self.distribution is None:
            return self.name
        return f"{self.name} ({self.distribution} {self.version or '?'})"


@dataclass(frozen=True)
class Entry:
    """One registered component.

    Attributes:
        kind: The singular kind (``loss``).
        name: The name configs use.
        factory: A callable, or a lazy ``"package.module:attr"`` string resolved by :meth:`load`.
        plugin: The plugin that registered it.
        aliases: Extra names resolving to this entry.
        description: One line for ``oml registry``.
        every_run: A callback added to every training run (``register(..., every_run=True)``).
    """

    kind: str
    name: str
    factory: Callable[..., Any] | str
    plugin: PluginInfo
    aliases: tuple[str, ...] = field(default=())
    description: str | None = None
    every_run: bool = False

    @property
    def qualified_name(self) -> str:
        """``plugin:name``, which always resolves even when another plugin gives the same name."""
        return f"{self.plugin.name}:{self.name}"

    @property
    def factory_path(self) -> str:
        """The factory as ``module:qualname``."""
        if isinstance(self.factory, str):
            return self.factory
        module = getattr(self.factory, "__module__", "?")
        return f"{module}:{getattr(self.factory, '__qualname__', repr(self.factory))}"

    def load(self) -> Callable[..., Any]:
        """Return the factory, importing it first if it is a lazy ``"module:attr"`` string.

        Raises:
            PluginLoadError: the module or attribute cannot be imported; the message names the kind,
                the name, the plugin and its distribution.
        """
        if not isinstance(self.factory, str):
            return self.factory
        try:
            obj = resolve(self.factory)
        except BaseException as e:  # any import-time failure of a plugin's module (sys.exit too) is reported
            if not is_plugin_failure(e):
                raise
            raise PluginLoadError(
                f"{self.kind} {self.name!r} of plugin {self.plugin.provider} cannot be imported from "
                f"{self.factory!r}: {describe_error(e)}"
            ) from e
        if not callable(obj):
            raise PluginLoadError(
                f"{self.kind} {self.name!r} of plugin {self.plugin.provider}: {self.factory!r} is not callable"
            )
        return obj
