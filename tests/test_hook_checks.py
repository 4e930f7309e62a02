"""A plugin's hooks that oml would silently ignore are errors naming them: a misspelt or singular hook (with the
closest hook), a function named like a hook without ``@hookimpl``, and a wrapper, which oml does not call as one.
``specname`` and ``tryfirst`` are pluggy options oml honours."""

from __future__ import annotations

from pathlib import Path

import pytest

from oml_core import hookimpl
from oml_core.registry import KINDS, PluginLoadError, PluginWarning, Registry
from oml_core.registry.manager import hook_names


class Singular:
    @hookimpl
    def oml_register_extractor(self, register):
        register("never", "torch.nn:Identity")


class Unmarked:
    def oml_register_losses(self, register):
        register("never", "torch.nn:MSELoss")


class Wrapper:
    @hookimpl(wrapper=True)
    def oml_register_losses(self, register):
        register("never", "torch.nn:MSELoss")
        return (yield)


class OldStyleWrapper:
    @hookimpl(hookwrapper=True)
    def oml_register_losses(self, register):
        yield


class Unknown:
    @hookimpl
    def oml_register_everything(self, register):
        register("never", "torch.nn:Identity")


class Working:
    @hookimpl
    def oml_register_losses(self, register):
        register("works", "torch.nn:MSELoss")


class SpecName:
    @hookimpl(specname="oml_register_losses", tryfirst=True)
    def my_losses(self, register):
        register("first", "torch.nn:L1Loss")


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        (
            Singular(),
            "oml_register_extractor: 'oml_register_extractor' is no oml hook; did you mean "
            "'oml_register_extractors'? (skipped",
        ),
        (
            Unknown(),
            "oml_register_everything: 'oml_register_everything' is no oml hook (the hooks: oml_register_callbacks, "
            "oml_register_commands, oml_register_config_dirs, oml_register_datasets, oml_register_extractors, ",
        ),
        (
            Unmarked(),
            "oml_register_losses is named like an oml hook but has no @hookimpl, so it is never called",
        ),
        (
            Wrapper(),
            "oml_register_losses: @hookimpl(wrapper=True) is not supported: oml calls each plugin's "
            "oml_register_losses on its own, with its own register callback; register the components directly",
        ),
        (OldStyleWrapper(), "oml_register_losses: @hookimpl(hookwrapper=True) is not supported"),
    ],
    ids=["singular", "unknown", "unmarked", "wrapper", "hookwrapper"],
)
def test_a_hook_oml_would_ignore_skips_the_plugin_naming_it(plugin, message):
    with pytest.warns(PluginWarning) as caught:
        registry = Registry([("bad", plugin), ("working", Working())], load_entrypoints=False, strict=False)
    (warning,) = [str(w.message) for w in caught if w.category is PluginWarning]
    assert warning.startswith(f"oml plugin bad: invalid plugin: PluginValidationError: {message}")
    assert registry.names("loss") == ["works"]  # the plugin registered nothing; the others work
    assert {r.info.name: r.error is not None for r in registry.plugins()} == {
        "oml_core": False,
        "bad": True,
        "working": False,
    }
    with pytest.raises(PluginLoadError, match="^oml plugin bad: invalid plugin: "):
        Registry([("bad", plugin)], load_entrypoints=False, strict=True)


def test_a_hook_under_another_name_with_specname_is_called_in_pluggy_order():
    registry = Registry([("working", Working()), ("spec", SpecName())], load_entrypoints=False, strict=True)
    assert registry.names("loss") == ["first", "works"]
    assert registry.get("loss", "first").plugin.name == "spec"


def test_the_hook_names_are_the_hookspecs():
    names = hook_names()
    assert "oml_register_extractors" in names and "oml_register_knn_backends" in names
    assert all(name.startswith("oml_register_") for name in names) and len(names) == 19


def test_the_readme_names_every_hook():
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Writing a plugin", 1)[1]
    assert all(f"`{name}`" in section for name in hook_names())


def test_the_plugin_guide_names_every_hook_and_kind():
    guide = (Path(__file__).parents[1] / "docs" / "plugins.md").read_text(encoding="utf-8")
    table = guide.split("## The hooks", 1)[1].split("## Each kind's contract", 1)[0]
    rows = [line.split("|")[1:3] for line in table.splitlines() if line.startswith("| `oml_register_")]
    assert sorted(hook.strip(" `") for hook, _ in rows) == hook_names()
    kinds = [kind.strip(" `") for _, kind in rows if kind.strip().startswith("`")]
    assert kinds == list(KINDS)
