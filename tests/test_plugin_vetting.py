"""Every command imports only the plugins that passed a check in a process of their own.

Real plugin distributions (:mod:`tests.scripts.fake_plugins`) that end the process with ``os._exit`` at import
or in a hook, sleep for an hour in a hook, raise in a hook, register ``adam`` and ``resnet`` again, or hang only
in a command's own process, run through the real ``oml`` program:

- ``oml plugins``, ``oml registry`` and ``oml train --show-config`` skip each broken plugin with one warning
  naming it, its distribution and what happened, and go on; ``OML_STRICT_PLUGINS=1`` makes it the one error line;
- the verdicts are kept: a command whose plugins all have one starts no process; a plugin edited, or one beside
  which a distribution was installed, is checked again;
- a plugin that hangs in the command's own process ends the command with one line, and the next command skips it;
- a name that a first-party plugin gives builds the first party's (``oml train`` with its default config), the
  other is reachable by its qualified name, and ``oml plugins --check`` says so.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

import pytest

import oml_core.registry.vetting as vetting_module
from oml_core.cli import main
from oml_core.registry import PluginWarning, Registry
from oml_core.registry.manager import guarded_loading
from oml_core.registry.verdicts import read_verdicts, verdicts_path
from oml_core.registry.vetting import PluginVetting
from tests.scripts.fake_plugins import fake_distribution
from tests.scripts.trained_run import TINY_TRAINING

#: Every subprocess of these tests ends well within this many seconds, or the test fails (a hang guard).
HANG_GUARD = 240
SKIPPED = " (skipped; set OML_STRICT_PLUGINS=1 to raise)"
EXIT_IMPORT = "oml plugin exit_import (exit-import-plugin 0.3): exited with status 3 during import"
EXIT_HOOK = (
    "oml plugin exit_hook (exit-hook-plugin 0.3): exited with status 4 during hook oml_register_losses"
)
HANG_HOOK = (
    "oml plugin hang_hook (hang-hook-plugin 0.3): hung for more than 2 s while loading "
    "(hook oml_register_losses)"
)
RAISE_HOOK = (
    "oml plugin raise_hook (raise-hook-plugin 0.3): hook oml_register_losses failed: "
    "RuntimeError: no losses today"
)


def hook_plugin(body: str, imports: str = "") -> str:
    """A plugin whose ``oml_register_losses`` runs ``body``."""
    return f"{imports}from oml_core import hookimpl\n\n\n@hookimpl\ndef oml_register_losses(register):\n    {body}\n"


def plugin_warnings(stderr: str) -> list[str]:
    """The messages of the ``PluginWarning`` s about plugins in ``stderr``."""
    return [
        line.partition("PluginWarning: ")[2]
        for line in stderr.splitlines()
        if "PluginWarning: oml plugin " in line
    ]


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of four installed plugins: ``exit_import`` (``os._exit(3)`` at import), ``exit_hook``
    (``os._exit(4)`` in its hook), ``hang_hook`` (sleeps for an hour in its hook), ``raise_hook`` (raises in its
    hook)."""
    root = tmp_path_factory.mktemp("broken_site")
    fake_distribution(
        root, "exit-import-plugin", "exit_import", "exit_import_plugin", "import os\n\nos._exit(3)\n"
    )
    exit_hook = hook_plugin("os._exit(4)", "import os\n\n")
    fake_distribution(root, "exit-hook-plugin", "exit_hook", "exit_hook_plugin", exit_hook)
    hang_hook = hook_plugin("time.sleep(3600)", "import time\n\n")
    fake_distribution(root, "hang-hook-plugin", "hang_hook", "hang_hook_plugin", hang_hook)
    raise_hook = hook_plugin("raise RuntimeError('no losses today')")
    return fake_distribution(root, "raise-hook-plugin", "raise_hook", "raise_hook_plugin", raise_hook)


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch):
    """Every installed plugin, loaded leniently."""
    for name in (
        "OML_LOAD_PLUGINS",
        "OML_STRICT_PLUGINS",
        "OML_TRACEBACK",
        "OML_PLUGIN_TRACE",
        "OML_PLUGIN_TIMEOUT",
    ):
        monkeypatch.delenv(name, raising=False)


def test_commands_skip_plugins_that_exit_hang_or_raise_and_go_on(run_oml, broken):
    env = {"PYTHONPATH": str(broken), "OML_PLUGIN_TIMEOUT": "2"}
    expected = [f"{failure}{SKIPPED}" for failure in (EXIT_HOOK, EXIT_IMPORT, HANG_HOOK, RAISE_HOOK)]
    for args in (["plugins"], ["registry", "sampler"], ["train", "--show-config"]):
        result = run_oml(*args, env=env, timeout=HANG_GUARD)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        assert plugin_warnings(result.stderr) == expected, args
        assert "Traceback" not in result.stderr
        if args == ["plugins"]:
            for failure in (EXIT_HOOK, EXIT_IMPORT, HANG_HOOK, RAISE_HOOK):
                assert f"    FAILED: {failure}" in result.stdout.splitlines()
            assert (
                "    sampler          balance, category_balance, distinct_category_balance" in result.stdout
            )
        elif args == ["registry", "sampler"]:
            assert "    balance " in result.stdout
        else:
            assert "\nmax_epochs: " in result.stdout and "name: triplet_with_miner" in result.stdout
    strict = run_oml("registry", "sampler", env={**env, "OML_STRICT_PLUGINS": "1"}, timeout=HANG_GUARD)
    assert strict.returncode == 2
    assert strict.stdout == ""
    assert strict.stderr == f"oml registry: error: {EXIT_HOOK}\n"


def test_kept_verdicts_start_no_process_and_a_changed_plugin_is_checked_again(broken, monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(broken))
    monkeypatch.setenv("OML_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("OML_LOAD_PLUGINS", "exit_import,oml_samplers")

    def never(message: str) -> NoReturn:
        raise AssertionError(message)

    with guarded_loading(PluginVetting(timeout=30, end=never)), pytest.warns(PluginWarning) as caught:
        registry = Registry()
    assert [str(w.message) for w in caught if w.category is PluginWarning] == [f"{EXIT_IMPORT}{SKIPPED}"]
    assert registry.names("sampler") == ["balance", "category_balance", "distinct_category_balance"]
    assert sorted(read_verdicts(verdicts_path()).values(), key=str) == [None, EXIT_IMPORT]

    def no_process(*args: object, **kwargs: object) -> NoReturn:
        raise AssertionError("a plugin was checked again")

    monkeypatch.setattr(vetting_module, "run_children", no_process)
    with guarded_loading(PluginVetting(timeout=30, end=never)), pytest.warns(PluginWarning, match="status 3"):
        Registry()  # a new command: the kept verdicts, no process
    # an edit of the plugin, or an install beside it (its site folder changes), and it is checked again
    for changed in (broken / "exit_import_plugin.py", broken):
        stat = changed.stat()
        os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        with (
            guarded_loading(PluginVetting(timeout=30, end=never)),
            pytest.raises(AssertionError, match="checked again"),
        ):
            Registry()
        os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # as it was: its verdict holds again
    with guarded_loading(PluginVetting(timeout=30, end=never)), pytest.warns(PluginWarning, match="status 3"):
        Registry()
    assert "exit_import_plugin" not in sys.modules  # this process never imported it


def test_a_plugin_that_hangs_in_the_command_ends_it_with_one_line_and_is_skipped_next(run_oml, tmp_path):
    hang = hook_plugin(
        "if multiprocessing.parent_process() is None:\n        time.sleep(3600)",
        "import multiprocessing\nimport time\n\n",
    )
    site = fake_distribution(tmp_path, "hang-parent-plugin", "hang_parent", "hang_parent_plugin", hang)
    env = {"PYTHONPATH": str(site), "OML_PLUGIN_TIMEOUT": "2", "OML_LOAD_PLUGINS": "hang_parent,oml_samplers"}
    hung = (
        "oml plugin hang_parent (hang-parent-plugin 0.3): hung for more than 2 s while loading "
        "(hook oml_register_losses)"
    )
    # its check passed: it hangs in the command's process only
    first = run_oml("registry", "sampler", env=env, timeout=HANG_GUARD)
    assert first.returncode == 1
    assert first.stderr.splitlines()[-1] == (
        f"oml registry: {hung}; ended: a running import or hook cannot be stopped. The next commands skip it "
        "(oml plugins --check checks it again)"
    )
    second = run_oml("registry", "sampler", env=env, timeout=HANG_GUARD)
    assert second.returncode == 0, second.stderr
    assert plugin_warnings(second.stderr) == [f"{hung}{SKIPPED}"]
    assert "    balance " in second.stdout


SQUATTER = (
    "from oml_core import hookimpl\n\n\n"
    "def squatted(*args, **kwargs):\n    raise RuntimeError('the squatter was built')\n\n\n"
    "@hookimpl\ndef oml_register_optimizers(register):\n    register('adam', squatted)\n\n\n"
    "@hookimpl\ndef oml_register_extractors(register):\n    register('resnet', squatted)\n"
)


@pytest.mark.slow
def test_a_squatted_name_builds_the_first_partys_and_check_says_so(run_oml, tmp_path):
    (tmp_path / "site").mkdir()
    site = fake_distribution(tmp_path / "site", "squat-plugin", "squat", "squat_plugin", SQUATTER)
    env = {"PYTHONPATH": str(site)}
    check = run_oml("plugins", "--check", env={**env, "OML_LOAD_PLUGINS": "squat"}, timeout=HANG_GUARD)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.splitlines() == [
        "squat  [squat-plugin 0.3]",
        "    extractor        resnet",
        "    optimizer        adam",
        "    SHADOWED: extractor 'resnet' builds oml-models's; this plugin's is squat:resnet",
        "    SHADOWED: optimizer 'adam' builds oml-core's; this plugin's is squat:adam",
        "OK: 1 plugin, 2 components load",
    ]
    for name, provider in (
        ("adam", "plugin oml_core, distribution oml-core"),
        ("squat:adam", "plugin squat,"),
    ):
        shown = run_oml("registry", "optimizer", name, env=env, timeout=HANG_GUARD)
        assert shown.returncode == 0, shown.stderr
        assert f"provider:    {provider}" in shown.stdout
    logs = tmp_path / "logs"
    trained = run_oml(*TINY_TRAINING, f"logs_root={logs}", env=env, timeout=HANG_GUARD)
    assert trained.returncode == 0, trained.stdout[-2000:] + trained.stderr[-2000:]
    assert "the squatter was built" not in trained.stdout + trained.stderr
    assert "OVERALL/cmc/1" in trained.stdout


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "inf"])
def test_malformed_timeout_is_a_one_line_error(value, monkeypatch, capsys):
    monkeypatch.setenv("OML_PLUGIN_TIMEOUT", value)
    assert main(["registry", "loss"]) == 2
    assert capsys.readouterr().err == (
        f"oml registry: error: OML_PLUGIN_TIMEOUT must be a number of seconds > 0, got {value!r}\n"
    )
