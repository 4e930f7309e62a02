"""Plugins that fail with a ``BaseException`` (``sys.exit`` at import or in a hook) and allow-lists that name
plugins which are not installed: reported like any broken plugin, never ending the host's command.

The entry-point plugins here are real distributions on ``sys.path`` (:mod:`tests.scripts.fake_plugins`).
"""

from __future__ import annotations

import json
import warnings
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from oml_core import hookimpl
from oml_core.registry import PluginLoadError, PluginWarning, Registry
from oml_core.registry.errors import PROPAGATED_EXCEPTIONS, describe_error, is_plugin_failure
from tests.scripts.fake_plugins import fake_distribution


def exiting_distribution(root: Path) -> Path:
    """The distribution ``exiting-oml-plugin`` whose entry point ``exiting`` calls ``sys.exit(3)`` on import."""
    return fake_distribution(
        root, "exiting-oml-plugin", "exiting", "exiting_oml_plugin", "import sys\n\nsys.exit(3)\n"
    )


EXIT_WARNING = "oml plugin exiting (exiting-oml-plugin 0.3): import failed: SystemExit(3)"


def installed_entry_points() -> str:
    """The names of the installed ``oml`` entry points as the allow-list warning lists them."""
    return ", ".join(sorted({ep.name for ep in entry_points(group="oml")}))


# ------------------------------------------------------------------------------- sys.exit at import
def test_plugin_calling_sys_exit_on_import_is_skipped_by_oml_plugins(run_oml, tmp_path):
    env = {"PYTHONPATH": str(exiting_distribution(tmp_path)), "OML_LOAD_PLUGINS": None}
    result = run_oml("plugins", "--format", "json", env=env)
    assert result.returncode == 0, result.stderr
    assert EXIT_WARNING in result.stderr
    report = {row["name"]: row for row in json.loads(result.stdout)}
    assert report["exiting"]["distribution"] == "exiting-oml-plugin"
    assert report["exiting"]["error"] == EXIT_WARNING
    assert report["exiting"]["provides"] == {}
    for name in ("oml_losses", "oml_models", "oml_samplers", "oml_loggers"):
        assert report[name]["error"] is None, name
    assert "triplet_with_miner" in report["oml_losses"]["provides"]["loss"]

    table = run_oml("plugins", env=env)
    assert table.returncode == 0, table.stderr
    assert f"    FAILED: {EXIT_WARNING}" in table.stdout
    assert "oml_losses  [oml-losses 0.1.0]" in table.stdout


def test_plugin_calling_sys_exit_on_import_is_skipped_by_oml_registry(run_oml, tmp_path):
    env = {"PYTHONPATH": str(exiting_distribution(tmp_path)), "OML_LOAD_PLUGINS": None}
    result = run_oml("registry", "loss", env=env)
    assert result.returncode == 0, result.stderr
    assert EXIT_WARNING in result.stderr
    assert "PluginWarning" in result.stderr
    assert "triplet_with_miner" in result.stdout and "contrastive_example" in result.stdout


def test_plugin_calling_sys_exit_on_import_raises_when_strict(run_oml, tmp_path):
    env = {
        "PYTHONPATH": str(exiting_distribution(tmp_path)),
        "OML_LOAD_PLUGINS": None,
        "OML_STRICT_PLUGINS": "1",
    }
    result = run_oml("registry", "loss", env=env)
    assert result.returncode == 2
    assert f"oml registry: error: {EXIT_WARNING}" in result.stderr
    assert "Traceback" not in result.stderr


def test_plugin_calling_sys_exit_on_import_in_process(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(exiting_distribution(tmp_path)))
    with pytest.warns(PluginWarning) as caught:
        registry = Registry(allow={"exiting", "oml_samplers"}, strict=False)
    assert [str(w.message) for w in caught if w.category is PluginWarning] == [
        f"{EXIT_WARNING} (skipped; set OML_STRICT_PLUGINS=1 to raise)"
    ]
    records = {r.info.name: r for r in registry.plugins()}
    assert set(records) == {"oml_core", "exiting", "oml_samplers"}
    assert records["exiting"].error == EXIT_WARNING
    assert "balance" in registry.names("sampler")
    with pytest.raises(PluginLoadError, match=r"import failed: SystemExit\(3\)") as error:
        Registry(allow={"exiting"}, strict=True)
    assert isinstance(error.value.__cause__, SystemExit) and error.value.__cause__.code == 3


def test_keyboard_interrupt_on_import_propagates(tmp_path, monkeypatch):
    """A Ctrl-C while a plugin imports is the user's, not the plugin's: it is not swallowed."""
    source = "raise KeyboardInterrupt\n"
    monkeypatch.syspath_prepend(
        str(fake_distribution(tmp_path, "slow-oml-plugin", "slow", "slow_oml_plugin", source))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginWarning)  # and nothing is reported as a broken plugin
        with pytest.raises(KeyboardInterrupt):
            Registry(allow={"slow"}, strict=False)


# --------------------------------------------------------------------------------- sys.exit in a hook
class ExitingHook:
    @hookimpl
    def oml_register_losses(self, register):
        raise SystemExit(3)


class WorkingHook:
    @hookimpl
    def oml_register_losses(self, register):
        register("works", "torch.nn:MSELoss")


def test_hook_raising_system_exit_is_reported_like_a_broken_plugin():
    registry = Registry(
        [("exiting_hook", ExitingHook()), ("working", WorkingHook())], load_entrypoints=False, strict=False
    )
    message = "oml plugin exiting_hook: hook oml_register_losses failed: SystemExit(3)"
    with pytest.warns(PluginWarning, match=r"^oml plugin exiting_hook: hook oml_register_losses failed") as w:
        assert registry.names("loss") == ["works"]
    assert [str(x.message) for x in w if x.category is PluginWarning] == [
        f"{message} (skipped; set OML_STRICT_PLUGINS=1 to raise)"
    ]
    assert {r.info.name: r.error for r in registry.plugins()} == {
        "oml_core": None,
        "exiting_hook": message,
        "working": None,
    }
    strict = Registry([("exiting_hook", ExitingHook())], load_entrypoints=False, strict=True)
    with pytest.raises(PluginLoadError, match=r"hook oml_register_losses failed: SystemExit\(3\)"):
        strict.names("loss")


def test_hook_system_exit_in_a_real_distribution_keeps_the_command_alive(run_oml, tmp_path):
    source = (
        "import sys\n\nfrom oml_core import hookimpl\n\n\n"
        "@hookimpl\ndef oml_register_losses(register):\n    sys.exit(3)\n"
    )
    root = fake_distribution(tmp_path, "hook-exit-plugin", "hook_exit", "hook_exit_plugin", source)
    result = run_oml("registry", "loss", env={"PYTHONPATH": str(root), "OML_LOAD_PLUGINS": None})
    assert result.returncode == 0, result.stderr
    assert (
        "oml plugin hook_exit (hook-exit-plugin 0.3): hook oml_register_losses failed: SystemExit(3)"
        in result.stderr
    )
    assert "triplet_with_miner" in result.stdout


@pytest.mark.parametrize("error", [KeyboardInterrupt(), GeneratorExit()], ids=type)
def test_hook_keyboard_interrupt_and_generator_exit_propagate(error):
    class Interrupted:
        @hookimpl
        def oml_register_losses(self, register):
            raise error

    registry = Registry([("interrupted", Interrupted())], load_entrypoints=False, strict=False)
    with pytest.raises(type(error)):
        registry.names("loss")


def test_which_errors_are_plugin_failures():
    assert PROPAGATED_EXCEPTIONS == (KeyboardInterrupt, GeneratorExit)
    assert is_plugin_failure(SystemExit(3)) and is_plugin_failure(ImportError("x"))
    assert not is_plugin_failure(KeyboardInterrupt()) and not is_plugin_failure(GeneratorExit())
    assert describe_error(SystemExit(3)) == "SystemExit(3)"
    assert describe_error(SystemExit()) == "SystemExit()"
    assert describe_error(ImportError("needs frobnicate")) == "ImportError: needs frobnicate"


# ------------------------------------------------------------------------ allow-list names not installed
def test_allow_list_naming_an_unknown_plugin_warns_with_close_match_and_installed_names(run_oml):
    result = run_oml("plugins", "--format", "json", env={"OML_LOAD_PLUGINS": "oml_losess,oml_samplers"})
    assert result.returncode == 0, result.stderr
    assert {row["name"] for row in json.loads(result.stdout)} == {"oml_samplers"}
    assert (
        "PluginWarning: The plugin allow-list (OML_LOAD_PLUGINS) names 'oml_losess', which is no installed oml "
        "plugin (entry point or distribution). Did you mean: oml_losses, " in result.stderr
    )
    assert "oml_losses" in installed_entry_points()
    assert f"Installed oml entry points: {installed_entry_points()}. (set OML_STRICT" in result.stderr
    assert "oml_samplers'" not in result.stderr  # the installed name is not reported


def test_allow_list_with_only_unknown_names_says_so(run_oml):
    result = run_oml("plugins", env={"OML_LOAD_PLUGINS": "foo"})
    assert result.returncode == 0
    assert "names 'foo', which is no installed oml plugin" in result.stderr
    assert "Did you mean" not in result.stderr
    assert f"Installed oml entry points: {installed_entry_points()}." in result.stderr


def test_allow_list_naming_an_unknown_plugin_is_an_error_when_strict(run_oml):
    result = run_oml("registry", "loss", env={"OML_LOAD_PLUGINS": "oml_losess", "OML_STRICT_PLUGINS": "1"})
    assert result.returncode == 2
    assert "oml registry: error: The plugin allow-list (OML_LOAD_PLUGINS) names 'oml_losess'" in result.stderr
    assert "Did you mean: oml_losses, " in result.stderr
    assert "Traceback" not in result.stderr


def test_allow_list_unknown_names_in_process(tmp_path, monkeypatch):
    source = "from oml_core import hookimpl\n"
    monkeypatch.syspath_prepend(
        str(fake_distribution(tmp_path, "my-oml-plugin", "mine", "my_oml_plugin", source))
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # the entry point's name, its distribution's name and the core's own names are all known
        Registry(allow={"mine", "my-oml-plugin", "oml_core", "oml-core"}, strict=False)
    assert [w for w in caught if issubclass(w.category, PluginWarning)] == []

    with pytest.warns(PluginWarning) as caught:
        registry = Registry(allow={"mine", "my_oml_plugn", "zzz"}, strict=False)
    messages = [str(w.message) for w in caught if w.category is PluginWarning]
    assert len(messages) == 2
    assert messages[0].startswith(
        "The plugin allow-list (OML_LOAD_PLUGINS) names 'my_oml_plugn', which is no installed oml plugin "
        "(entry point or distribution). Did you mean: my-oml-plugin"
    )
    assert messages[1].startswith(
        "The plugin allow-list (OML_LOAD_PLUGINS) names 'zzz', which is no installed oml plugin "
        "(entry point or distribution). Installed oml entry points: "
    )
    assert messages[1].endswith(
        f"Installed oml entry points: {installed_entry_points()}. (set OML_STRICT_PLUGINS=1 to raise)"
    )
    assert "mine, oml_" in messages[1]
    assert [r.info.name for r in registry.plugins()] == ["oml_core", "mine"]
    with pytest.raises(PluginLoadError, match="names 'zzz'"):
        Registry(allow={"zzz"}, strict=True)


def test_a_lazy_factory_whose_module_calls_sys_exit_is_a_plugin_load_error(tmp_path, monkeypatch):
    (tmp_path / "exiting_factory_module.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    class LazyExiting:
        @hookimpl
        def oml_register_losses(self, register):
            register("exiting_loss", "exiting_factory_module:Loss")

    registry = Registry([LazyExiting()], load_entrypoints=False)
    with pytest.raises(
        PluginLoadError,
        match=r"loss 'exiting_loss' of plugin .* cannot be imported from "
        r"'exiting_factory_module:Loss': SystemExit\(3\)$",
    ):
        registry.get("loss", "exiting_loss").load()
