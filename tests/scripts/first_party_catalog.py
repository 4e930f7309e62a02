"""The repository's plugin distributions, and ``oml_core/registry/catalog.py`` written from their tables.

The first-party plugins are the distributions under ``plugins/``: each ``plugins/<folder>/pyproject.toml`` names
the distribution and its one entry point of the group ``oml``, the plugin module, whose ``COMPONENTS`` table is
what it registers. The catalog lists every ``(kind, name)`` of those tables with its distribution; it is
generated, never edited by hand (``tests/test_catalog.py`` fails when it differs). Rewrite it from the
repository's root::

    python -m tests.scripts.first_party_catalog
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

import tomllib

from oml_core.utils.lazy import Component

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "oml_core" / "registry" / "catalog.py"
#: How ``tests/test_catalog.py`` tells to update the catalog.
UPDATE_HINT = "run `python -m tests.scripts.first_party_catalog` from the repository's root"

_HEADER = '''"""Names provided by the first-party plugin distributions, for error messages only.

When a name is unknown because its distribution is not installed (``pip uninstall oml-losses``), the registry can
say which distribution to install. This table is a hint, never a source of components. It is generated from the
``COMPONENTS`` tables of the plugins under ``plugins/`` by ``python -m tests.scripts.first_party_catalog``: do not
edit it by hand (``tests/test_catalog.py`` fails when it differs from what that writes). It cannot be read from
the plugins at run time: it names the components of the plugins that are not installed.
"""

from types import MappingProxyType

FIRST_PARTY_PROVIDERS: MappingProxyType[tuple[str, str], str] = MappingProxyType(
    {
'''
_FOOTER = """    }
)
"""


class PluginDistribution(NamedTuple):
    """A plugin distribution of the repository.

    Attributes:
        distribution: Its name (``oml-losses``).
        entry_point: The name of its ``oml`` entry point (``oml_losses``).
        module: The plugin module the entry point names (``oml_losses.plugin``).
        path: The plugin module's file.
    """

    distribution: str
    entry_point: str
    module: str
    path: Path


def plugin_distribution(folder: Path) -> PluginDistribution:
    """The plugin distribution whose ``pyproject.toml`` is in ``folder``.

    Raises:
        ValueError: the project has not exactly one entry point of the group ``oml``.
    """
    project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    entry_points = project.get("entry-points", {}).get("oml", {})
    if len(entry_points) != 1:
        raise ValueError(
            f"{folder / 'pyproject.toml'}: expected one entry point of the group oml, got {entry_points}"
        )
    ((entry_point, module),) = entry_points.items()
    return PluginDistribution(
        project["name"], entry_point, module, folder / (module.replace(".", "/") + ".py")
    )


def first_party_plugins() -> list[PluginDistribution]:
    """The distributions under ``plugins/``, by folder name."""
    return [
        plugin_distribution(pyproject.parent) for pyproject in sorted(ROOT.glob("plugins/*/pyproject.toml"))
    ]


def catalog_rows(tables: Mapping[str, Iterable[Component]]) -> dict[tuple[str, str], str]:
    """``{(kind, name): distribution}`` of the tables ``{distribution: its plugin's table}``, ordered by
    distribution, kind and name.

    Raises:
        ValueError: two distributions register one name of one kind (the catalog cannot tell which to install).
    """
    rows: dict[tuple[str, str], str] = {}
    for distribution, components in tables.items():
        for component in components:
            key = (component.kind, component.name)
            if rows.setdefault(key, distribution) != distribution:
                raise ValueError(
                    f"{component.kind} {component.name!r} is in the tables of {rows[key]} and {distribution}"
                )
    return dict(sorted(rows.items(), key=lambda row: (row[1], *row[0])))


def catalog_source(rows: Mapping[tuple[str, str], str]) -> str:
    """The text of ``catalog.py`` listing ``rows``."""
    lines = "".join(
        f'        ("{kind}", "{name}"): "{distribution}",\n' for (kind, name), distribution in rows.items()
    )
    return _HEADER + lines + _FOOTER


def first_party_catalog() -> dict[tuple[str, str], str]:
    """The catalog's rows as the first-party plugins' tables make them (their modules are imported)."""
    return catalog_rows(
        {
            plugin.distribution: importlib.import_module(plugin.module).COMPONENTS
            for plugin in first_party_plugins()
        }
    )


if __name__ == "__main__":
    CATALOG.write_text(catalog_source(first_party_catalog()), encoding="utf-8")
    print(f"wrote {CATALOG.relative_to(ROOT)}")
