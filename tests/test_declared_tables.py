"""A plugin registers its table by one declaration, ``OML_COMPONENTS`` (and its config folders by
``OML_CONFIG_DIRS``), with the checks of a hook: the kinds at load, the names and factories when registered, nothing
imported, a broken declaration skipping its plugin alone; per-kind hooks still work beside it."""

from __future__ import annotations

import sys

import pytest

from oml_core import hookimpl
from oml_core.registry import PluginLoadError, PluginWarning, Registry
from oml_core.utils.lazy import Component

#: A factory module that does not exist: registering must not import it.
UNIMPORTED = "oml_test_never_imported_module"


class Declared:
    OML_COMPONENTS = (
        Component("loss", "decl_mse", "torch.nn:MSELoss", "mean squared error", aliases=("dmse",)),
        Component("loss", "decl_lazy", f"{UNIMPORTED}:Loss", "never imported while registering"),
        Component("callback", "decl_log", f"{UNIMPORTED}:Log", "added to every run", every_run=True),
    )
    OML_CONFIG_DIRS = ("file:///nowhere/declared-configs",)


class Hooked:
    """A third-party plugin of the per-kind hooks."""

    @hookimpl
    def oml_register_losses(self, register):
        register("hooked_l1", "torch.nn:L1Loss", description="L1")

    @hookimpl
    def oml_register_config_dirs(self, register):
        register("file:///nowhere/hooked-configs")


class Working:
    OML_COMPONENTS = (
        Component("loss", "still_here", "torch.nn:SmoothL1Loss", "loads whatever the others do"),
    )


def _registry(*plugins: object, strict: bool = True) -> Registry:
    return Registry(
        plugins=[(type(plugin).__name__.lower(), plugin) for plugin in plugins],
        load_entrypoints=False,
        strict=strict,
    )


def test_a_declared_table_is_registered_beside_a_plugin_of_hooks() -> None:
    registry = _registry(Declared(), Hooked())
    mse = registry.get("loss", "dmse")
    assert (mse.name, mse.factory, mse.description, mse.plugin.name) == (
        "decl_mse",
        "torch.nn:MSELoss",
        "mean squared error",
        "declared",
    )
    assert registry.get("loss", "hooked:hooked_l1").factory == "torch.nn:L1Loss"
    assert registry.get("loss", "declared:decl_lazy").factory == f"{UNIMPORTED}:Loss"
    assert UNIMPORTED not in sys.modules
    assert [e.name for e in registry.every_run_callbacks()] == ["decl_log"]
    assert registry.config_dirs()[-2:] == [
        "file:///nowhere/declared-configs",
        "file:///nowhere/hooked-configs",
    ]
    hooks = {record.info.name: record.hooks for record in registry.plugins()}
    assert hooks["declared"] == ["oml_register_callbacks", "oml_register_config_dirs", "oml_register_losses"]
    assert hooks["hooked"] == ["oml_register_config_dirs", "oml_register_losses"]
    assert registry.provided_by("declared") == {"callback": ["decl_log"], "loss": ["decl_lazy", "decl_mse"]}


class TableAndHook:
    OML_COMPONENTS = (Component("loss", "twice", "torch.nn:MSELoss", "in the table"),)

    @hookimpl
    def oml_register_losses(self, register):
        register("twice", "torch.nn:L1Loss")


def test_a_name_in_both_the_table_and_a_hook_of_one_plugin_is_registered_twice() -> None:
    with pytest.raises(
        PluginLoadError,
        match=r"oml plugin tableandhook: hook oml_register_losses failed: .*"
        r"plugin tableandhook registers loss 'twice' twice",
    ):
        _registry(TableAndHook()).entries("loss")


def _declaring(**declarations: object) -> object:
    """A plugin object ``bad`` with the attributes ``declarations``."""
    return type("Bad", (), declarations)()


@pytest.mark.parametrize(
    ("declarations", "message"),
    [
        (
            {"OML_COMPONENTS": (Component("losses", "x", "m:X", "x"),)},
            "OML_COMPONENTS[0] ('x'): 'losses' is no oml kind; did you mean 'loss'?",
        ),
        ({"OML_COMPONENTS": {"loss": "m:X"}}, "OML_COMPONENTS must be a tuple or list, got dict"),
        (
            {"OML_COMPONENTS": Component("loss", "x", "m:X", "x")},
            "OML_COMPONENTS[0] must be a oml_core.utils.lazy.Component, got 'loss'",
        ),
        (
            {"OML_COMPONENT": (Component("loss", "x", "m:X", "x"),)},
            "OML_COMPONENT is no oml declaration, so it is never read; did you mean 'OML_COMPONENTS'?",
        ),
        ({"OML_CONFIG_DIRS": "pkg://m.configs"}, "OML_CONFIG_DIRS must be a tuple or list, got str"),
        (
            {"OML_CONFIG_DIRS": ("",)},
            "OML_CONFIG_DIRS[0] must be a search path such as 'pkg://my_pkg.configs'",
        ),
    ],
    ids=["kind", "not-a-sequence", "one-row", "misspelt", "config-dirs-string", "config-dir-empty"],
)
def test_a_bad_declaration_skips_its_plugin_alone(declarations: dict[str, object], message: str) -> None:
    with pytest.warns(PluginWarning, match=r"oml plugin bad: invalid plugin: .*") as caught:
        registry = _registry(_declaring(**declarations), Working(), strict=False)
    assert any(message in str(w.message) for w in caught), [str(w.message) for w in caught]
    assert message in (next(r for r in registry.plugins() if r.info.name == "bad").error or "")
    assert "still_here" in registry.names("loss")
    assert registry.provided_by("bad") == {}
    with pytest.raises(PluginLoadError, match="invalid plugin"):
        _registry(_declaring(**declarations), strict=True)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            Component("loss", "a:b", "m:X", "x"),
            "OML_COMPONENTS failed: ValueError: loss name must be a non-empty string without ':', got 'a:b'",
        ),
        (Component("loss", "x", "not a path", "x"), "factory must be callable or a 'module:attr' string"),
        (
            Component("loss", "x", "m:X", "x", every_run=True),
            "only a callback can be added to every training run (every_run=True), not a loss",
        ),
    ],
    ids=["name", "factory", "every-run"],
)
def test_a_bad_row_is_reported_naming_the_declaration(row: Component, message: str) -> None:
    with pytest.warns(PluginWarning) as caught:
        registry = _registry(_declaring(OML_COMPONENTS=(row,)), Working(), strict=False)
        assert "still_here" in registry.names("loss")
    assert any(message in str(w.message) and "oml plugin bad" in str(w.message) for w in caught), [
        str(w.message) for w in caught
    ]
    with pytest.raises(PluginLoadError, match="oml plugin bad: OML_COMPONENTS failed"):
        _registry(_declaring(OML_COMPONENTS=(row,)), strict=True).entries("loss")
