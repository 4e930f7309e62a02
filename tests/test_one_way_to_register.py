"""One way to register: every plugin of the repository (the core's built-ins, ``plugins/*``, the example plugin and
a plugin written by ``oml plugin new``) keeps its components in one table, ``COMPONENTS``, and each of its
component hooks is one ``register_components(register, COMPONENTS, "<the hook's kind>")`` call (the config-dirs
hook, which registers a folder, not a component, is one ``register("<search path>")`` call). Checked on the
source (no other ``register`` call can hide in a hook) and at run time (a registry registers exactly the rows of
the table: a row whose kind has no hook would be missing)."""

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

#: ``{hook: kind}`` of the component hooks.
COMPONENT_HOOKS = {kind.hook: kind.name for kind in KINDS.values()}
CONFIG_DIRS_HOOK = "oml_register_config_dirs"
TABLE = "COMPONENTS"

#: The plugins of the repository: the core's built-ins, the first-party plugins and the example plugin.
REPOSITORY_PLUGINS = [
    PluginDistribution(
        "oml-core", "oml_core", "oml_core.builtins.plugin", ROOT / "oml_core/builtins/plugin.py"
    ),
    *first_party_plugins(),
    plugin_distribution(ROOT / "examples/oml_plugin_example"),
]


def _hook_name(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The hook ``function`` implements: its ``@hookimpl(specname=...)`` or its own name."""
    for decorator in function.decorator_list:
        if isinstance(decorator, ast.Call):
            for keyword in decorator.keywords:
                if keyword.arg == "specname" and isinstance(keyword.value, ast.Constant):
                    return str(keyword.value.value)
    return function.name


def _is_hook(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    decorators = [d.func if isinstance(d, ast.Call) else d for d in function.decorator_list]
    return function.name.startswith("oml_register_") or any(
        isinstance(d, ast.Name) and d.id == "hookimpl" for d in decorators
    )


def _registers_the_table(statement: ast.stmt, kind: str) -> bool:
    """``statement`` is ``register_components(register, COMPONENTS, "<kind>")`` (``COMPONENTS``: :data:`TABLE`)."""
    match statement:
        case ast.Expr(
            value=ast.Call(
                func=ast.Name(id="register_components"),
                args=[
                    ast.Name(id="register"),
                    ast.Name(id=table),
                    ast.Constant(value=str(called_kind)),
                ],
                keywords=[],
            )
        ):
            return table == TABLE and called_kind == kind
    return False


def _registers_a_search_path(statement: ast.stmt) -> bool:
    """``statement`` is ``register("<a string>")``."""
    match statement:
        case ast.Expr(
            value=ast.Call(func=ast.Name(id="register"), args=[ast.Constant(value=str())], keywords=[])
        ):
            return True
    return False


def registration_faults(source: str, where: str) -> list[str]:
    """Every way the plugin module ``source`` (named ``where`` in the faults) registers other than from its
    table: no module-level ``COMPONENTS``, or a hook whose body (after its docstring) is not the one call of its
    hook (an unknown hook is a fault too)."""
    tree = ast.parse(source)
    faults = []
    tables = [
        target
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id == TABLE
    ]
    if not tables:
        faults.append(f"{where}: no module-level table {TABLE}")
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or not _is_hook(function):
            continue
        hook = _hook_name(function)
        body = function.body[1:] if ast.get_docstring(function) is not None else function.body
        parameters = [argument.arg for argument in function.args.args]
        if hook in COMPONENT_HOOKS:
            kind = COMPONENT_HOOKS[hook]
            expected = f'register_components(register, {TABLE}, "{kind}")'
            fits = len(body) == 1 and _registers_the_table(body[0], kind)
        elif hook == CONFIG_DIRS_HOOK:
            expected = 'register("<search path>")'
            fits = len(body) == 1 and _registers_a_search_path(body[0])
        else:
            faults.append(f"{where}: {function.name} is no hook of oml")
            continue
        if parameters != ["register"] or not fits:
            faults.append(f"{where}: {function.name} must be `def {hook}(register): {expected}`")
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


GOOD = '''
COMPONENTS: tuple[Component, ...] = (Component("loss", "x", "m:X", "x"),)


@hookimpl
def oml_register_losses(register):
    """Register the losses."""
    register_components(register, COMPONENTS, "loss")


@hookimpl
def oml_register_config_dirs(register):
    register("pkg://m.configs")
'''

LOSSES_HOOK = '`def oml_register_losses(register): register_components(register, COMPONENTS, "loss")`'


@pytest.mark.parametrize(
    ("replaced", "replacement", "fault"),
    [
        (
            'register_components(register, COMPONENTS, "loss")',
            'register("x", "m:X", description="x")',
            f"oml_register_losses must be {LOSSES_HOOK}",
        ),
        (
            'register_components(register, COMPONENTS, "loss")',
            "for c in COMPONENTS:\n        register(c.name, c.factory, description=c.description)",
            f"oml_register_losses must be {LOSSES_HOOK}",
        ),
        (
            'register_components(register, COMPONENTS, "loss")',
            'register_components(register, COMPONENTS, "miner")',
            f"oml_register_losses must be {LOSSES_HOOK}",
        ),
        (
            'register_components(register, COMPONENTS, "loss")',
            'register_components(register, OTHER, "loss")',
            f"oml_register_losses must be {LOSSES_HOOK}",
        ),
        (
            'register_components(register, COMPONENTS, "loss")',
            'register_components(register, COMPONENTS, "loss")\n    register("y", "m:Y")',
            f"oml_register_losses must be {LOSSES_HOOK}",
        ),
        (
            'register_components(register, COMPONENTS, "loss")',
            'register_components(register, COMPONENTS, kind="loss")',
            f"oml_register_losses must be {LOSSES_HOOK}",
        ),
        (
            "def oml_register_losses(register):",
            "def oml_register_losses(callback):",
            f"oml_register_losses must be {LOSSES_HOOK}",
        ),
        (
            'register_components(register, COMPONENTS, "loss")',
            'register_components(register, COMPONENTS, "loss")\n\n\n@hookimpl(specname="oml_register_miners")\n'
            'def my_miners(register):\n    register("m", "m:M")',
            '`def oml_register_miners(register): register_components(register, COMPONENTS, "miner")`',
        ),
        (
            'register("pkg://m.configs")',
            "for path in PATHS:\n        register(path)",
            'oml_register_config_dirs must be `def oml_register_config_dirs(register): register("<search path>")`',
        ),
        ("COMPONENTS: tuple[Component, ...] =", "TABLE =", "no module-level table COMPONENTS"),
        (
            "def oml_register_config_dirs(register):",
            "def oml_register_everything(register):",
            "is no hook of oml",
        ),
    ],
)
def test_the_check_finds_a_plugin_that_registers_another_way(
    replaced: str, replacement: str, fault: str
) -> None:
    source = GOOD.replace(replaced, replacement)
    assert source != GOOD
    faults = registration_faults(source, "bad.py")
    assert len(faults) == 1 and faults[0].startswith("bad.py: ") and fault in faults[0], faults


def test_the_check_passes_a_plugin_that_registers_from_its_table() -> None:
    assert registration_faults(GOOD, "good.py") == []
    renamed = GOOD.replace(
        "@hookimpl\ndef oml_register_losses(register):",
        '@hookimpl(specname="oml_register_losses", tryfirst=True)\ndef my_losses(register):',
    )
    assert renamed != GOOD and registration_faults(renamed, "good.py") == []
