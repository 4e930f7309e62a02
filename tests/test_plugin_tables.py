"""Every first-party plugin keeps its components in one table, ``COMPONENTS`` (and ``EXTRA_EXPORTS``, the public
names that are not components) of its plugin module: what its hooks register, its package's lazy exports, its
``__all__`` and the ``TYPE_CHECKING`` imports that static type checkers read all agree with the table.

That the core's catalog of first-party names lists exactly what each plugin registers is checked by
``tests/test_catalog.py``.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from oml_core.registry import KINDS, Registry
from oml_core.registry.catalog import FIRST_PARTY_PROVIDERS
from oml_core.utils.imports import resolve

#: The import packages of the first-party plugin distributions (``oml-losses`` -> ``oml_losses``).
PLUGIN_PACKAGES = sorted({distribution.replace("-", "_") for distribution in FIRST_PARTY_PROVIDERS.values()})

#: Kinds that a plugin registers from a table of its own other than ``COMPONENTS``: ``{package: {kind: that
#: table as "module:attr"}}``.
OTHER_TABLES = {"oml_models": {"pretrained": "oml_models.zoo:PRETRAINED"}}


def type_checking_imports(package: ModuleType) -> dict[str, str]:
    """``{name: "module:attr"}`` of the imports of the ``if TYPE_CHECKING:`` block of ``package``'s
    ``__init__.py``, each of which must be an explicit re-export (``from m import A as A``)."""
    tree = ast.parse(Path(package.__file__).read_text(encoding="utf-8"))
    (block,) = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    ]
    imports = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom), ast.dump(node)
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name}: write `{alias.name} as {alias.name}`"
            imports[alias.name] = f"{node.module}:{alias.name}"
    return imports


@pytest.mark.parametrize("package_name", PLUGIN_PACKAGES)
def test_the_plugin_table_is_what_the_plugin_registers_and_exports(
    package_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = importlib.import_module(package_name)
    plugin = importlib.import_module(f"{package_name}.plugin")
    exported = {c.export_name: c.factory for c in plugin.COMPONENTS if c.export}
    extras = {name: f"{module}:{name}" for name, module in plugin.EXTRA_EXPORTS.items()}
    assert not exported.keys() & extras.keys()
    exported |= extras

    assert type_checking_imports(package) == exported
    assert package.__all__ == sorted(exported)
    assert set(exported) <= set(dir(package))
    for name, factory in exported.items():
        # Drop the value cached by an earlier access (restored after the test), so that the lazy export resolves it.
        monkeypatch.setattr(package, name, None, raising=False)
        monkeypatch.delattr(package, name)
        assert package.__getattr__(name) is resolve(factory)
    with pytest.raises(AttributeError, match=f"module '{package_name}' has no attribute 'NotExported'"):
        package.__getattr__("NotExported")

    registry = Registry(plugins=[(package_name, plugin)], load_entrypoints=False)
    registered = {
        (entry.kind, entry.name): (entry.factory, entry.aliases, entry.description)
        for kind in KINDS
        for entry in registry.entries(kind)
        if entry.plugin.name == package_name
    }
    other_tables = OTHER_TABLES.get(package_name, {})
    for kind, table in other_tables.items():
        assert {name for registered_kind, name in registered if registered_kind == kind} == set(
            resolve(table)
        )
    assert {key: value for key, value in registered.items() if key[0] not in other_tables} == {
        (c.kind, c.name): (c.factory, c.aliases, c.description) for c in plugin.COMPONENTS
    }


@pytest.mark.parametrize("package_name", PLUGIN_PACKAGES)
def test_importing_the_package_and_its_table_imports_no_torch(package_name: str) -> None:
    code = (
        f"import json, sys, {package_name}, {package_name}.plugin; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'torchvision'})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []
