"""Plugins that misbehave are named, never fatal to every command.

Real plugin distributions (:mod:`tests.scripts.fake_plugins`) that hang at import or in a hook, end the process
with ``os._exit(3)``, crash with SIGSEGV, or claim another distribution's entry-point name:

- ``oml plugins --check`` loads each plugin in a process of its own and names each one, with what happened and
  where, within its ``--timeout``; the processes of a hung plugin (and those it started) are killed;
- ``oml --version`` and ``oml --help`` import no plugin;
- a normal command warns about a plugin still loading after ``OML_PLUGIN_SLOW_SECONDS``, naming it, the step
  and the allow-list that skips it; ``OML_PLUGIN_TRACE=1`` names each step before it runs;
- an entry-point name of a first-party plugin belongs to its distribution: another claimant is refused, and
  the first-party plugin loads under its name.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from importlib import metadata
from pathlib import Path

import pytest

from oml_core.cli import main
from oml_core.registry import PluginInfo, PluginWarning, Registry, UnknownNameError
from oml_core.registry.manager import FIRST_PARTY_PLUGINS, refused_claimants
from tests.scripts.fake_plugins import fake_distribution

#: Every subprocess of these tests ends well within this many seconds, or the test fails (a hang guard).
HANG_GUARD = 120
LOSSES_VERSION = metadata.version("oml-losses")
SQUATTER_REFUSED = (
    "oml plugin oml_losses (squatter-plugin 0.3): refused: the entry-point name 'oml_losses' is reserved for oml's "
    f"first-party distribution oml-losses (installed: {LOSSES_VERSION}); squatter-plugin must give its entry point "
    "a name of its own"
)

#: A plugin that registers the loss NAME.
LOSS_PLUGIN = (
    "from oml_core import hookimpl\n\n\n"
    "@hookimpl\ndef oml_register_losses(register):\n    register('NAME', 'torch.nn:MSELoss')\n"
)


def pid_file_source(pid_file: Path, then: str) -> str:
    """Plugin code that writes its process id to ``pid_file``, then runs ``then``."""
    return f"import os\n\nwith open({str(pid_file)!r}, 'w') as f:\n    f.write(str(os.getpid()))\n\n{then}"


def is_running(pid: int) -> bool:
    """Whether the process ``pid`` exists and is no zombie (killed but not yet reaped by its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.fixture()
def misbehaving(tmp_path: Path) -> Path:
    """The folder of five installed plugins that misbehave (see each one's entry point):

    - ``hang_import``: writes its pid, then sleeps for an hour at import;
    - ``hang_hook``: in ``oml_register_losses``, starts ``sleep 3600`` (its pid written), then sleeps for an hour;
    - ``exit_import``: ``os._exit(3)`` at import;
    - ``segv_import``: sends itself SIGSEGV at import;
    - ``oml_losses`` of ``squatter-plugin``: oml-losses' entry-point name, registering the loss ``squatted``;
    - ``exit_parent``: ``os._exit(3)`` at import in a command's own process, not in a check's child process.
    """
    root = tmp_path / "site"
    root.mkdir()
    sleep_forever = "import time\n\ntime.sleep(3600)\n"
    source = pid_file_source(tmp_path / "hang_import.pid", sleep_forever)
    fake_distribution(root, "hang-import-plugin", "hang_import", "hang_import_plugin", source)
    hook = (
        "import subprocess\nimport time\n\nfrom oml_core import hookimpl\n\n\n"
        "@hookimpl\ndef oml_register_losses(register):\n"
        "    sleeper = subprocess.Popen(['sleep', '3600'])\n"
        f"    with open({str(tmp_path / 'hang_hook_sleeper.pid')!r}, 'w') as f:\n"
        "        f.write(str(sleeper.pid))\n"
        "    time.sleep(3600)\n"
    )
    fake_distribution(root, "hang-hook-plugin", "hang_hook", "hang_hook_plugin", hook)
    fake_distribution(
        root, "exit-import-plugin", "exit_import", "exit_import_plugin", "import os\n\nos._exit(3)\n"
    )
    segv = "import os\nimport signal\n\nos.kill(os.getpid(), signal.SIGSEGV)\n"
    fake_distribution(root, "segv-import-plugin", "segv_import", "segv_import_plugin", segv)
    squatter = LOSS_PLUGIN.replace("NAME", "squatted")
    fake_distribution(root, "squatter-plugin", "oml_losses", "squatter_plugin", squatter)
    exit_parent = (
        "import multiprocessing\nimport os\n\nif multiprocessing.parent_process() is None:\n    os._exit(3)\n"
    )
    fake_distribution(root, "exit-parent-plugin", "exit_parent", "exit_parent_plugin", exit_parent)
    return root


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch):
    """Every installed plugin, loaded leniently, with the default watchdog."""
    for name in (
        "OML_LOAD_PLUGINS",
        "OML_STRICT_PLUGINS",
        "OML_TRACEBACK",
        "OML_PLUGIN_SLOW_SECONDS",
        "OML_PLUGIN_TRACE",
    ):
        monkeypatch.delenv(name, raising=False)


# ------------------------------------------------------------------------------------------ plugins --check
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the processes' states from /proc")
def test_check_names_each_plugin_that_hangs_exits_crashes_or_squats(run_oml, misbehaving):
    env = {
        "PYTHONPATH": str(misbehaving),
        "OML_LOAD_PLUGINS": "hang_import,hang_hook,exit_import,segv_import,squatter-plugin,oml_samplers",
    }
    result = run_oml("plugins", "--check", "--timeout", "3", env=env, timeout=HANG_GUARD)
    assert result.returncode == 1, result.stdout + result.stderr
    failed = [line.removeprefix("    FAILED: ") for line in result.stdout.splitlines() if "FAILED: " in line]
    assert failed == [
        "oml plugin exit_import (exit-import-plugin 0.3): exited with status 3 during import",
        "oml plugin hang_hook (hang-hook-plugin 0.3): hung for more than 3 s while loading "
        "(hook oml_register_losses)",
        "oml plugin hang_import (hang-import-plugin 0.3): hung for more than 3 s while loading (import)",
        SQUATTER_REFUSED,
        "oml plugin segv_import (segv-import-plugin 0.3): killed by SIGSEGV during import",
        "FAILED: 5 problems in 5 plugins (see above)",
    ]
    assert "oml_samplers  [oml-samplers" in result.stdout and "balance, category_balance" in result.stdout
    assert "Traceback" not in result.stderr
    # the hung plugin's process, and the process it started, were killed
    tmp = misbehaving.parent
    for pid_file in ("hang_import.pid", "hang_hook_sleeper.pid"):
        assert not is_running(int((tmp / pid_file).read_text())), pid_file


def test_check_in_process_sees_plugins_put_on_sys_path_and_keeps_json_pure(misbehaving, monkeypatch, capsys):
    """The children load what the calling process would (its ``sys.path``, not only ``PYTHONPATH``); a plugin
    that fails in its child is warned about, as a broken plugin is, and is its json row's error."""
    monkeypatch.syspath_prepend(str(misbehaving))
    monkeypatch.setenv("OML_LOAD_PLUGINS", "exit_import,segv_import,oml_samplers")
    with pytest.warns(PluginWarning) as caught:
        assert main(["plugins", "--check", "--format", "json", "--timeout", "30"]) == 1
    captured = capsys.readouterr()
    rows = {row["name"]: row for row in json.loads(captured.out)}
    assert set(rows) == {"exit_import", "segv_import", "oml_samplers"}
    exited = "oml plugin exit_import (exit-import-plugin 0.3): exited with status 3 during import"
    crashed = "oml plugin segv_import (segv-import-plugin 0.3): killed by SIGSEGV during import"
    assert rows["exit_import"] == {
        "name": "exit_import",
        "distribution": "exit-import-plugin",
        "version": "0.3",
        "hooks": [],
        "provides": {},
        "every_run": [],
        "shadowed": [],
        "error": exited,
        "broken": [],
    }
    assert rows["segv_import"]["error"] == crashed
    assert rows["oml_samplers"]["error"] is None and rows["oml_samplers"]["broken"] == []
    assert rows["oml_samplers"]["provides"] == {
        "sampler": ["balance", "category_balance", "distinct_category_balance"]
    }
    assert captured.err == "FAILED: 2 problems in 2 plugins (see above)\n"
    assert [str(w.message) for w in caught if w.category is PluginWarning] == [
        f"{exited} (skipped; set OML_STRICT_PLUGINS=1 to raise)",
        f"{crashed} (skipped; set OML_STRICT_PLUGINS=1 to raise)",
    ]
    assert "exit_import_plugin" not in sys.modules  # the calling process imported no plugin


def test_check_of_a_plugin_that_exits_is_an_error_when_strict(misbehaving, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(misbehaving))
    monkeypatch.setenv("OML_LOAD_PLUGINS", "exit_import")
    monkeypatch.setenv("OML_STRICT_PLUGINS", "1")
    assert main(["plugins", "--check", "--timeout", "30"]) == 2
    assert capsys.readouterr().err == (
        "oml plugins: error: oml plugin exit_import (exit-import-plugin 0.3): exited with status 3 during import\n"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "argument --timeout: must be a number of seconds > 0, got '0'"),
        ("-1", "argument --timeout: must be a number of seconds > 0, got '-1'"),
        ("soon", "argument --timeout: must be a number of seconds > 0, got 'soon'"),
        ("inf", "argument --timeout: must be a number of seconds > 0, got 'inf'"),
    ],
)
def test_check_timeout_must_be_a_positive_number(value, message, capsys):
    assert main(["plugins", "--check", "--timeout", value]) == 2
    assert capsys.readouterr().err == f"oml plugins: error: {message}\n"


def test_timeout_without_check_is_an_error(capsys):
    assert main(["plugins", "--timeout", "5"]) == 2
    assert capsys.readouterr().err == (
        "oml plugins: error: --timeout is the time limit of --check: oml plugins --check --timeout SECONDS\n"
    )


# ------------------------------------------------------------------------------------ --version and --help
@pytest.mark.parametrize(
    "args",
    [["--version"], ["--help"], ["train", "--help"], ["plugins", "--help"]],
    ids=" ".join,
)
def test_version_and_help_import_no_plugin(run_oml, misbehaving, args):
    """With a plugin that hangs at import and one that ends the process at import installed (and allowed)."""
    env = {"PYTHONPATH": str(misbehaving), "OML_LOAD_PLUGINS": None}
    result = run_oml(*args, env=env, timeout=HANG_GUARD)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    if args == ["--version"]:
        lines = result.stdout.splitlines()
        assert lines[0] == f"oml-core {metadata.version('oml-core')}"
        for distribution in (
            "hang-import-plugin",
            "exit-import-plugin",
            "segv-import-plugin",
            "squatter-plugin",
        ):
            assert f"{distribution} 0.3" in lines
        assert f"oml-losses {LOSSES_VERSION}" in lines
    else:
        assert result.stdout.startswith(f"usage: oml {args[0] if len(args) > 1 else ''}".rstrip())
    assert not (misbehaving.parent / "hang_import.pid").exists()  # its module never ran


# ------------------------------------------------------------------------------ slow plugins, normal commands
@pytest.fixture()
def slow(tmp_path: Path) -> Path:
    """Two plugins that take 2 s: ``slow_import`` at import, ``slow_hook`` in ``oml_register_losses`` (which
    then registers the loss ``slow_loss``)."""
    fake_distribution(
        tmp_path, "slow-import-plugin", "slow_import", "slow_import_plugin", "import time\n\ntime.sleep(2)\n"
    )
    hook = (
        "import time\n\nfrom oml_core import hookimpl\n\n\n"
        "@hookimpl\ndef oml_register_losses(register):\n"
        "    time.sleep(2)\n    register('slow_loss', 'torch.nn:MSELoss')\n"
    )
    return fake_distribution(tmp_path, "slow-hook-plugin", "slow_hook", "slow_hook_plugin", hook)


def test_a_command_names_the_plugin_it_is_still_loading(run_oml, slow):
    env = {
        "PYTHONPATH": str(slow),
        "OML_LOAD_PLUGINS": "slow_import,slow_hook,oml_samplers",
        "OML_PLUGIN_SLOW_SECONDS": "1",
    }
    result = run_oml("registry", "loss", env=env, timeout=HANG_GUARD)
    assert result.returncode == 0, result.stderr
    assert "slow_loss" in result.stdout  # not stopped: it finished loading
    warned = [
        line.partition("PluginWarning: ")[2] for line in result.stderr.splitlines() if "PluginWarning" in line
    ]
    assert warned == [
        "still loading plugin slow_import (slow-import-plugin 0.3) in import after 1 s; "
        "OML_LOAD_PLUGINS=oml_samplers,slow_hook skips it",
        "still loading plugin slow_hook (slow-hook-plugin 0.3) in hook oml_register_losses after 1 s; "
        "OML_LOAD_PLUGINS=oml_samplers,slow_import skips it",
    ]


def test_slow_warning_threshold_and_off(slow, monkeypatch):
    """In process: the threshold is ``OML_PLUGIN_SLOW_SECONDS``; under it, or with 0, nothing is said. Without an
    allow-list, the hint lists every other installed entry point."""
    monkeypatch.syspath_prepend(str(slow))
    installed = sorted({ep.name for ep in metadata.entry_points(group="oml")} - {"slow_import"})
    monkeypatch.setenv("OML_PLUGIN_SLOW_SECONDS", "0.5")
    with pytest.warns(PluginWarning) as caught:
        registry = Registry(allow=["slow_import"])
    assert [str(w.message) for w in caught if w.category is PluginWarning] == [
        "still loading plugin slow_import (slow-import-plugin 0.3) in import after 0.5 s; "
        f"OML_LOAD_PLUGINS={','.join(installed)} skips it"
    ]
    assert registry.plugins()[1].error is None
    for seconds in ("0", "5"):
        monkeypatch.setenv("OML_PLUGIN_SLOW_SECONDS", seconds)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            Registry(allow=["slow_hook"]).names("loss")


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_malformed_slow_seconds_is_a_one_line_error(value, monkeypatch, capsys):
    monkeypatch.setenv("OML_PLUGIN_SLOW_SECONDS", value)
    message = f"OML_PLUGIN_SLOW_SECONDS must be a number of seconds >= 0 (0: never warn), got {value!r}"
    for args in (["registry", "loss"], ["plugins", "--check"]):
        assert main(args) == 2
        assert capsys.readouterr().err == f"oml {args[0]}: error: {message}\n"


def test_trace_names_the_plugin_that_ends_the_process(run_oml, misbehaving):
    """``os._exit`` in a command's own process, by a plugin that passed its check in a process of its own, cannot
    be prevented; ``OML_PLUGIN_TRACE=1`` names the step it ended in."""
    env = {
        "PYTHONPATH": str(misbehaving),
        "OML_LOAD_PLUGINS": "oml_samplers,exit_parent",
        "OML_PLUGIN_TRACE": "1",
    }
    result = run_oml("registry", "sampler", env=env, timeout=HANG_GUARD)
    assert result.returncode == 3
    traced = [
        line.partition("PluginWarning: ")[2] for line in result.stderr.splitlines() if "PluginWarning" in line
    ]
    # the first step traced is the last: exit_parent comes first in the order of the entry points' names
    assert traced == ["loading plugin exit_parent (exit-parent-plugin 0.3): import"]


# ------------------------------------------------------------------------------------------ entry-point names
def test_squatter_is_refused_and_the_first_party_plugin_loads(run_oml, misbehaving):
    # oml_losses: the name of both claimants (the other misbehaving plugins would hang or end the command)
    result = run_oml(
        "registry", "loss", env={"PYTHONPATH": str(misbehaving), "OML_LOAD_PLUGINS": "oml_losses"}
    )
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()[1:]}
    assert rows["triplet_with_miner"] == "oml_losses" and rows["arcface"] == "oml_losses"
    assert "squatted" not in rows
    assert f"PluginWarning: {SQUATTER_REFUSED} (skipped; set OML_STRICT_PLUGINS=1 to raise)" in result.stderr


def test_squatter_in_process(misbehaving, monkeypatch):
    monkeypatch.syspath_prepend(str(misbehaving))
    for allow in (["oml_losses"], ["squatter-plugin", "oml-losses"]):
        with pytest.warns(PluginWarning, match="refused: the entry-point name 'oml_losses' is reserved"):
            registry = Registry(allow=allow)
        assert registry.get("loss", "triplet_with_miner").plugin.distribution == "oml-losses"
        records = {(r.info.name, r.info.distribution): r.error for r in registry.plugins()}
        assert records == {
            ("oml_core", "oml-core"): None,
            ("oml_losses", "oml-losses"): None,
            ("oml_losses", "squatter-plugin"): SQUATTER_REFUSED,
        }
        with pytest.raises(
            UnknownNameError, match=r"Plugins that failed to load: oml_losses \(squatter-plugin 0.3\)"
        ):
            registry.get("loss", "squatted")
    # allowed alone, the squatter is refused all the same: the name is oml-losses' even where it is not loaded
    with pytest.warns(PluginWarning, match="refused"):
        alone = Registry(allow=["squatter-plugin"])
    assert alone.names("loss") == []


def test_two_distributions_claiming_one_name_are_both_refused(tmp_path, monkeypatch, capsys):
    source = LOSS_PLUGIN.replace("NAME", "{}")
    fake_distribution(tmp_path, "twin-b", "twin", "twin_b", source.format("loss_b"), version="1.2")
    fake_distribution(tmp_path, "twin-a", "twin", "twin_a", source.format("loss_a"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("OML_LOAD_PLUGINS", "twin,oml_samplers")
    reason = (
        "refused: the entry-point name 'twin' is claimed by 2 distributions (twin-a 0.3, twin-b 1.2); none of them "
        "is loaded: uninstall all but one"
    )
    with pytest.warns(PluginWarning) as caught:
        assert main(["plugins", "--check"]) == 1
    assert capsys.readouterr().out.splitlines()[-5:] == [
        "twin  [twin-a 0.3]",
        f"    FAILED: oml plugin twin (twin-a 0.3): {reason}",
        "twin  [twin-b 1.2]",
        f"    FAILED: oml plugin twin (twin-b 1.2): {reason}",
        "FAILED: 2 problems in 2 plugins (see above)",
    ]
    assert [str(w.message) for w in caught if w.category is PluginWarning] == [
        f"oml plugin twin (twin-a 0.3): {reason} (skipped; set OML_STRICT_PLUGINS=1 to raise)",
        f"oml plugin twin (twin-b 1.2): {reason} (skipped; set OML_STRICT_PLUGINS=1 to raise)",
    ]
    with pytest.warns(PluginWarning, match="claimed by 2 distributions"):
        registry = Registry()
    assert "loss_a" not in registry.names("loss") and "loss_b" not in registry.names("loss")
    assert "twin_a" not in sys.modules and "twin_b" not in sys.modules


def test_the_builtins_name_is_refused(tmp_path, monkeypatch):
    source = LOSS_PLUGIN.replace("NAME", "fake")
    monkeypatch.syspath_prepend(
        str(fake_distribution(tmp_path, "core-squatter", "oml_core", "core_squatter", source))
    )
    with pytest.warns(PluginWarning) as caught:
        registry = Registry(allow=["core-squatter"])
    assert [str(w.message) for w in caught if w.category is PluginWarning] == [
        "oml plugin oml_core (core-squatter 0.3): refused: the entry-point name 'oml_core' is reserved for "
        "oml-core's built-in plugin; core-squatter must give its entry point a name of its own (skipped; set "
        "OML_STRICT_PLUGINS=1 to raise)"
    ]
    assert "fake" not in registry.names("loss") and "adam" in registry.names("optimizer")


def test_first_party_names_and_a_squatter_of_a_plugin_not_installed():
    assert dict(FIRST_PARTY_PLUGINS) == {
        "oml_audio": "oml-audio",
        "oml_core": "oml-core",
        "oml_faiss": "oml-faiss",
        "oml_loggers": "oml-loggers",
        "oml_losses": "oml-losses",
        "oml_models": "oml-models",
        "oml_pml": "oml-pml",
        "oml_postprocessors": "oml-postprocessors",
        "oml_qdrant": "oml-qdrant",
        "oml_ray": "oml-ray",
        "oml_samplers": "oml-samplers",
        "oml_serve": "oml-serve",
        "oml_texts": "oml-texts",
    }
    squatter = PluginInfo("oml_pml", "pml-fork", "2.0")
    assert refused_claimants("oml_pml", [squatter]) == {
        squatter: "the entry-point name 'oml_pml' is reserved for oml's first-party distribution oml-pml (not "
        "installed); pml-fork must give its entry point a name of its own"
    }
    real = PluginInfo("oml_pml", "oml_pml", "0.1.0")  # a distribution's name is compared normalized
    assert refused_claimants("oml_pml", [real]) == {}
    assert refused_claimants("acme", [PluginInfo("acme", "oml-acme", "1.0")]) == {}


def test_a_check_whose_exit_status_the_fork_server_lost_is_the_row_its_child_wrote(tmp_path, monkeypatch):
    """Under load, multiprocessing's fork server may lose the exit status of a child that ended well:
    ``Process.exitcode`` is then 255 (an end of file where the status should be; seen about once in 300 checks on a
    loaded 2-core machine, which skipped a healthy plugin as "exited with status 255"). The same loss here for
    real: the plugin stops the fork server (SIGSTOP) at import, so that the child ends unreaped; once the child's
    row is written the fork server is killed, and its end of file is the status. The row is the verdict."""
    import multiprocessing.forkserver
    import signal
    import tempfile
    import threading
    import time

    from oml_core.registry.isolation import run_children
    from oml_core.registry.manager import discover_plugins

    site = tmp_path / "site"
    site.mkdir()
    stop_the_server = "import os\nimport signal\n\nos.kill(os.getppid(), signal.SIGSTOP)\n"
    fake_distribution(site, "stopping-plugin", "stopping", "stopping_plugin", stop_the_server)
    monkeypatch.syspath_prepend(str(site))
    checks = tmp_path / "checks"
    checks.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(checks))
    (plugin,) = discover_plugins(["stopping"], True)
    outcome: list = []
    check = threading.Thread(target=lambda: outcome.extend(run_children([plugin.info], 60.0, 1, False)))
    check.start()
    deadline = time.monotonic() + 120
    while not list(checks.glob("oml-plugins-check-*/0/row.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    server = multiprocessing.forkserver._forkserver._forkserver_pid
    assert server is not None
    os.kill(server, signal.SIGKILL)
    check.join(120)
    assert not check.is_alive()
    ((row, ran),) = outcome
    assert (row["name"], row["error"], ran) == ("stopping", None, True)
