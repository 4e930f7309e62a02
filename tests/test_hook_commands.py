"""``oml_register_commands``: a plugin adds ``oml NAME ...`` with its own arguments.

Real plugin distributions (:func:`tests.scripts.fake_plugins.fake_distribution`): ``greeter`` registers the
command ``greet``; ``clasher`` registers ``train``, the name of one of oml's commands; ``echoer`` registers
``greet`` too (two plugins, one name). Built-in commands never load a plugin to be found.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from oml_core.cli import main
from oml_core.cli.commands import build_parser
from oml_core.registry import PluginLoadError, PluginWarning, Registry
from oml_core.registry.kinds import BUILTIN_COMMANDS
from tests.scripts.fake_plugins import fake_distribution

#: ``oml greet WHO [--times N]`` prints ``hello WHO`` N times; WHO ``nobody`` is a user error, ``crash`` a bug.
#: The module writes ``imported.txt`` next to itself when it is imported.
GREETER = """\
from pathlib import Path

from oml_core import hookimpl
from oml_core.registry import ConfigError

Path(__file__).with_name("imported.txt").write_text("greeter")


def greet(parser):
    parser.add_argument("who")
    parser.add_argument("--times", type=int, default=1)

    def run(args):
        if args.who == "nobody":
            raise ConfigError("greet: there is nobody to greet")
        if args.who == "crash":
            raise RuntimeError("boom")
        print(", ".join([f"hello {args.who}"] * args.times))
        return 4 if args.who == "four" else None

    return run


@hookimpl
def oml_register_commands(register):
    register("greet", greet, description="greet someone")
"""
CLASHER = """\
from oml_core import hookimpl


@hookimpl
def oml_register_commands(register):
    register("train", lambda parser: lambda args: print("the plugin's train"))
"""
ECHOER = """\
from oml_core import hookimpl


def greet(parser):
    parser.add_argument("words", nargs="*")
    return lambda args: print(" ".join(args.words))


@hookimpl
def oml_register_commands(register):
    register("greet", greet, description="echo the words")
"""
USAGE = 2


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    """The folder of the installed fake plugins (not on ``sys.path`` yet)."""
    root = tmp_path / "site"
    root.mkdir()
    fake_distribution(root, "greeter-plugin", "greeter", "greeter_cmd", GREETER)
    fake_distribution(root, "clasher-plugin", "clasher", "clasher_cmd", CLASHER)
    fake_distribution(root, "echoer-plugin", "echoer", "echoer_cmd", ECHOER)
    return root


@pytest.fixture()
def installed(site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake plugins on ``sys.path`` of this process, only ``greeter`` allowed (``OML_LOAD_PLUGINS``)."""
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("OML_LOAD_PLUGINS", "greeter")
    for name in ("OML_STRICT_PLUGINS", "OML_TRACEBACK"):
        monkeypatch.delenv(name, raising=False)
    return site


def test_the_reserved_names_are_the_cli_commands():
    assert BUILTIN_COMMANDS == set(build_parser().commands)


def test_the_command_runs_from_oml_with_its_arguments(run_oml, tmp_path):
    """In a process of its own, every installed plugin allowed; ``oml --help`` imports none of them."""
    site = fake_distribution(tmp_path, "greeter-plugin", "greeter", "greeter_cmd", GREETER)
    env = {"PYTHONPATH": str(site), "OML_LOAD_PLUGINS": None}
    done = run_oml("greet", "world", "--times", "2", env=env)
    assert (done.returncode, done.stdout) == (0, "hello world, hello world\n"), done.stderr
    assert (site / "imported.txt").read_text() == "greeter"

    (site / "imported.txt").unlink()
    done = run_oml("--help", env=env)
    assert done.returncode == 0 and done.stderr == ""
    assert "plugins add commands of their own: `oml plugins` lists them" in " ".join(done.stdout.split())
    assert not (site / "imported.txt").exists()


def test_the_status_and_the_help_of_the_command(installed, capsys):
    assert main(["greet", "four"]) == 4
    assert capsys.readouterr().out == "hello four\n"
    assert main(["--traceback", "greet", "--times=3", "you"]) == 0  # an option before the name, one after
    assert capsys.readouterr().out == "hello you, hello you, hello you\n"
    assert main(["greet", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: oml greet [-h] [--traceback] [--times TIMES] who\n\ngreet someone\n")


@pytest.mark.parametrize(
    "argv, line",
    [
        (["greet", "nobody"], "oml greet: error: greet: there is nobody to greet"),
        (["greet"], "oml greet: error: the following arguments are required: who"),
        (["greet", "x", "--times", "two"], "oml greet: error: argument --times: invalid int value: 'two'"),
        (["greet", "x", "--loud"], "oml greet: error: unrecognized arguments: --loud"),
    ],
    ids=["handler", "missing", "type", "unknown"],
)
def test_a_user_error_of_the_command_is_one_line(installed, capsys, argv, line):
    assert main(argv) == USAGE
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"{line}\n")


def test_a_bug_of_the_command_names_the_command_and_its_plugin(installed, capsys):
    assert main(["greet", "crash"]) == 1
    assert capsys.readouterr().err == (
        "oml greet: internal error: the command 'greet' of the plugin greeter (greeter-plugin 0.3) failed: "
        "RuntimeError: boom (run with OML_TRACEBACK=1 for the traceback)\n"
    )


def test_an_unknown_command_lists_the_plugin_commands(installed, capsys):
    assert main(["gret", "world"]) == USAGE
    commands = ", ".join(build_parser().commands)
    assert capsys.readouterr().err == (
        f"oml: error: unknown command 'gret'; did you mean 'greet'? (commands: {commands}; plugin commands: "
        "greet)\n"
    )


def test_oml_plugins_lists_the_commands(installed, capsys):
    assert main(["plugins", "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["name"], row["provides"], row["error"]) == ("greeter", {"command": ["greet"]}, None)
    assert main(["plugins"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "greeter  [greeter-plugin 0.3]",
        "    command          greet",
    ]


def test_a_plugin_taking_a_builtin_name_is_refused_naming_it_and_the_command(installed, monkeypatch, capsys):
    monkeypatch.setenv("OML_LOAD_PLUGINS", "clasher")
    refusal = (
        "oml plugin clasher (clasher-plugin 0.3): hook oml_register_commands failed: ValueError: command 'train' "
        "of plugin clasher (clasher-plugin 0.3): 'train' is a built-in command of oml; register it under another "
        "name"
    )
    with pytest.warns(PluginWarning) as caught:
        assert Registry().names("command") == []
    assert [str(w.message) for w in caught] == [f"{refusal} (skipped; set OML_STRICT_PLUGINS=1 to raise)"]
    with pytest.raises(PluginLoadError) as raised:
        Registry(strict=True).names("command")
    assert str(raised.value) == refusal

    with pytest.warns(PluginWarning):
        assert main(["plugins", "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["name"], row["provides"], row["error"]) == ("clasher", {}, refusal)
    # oml train stays oml's: its --help loads no plugin, so nothing warns
    assert main(["train", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: oml train")


def test_plugins_check_reports_the_refused_command(run_oml, site):
    env = {"PYTHONPATH": str(site), "OML_LOAD_PLUGINS": "clasher,greeter"}
    done = run_oml("plugins", "--check", env=env)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[:2] == ["clasher  [clasher-plugin 0.3]", lines[1]]
    assert lines[1].startswith(
        "    FAILED: oml plugin clasher (clasher-plugin 0.3): hook oml_register_commands"
    )
    assert "'train' is a built-in command of oml" in lines[1]
    assert lines[2:] == ["greeter  [greeter-plugin 0.3]", "    command          greet", lines[-1]]
    assert lines[-1] == "FAILED: 1 problem in 1 plugin (see above)"


def test_two_plugins_with_one_command_name_are_named_and_the_qualified_name_runs(
    installed, monkeypatch, capsys
):
    monkeypatch.setenv("OML_LOAD_PLUGINS", "greeter,echoer")
    assert main(["greet", "world"]) == USAGE
    assert capsys.readouterr().err == (
        "oml greet: error: command 'greet' is given by 2 plugins: echoer:greet from echoer (echoer-plugin 0.3); "
        "greeter:greet from greeter (greeter-plugin 0.3). Use the qualified form 'plugin:name' to choose one.\n"
    )
    assert main(["echoer:greet", "a", "b"]) == 0
    assert main(["greeter:greet", "world"]) == 0
    assert capsys.readouterr().out == "a b\nhello world\n"
