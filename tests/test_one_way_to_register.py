"""One way to register: every plugin of the repository (the core's built-ins, ``plugins/*``, the example plugin and
a plugin written by ``oml plugin new``) keeps its components in one table, ``COMPONENTS``, declares it as
``OML_COMPONENTS = COMPONENTS`` (and its config folders as ``OML_CONFIG_DIRS``) and has no hook function: nothing
else can register. Checked on the source and at run time (a registry registers exactly the rows of the table)."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from oml_core.registry import KINDS, Registry
from oml_core.scaffold import SCAFFOLD_KINDS, new_plugin
from tests.scripts.first_party_catalog import (
    ROOT,
    PluginDistribution,
    first_party_plugins,
    plugin_distribution,
)

TABLE = "COMPONENTS"
DECLARATION = "OML_COMPONENTS"

#: The plugins of the repository: the core's built-ins, the first-party plugins and the example plugin.
REPOSITORY_PLUGINS = [
    PluginDistribution(
        "oml-core", "oml_core", "oml_core.builtins.plugin", ROOT / "oml_core/builtins/plugin.py"
    ),
    *first_party_plugins(),
    plugin_distribution(ROOT / "examples/oml_plugin_example"),
]


def _assigned(tree: ast.Module) -> dict[str, ast.expr | None]:
    """``{name: value}`` of the module-level assignments of ``tree`` (``None``: annotated without a value)."""
    assigned: dict[str, ast.expr | None] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            assigned.update({t.id: node.value for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            assigned[node.target.id] = node.value
    return assigned


def _is_hook(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    decorators = [d.func if isinstance(d, ast.Call) else d for d in function.decorator_list]
    return function.name.startswith("oml_register_") or any(
        isinstance(d, ast.Name) and d.id == "hookimpl" for d in decorators
    )


def registration_faults(source: str, where: str) -> list[str]:
    """Every way the plugin module ``source`` (named ``where`` in the faults) registers other than from its
    declared table: no module-level ``COMPONENTS``, no ``OML_COMPONENTS = COMPONENTS``, or a hook function."""
    tree = ast.parse(source)
    assigned = _assigned(tree)
    faults = []
    if TABLE not in assigned:
        faults.append(f"{where}: no module-level table {TABLE}")
    declared = assigned.get(DECLARATION)
    if not (isinstance(declared, ast.Name) and declared.id == TABLE):
        faults.append(f"{where}: no declaration `{DECLARATION} = {TABLE}`")
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_hook(function):
            faults.append(f"{where}: {function.name} is a hook function; add a row to {TABLE} instead")
    return faults


def _registered(registry: Registry, plugin_name: str) -> dict[tuple[str, str], tuple[object, ...]]:
    return {
        (entry.kind, entry.name): (entry.factory, entry.aliases, entry.description)
        for kind in KINDS
        for entry in registry.entries(kind)
        if entry.plugin.name == plugin_name
    }


def _table(module: ModuleType) -> dict[tuple[str, str], tuple[object, ...]]:
    return {(c.kind, c.name): (c.factory, c.aliases, c.description) for c in module.COMPONENTS}


@pytest.mark.parametrize("plugin", REPOSITORY_PLUGINS, ids=lambda plugin: plugin.entry_point)
def test_a_repository_plugin_registers_its_table_only(plugin: PluginDistribution) -> None:
    assert registration_faults(plugin.path.read_text(encoding="utf-8"), str(plugin.path)) == []
    module = importlib.import_module(plugin.module)
    # strict: a plugin that fails to load raises; every registry has the core's built-ins, under "oml_core"
    plugins = [] if plugin.entry_point == "oml_core" else [(plugin.entry_point, module)]
    registry = Registry(plugins=plugins, load_entrypoints=False, strict=True)
    assert _registered(registry, plugin.entry_point) == _table(module)


@pytest.fixture()
def forget_oml_acme() -> Iterator[None]:
    """The modules of the scaffolded package ``oml_acme`` are forgotten after the test."""
    yield
    for name in [name for name in sys.modules if name == "oml_acme" or name.startswith("oml_acme.")]:
        del sys.modules[name]


@pytest.mark.parametrize("kinds", [SCAFFOLD_KINDS, *((kind,) for kind in SCAFFOLD_KINDS)], ids="+".join)
@pytest.mark.usefixtures("forget_oml_acme")
def test_a_scaffolded_plugin_registers_its_table_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kinds: tuple[str, ...]
) -> None:
    folder = new_plugin("oml-acme", tmp_path / "oml-acme", kinds=kinds)
    plugin = plugin_distribution(folder)
    assert registration_faults(plugin.path.read_text(encoding="utf-8"), "oml_acme/plugin.py") == []
    monkeypatch.syspath_prepend(str(folder))
    module = importlib.import_module(plugin.module)
    assert {component.kind for component in module.COMPONENTS} == set(kinds)
    registry = Registry(plugins=[("oml_acme", module)], load_entrypoints=False, strict=True)
    assert _registered(registry, "oml_acme") == _table(module)


GOOD = """
COMPONENTS: tuple[Component, ...] = (Component("loss", "x", "m:X", "x"),)

OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://m.configs",)
"""

HOOK = """

@hookimpl
def oml_register_losses(register):
    register_components(register, COMPONENTS, "loss")
"""


@pytest.mark.parametrize(
    ("replaced", "replacement", "fault"),
    [
        ('OML_CONFIG_DIRS = ("pkg://m.configs",)', HOOK, "oml_register_losses is a hook function"),
        (
            'OML_CONFIG_DIRS = ("pkg://m.configs",)',
            HOOK.replace("def oml_register_losses", "def my_losses"),
            "my_losses is a hook function",
        ),
        (
            "OML_COMPONENTS = COMPONENTS",
            "OML_COMPONENTS = (COMPONENTS[0],)",
            "no declaration `OML_COMPONENTS",
        ),
        ("OML_COMPONENTS = COMPONENTS", "", "no declaration `OML_COMPONENTS = COMPONENTS`"),
        ("COMPONENTS: tuple[Component, ...] =", "TABLE =", "no module-level table COMPONENTS"),
    ],
)
def test_the_check_finds_a_plugin_that_registers_another_way(
    replaced: str, replacement: str, fault: str
) -> None:
    source = GOOD.replace(replaced, replacement)
    assert source != GOOD
    faults = registration_faults(source, "bad.py")
    assert len(faults) == 1 and faults[0].startswith("bad.py: ") and fault in faults[0], faults


def test_the_check_passes_a_plugin_that_declares_its_table() -> None:
    assert registration_faults(GOOD, "good.py") == []
