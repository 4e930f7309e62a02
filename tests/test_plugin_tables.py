"""Every first-party plugin keeps its components in one table, ``COMPONENTS`` (and ``EXTRA_EXPORTS``, the public
names that are not components) of its plugin module: its package's lazy exports, its ``__all__`` and the
``TYPE_CHECKING`` imports that static type checkers read all agree with the table.

That its hooks register the table and nothing else is checked by ``tests/test_one_way_to_register.py``; that the
core's catalog of first-party names is generated from the tables, by ``tests/test_catalog.py``.
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

from oml_core.utils.imports import resolve
from tests.scripts.first_party_catalog import first_party_plugins

#: The import packages of the first-party plugin distributions (``oml-losses`` -> ``oml_losses``).
PLUGIN_PACKAGES = [plugin.module.partition(".")[0] for plugin in first_party_plugins()]


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
def test_the_plugin_table_is_what_the_package_exports(
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


@pytest.mark.parametrize("package_name", PLUGIN_PACKAGES)
def test_importing_the_package_and_its_table_imports_no_torch(package_name: str) -> None:
    code = (
        f"import json, sys, {package_name}, {package_name}.plugin; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'torchvision'})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []
