"""What ``oml --version`` prints: the version of oml-core and of each installed plugin distribution."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from oml_core import __version__
from oml_core.registry.manager import installed_distributions
from oml_core.reports.answer import Answer


@dataclass(frozen=True)
class Distribution:
    """An installed plugin distribution: its name and version (None: its metadata has none)."""

    distribution: str
    version: str | None


@dataclass(frozen=True)
class Versions(Answer):
    """The version of oml-core and the plugin distributions (see :func:`versions`)."""

    oml_core: str
    plugins: list[Distribution]

    def as_text(self) -> str:
        """``oml-core <version>``, then one line per plugin distribution, ``<distribution> <version>`` (``?``: no
        version)."""
        lines = [f"oml-core {self.oml_core}"]
        lines += [f"{plugin.distribution} {plugin.version or '?'}" for plugin in self.plugins]
        return "\n".join(lines)


def versions(allow: Collection[str] | None) -> Versions:
    """The version of oml-core and of every installed plugin distribution that the allow-list ``allow`` admits
    (``None``: all), in the order of their entry points' names, read from the distributions' metadata: no plugin is
    imported, so that a plugin that hangs or ends the process at import cannot take ``oml --version`` down (``oml
    plugins --check`` tells whether each one loads)."""
    plugins = [Distribution(name, version) for name, version in installed_distributions(allow)]
    return Versions(oml_core=__version__, plugins=plugins)


__all__ = ["Distribution", "Versions", "versions"]
