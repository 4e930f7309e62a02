"""The command line never shows a traceback for a user error: a misspelt key, a bad override or yaml file, a
path that cannot be written get one line that names the key, override, file or path with oml's hint, exit 2
and write nothing; a bug gets one ``internal error`` line and exit 1; a Ctrl-C exit 130; ``OML_TRACEBACK=1``
or ``--traceback`` shows the traceback; a closed stdout ends quietly."""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from oml_core.cli import main
from oml_core.cli import pipelines as pipeline_commands
from oml_core.cli import registry as registry_command
from oml_core.datasets import mock
from oml_core.datasets.mock import generate_mock_dataset
from oml_core.lightning import stops
from oml_core.registry import ConfigError

#: A yaml file whose line 3 opens a list that is never closed.
BROKEN_YAML = "max_epochs: 1\nbs_val: 8\ntags: [a, b\n"


@dataclass(frozen=True)
class Case:
    """``oml ARGS`` with the environment variables ``env`` must exit 2 with one stderr line that starts with
    ``oml COMMAND: error: `` and contains each of ``fragments`` (in both, ``{tmp}`` is the test's folder); a
    pipeline is given ``logs_root={tmp}/logs`` and must not create it."""

    args: tuple[str, ...]
    fragments: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    def argv(self, tmp: Path) -> list[str]:
        """The command line's arguments, ``logs_root`` added for a pipeline."""
        args = [arg.format(tmp=tmp) for arg in self.args]
        return [*args, f"logs_root={tmp / 'logs'}"] if args[0] in pipeline_commands.PIPELINE_CONFIGS else args


CASES = {
    "misspelt key": Case(
        ("train", "max_epoch=1"),
        ("unknown config key 'max_epoch'; did you mean 'max_epochs'? (known keys: ", "+max_epoch=1)"),
    ),
    "misspelt nested key": Case(
        ("train", "extractor.args.archh=resnet18"),
        (
            "unknown config key 'extractor.args.archh'; did you mean 'extractor.args.arch'? (known keys under "
            "'extractor.args': arch, gem_p, normalise_features, remove_fc, weights; "
            "to add a new key: +extractor.args.archh=resnet18)",
        ),
    ),
    "misspelt key of a missing level": Case(
        ("validate", "extractor.argz.weights=x"),
        ("unknown config key 'extractor.argz'; did you mean 'extractor.args'?", "+extractor.argz.weights=x)"),
    ),
    "misspelt key of a replaced component": Case(
        ("train", "loss@criterion=arcface", "criterion.args.mm=0.3"),
        (
            "unknown config key 'criterion.args.mm'; did you mean 'criterion.args.m'?",
            "+criterion.args.mm=0.3)",
        ),
    ),
    "bad override syntax": Case(
        ("train", "max_epochs=[1,"),
        ("bad override 'max_epochs=[1,': ", "override_grammar"),
    ),
    "unknown option": Case(
        ("train", "loss@criterion=arcfase"),
        ("no config 'loss/arcfase' in the config group 'loss'; did you mean 'arcface'?",),
    ),
    "broken yaml": Case(
        ("train", "--config-path", "{tmp}/configs", "--config-name", "broken"),
        (
            "cannot parse the config file '{tmp}/configs/broken.yaml': line 4, column 1: expected ',' or ']'",
            "line 3, column 7",
        ),
    ),
    "misspelt config name": Case(
        ("train", "--config-path", "{tmp}/configs", "--config-name", "brokn"),
        ("no config 'brokn' in '{tmp}/configs'; did you mean 'broken'?",),
    ),
    "unwritable mock dataset dir": Case(
        ("mock-dataset", "/proc/forbidden/x"),
        (
            "cannot write the mock dataset to '/proc/forbidden/x': No such file or directory: '/proc/forbidden'",
        ),
    ),
    "mock dataset dir is a file": Case(
        ("mock-dataset", "{tmp}/configs/broken.yaml"),
        ("'{tmp}/configs/broken.yaml' exists and is not a directory",),
    ),
    "unwritable cache dir": Case(
        ("train",),
        ("cannot write the mock dataset to '/proc/forbidden/mock_figures_v2_seed0': ", "'/proc/forbidden'"),
        env={"OML_CACHE_DIR": "/proc/forbidden"},
    ),
}


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    """The test's folder, with ``configs/broken.yaml`` (:data:`BROKEN_YAML`)."""
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "broken.yaml").write_text(BROKEN_YAML)
    return tmp_path


def _error_line(stderr: str, command: str) -> str:
    """The one line of ``stderr`` that says what went wrong (warnings aside); fails on a traceback."""
    assert "Traceback" not in stderr, stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith(f"oml {command}: ")]
    return line


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_user_error_is_one_line_with_the_hint_and_nothing_is_written(run_oml, workspace, case):
    result = run_oml(*case.argv(workspace), env=case.env)
    assert result.returncode == 2, result.stderr[-3000:]
    line = _error_line(result.stderr, case.args[0])
    assert line.startswith(f"oml {case.args[0]}: error: ")
    for fragment in case.fragments:
        assert fragment.format(tmp=workspace) in line
    assert not (workspace / "logs").exists()  # failed fast: no run directory


@pytest.mark.parametrize(
    "args, env",
    [
        (["train", "max_epoch=1"], {"OML_TRACEBACK": "1"}),
        (["train", "max_epoch=1", "--traceback"], {}),
        (["--traceback", "train", "max_epoch=1"], {}),
    ],
    ids=["OML_TRACEBACK=1", "--traceback after the command", "--traceback before the command"],
)
def test_the_traceback_is_shown_when_asked_for(run_oml, tmp_path, args, env):
    result = run_oml(*args, f"logs_root={tmp_path}", env=env)
    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert "ConfigError: unknown config key 'max_epoch'" in result.stderr


def test_a_closed_stdout_ends_quietly():
    """``oml registry loss --format json | head -1``: the reader has gone before oml writes."""
    process = subprocess.Popen(
        [sys.executable, "-m", "oml_core.cli", "registry", "loss", "--format", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    process.stdout.close()
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 1
    assert stderr == ""


def _raising(error: BaseException) -> Callable[..., int]:
    """A command handler that raises ``error``."""

    def handler(*_: object) -> int:
        raise error

    return handler


def _user_errors() -> dict[str, tuple[BaseException, str]]:
    """``{id: (error, the line's text after "oml registry: error: ")}`` of the errors a user can fix."""
    from oml_core.datasets.dataframe_format import DataFrameFormatError
    from oml_core.utils.checkpoints import CheckpointError

    return {
        "permission": (
            PermissionError(errno.EACCES, "Permission denied", "/data/x"),
            "Permission denied: '/data/x'",
        ),
        "no such file": (
            FileNotFoundError("Checkpoint file not found: '/c.ckpt'"),
            "Checkpoint file not found: '/c.ckpt'",
        ),
        "not a directory": (
            NotADirectoryError(errno.ENOTDIR, "Not a directory", "/data/f.csv"),
            "Not a directory: '/data/f.csv'",
        ),
        "is a directory": (
            IsADirectoryError(errno.EISDIR, "Is a directory", "/data"),
            "Is a directory: '/data'",
        ),
        "disk full": (
            OSError(errno.ENOSPC, "No space left on device", "/logs/x"),
            "No space left on device: '/logs/x'",
        ),
        "file-size limit": (OSError(errno.EFBIG, "File too large", "/logs/x"), "File too large: '/logs/x'"),
        "read-only": (OSError(errno.EROFS, "Read-only file system", "/ro"), "Read-only file system: '/ro'"),
        "config": (ConfigError("bad\nkey"), "bad key"),
        "checkpoint": (
            CheckpointError("The checkpoint '/c.ckpt' holds a list"),
            "The checkpoint '/c.ckpt' holds a list",
        ),
        "dataframe": (DataFrameFormatError("df.csv: rows 3: no label"), "df.csv: rows 3: no label"),
    }


@pytest.mark.parametrize("name", list(_user_errors()))
def test_user_errors_exit_2_with_one_line(monkeypatch, capsys, name):
    error, text = _user_errors()[name]
    monkeypatch.delenv("OML_TRACEBACK", raising=False)
    monkeypatch.setattr(registry_command, "run", _raising(error))
    assert main(["registry"]) == 2
    assert capsys.readouterr().err == f"oml registry: error: {text}\n"


@pytest.mark.parametrize(
    "error, line",
    [
        (
            RuntimeError("a bug\nin two lines"),
            "oml registry: internal error: RuntimeError: a bug in two lines "
            "(run with OML_TRACEBACK=1 for the traceback)",
        ),
        (
            ConnectionResetError(),
            "oml registry: internal error: ConnectionResetError (run with OML_TRACEBACK=1 for the traceback)",
        ),
    ],
    ids=["bug", "no message"],
)
def test_a_bug_exits_1_with_one_internal_error_line(monkeypatch, capsys, error, line):
    monkeypatch.delenv("OML_TRACEBACK", raising=False)
    monkeypatch.setattr(registry_command, "run", _raising(error))
    assert main(["registry"]) == 1
    assert capsys.readouterr().err == f"{line}\n"


def test_ctrl_c_exits_130_with_one_line(monkeypatch, capsys):
    monkeypatch.delenv("OML_TRACEBACK", raising=False)
    monkeypatch.setattr(registry_command, "run", _raising(KeyboardInterrupt()))
    assert main(["registry"]) == 130
    assert capsys.readouterr().err == "oml registry: interrupted\n"


@pytest.mark.parametrize("argv", [["--traceback", "registry"], ["registry", "--traceback"], ["registry"]])
def test_the_traceback_flag_or_variable_reraises(monkeypatch, argv):
    if argv == ["registry"]:
        monkeypatch.setenv("OML_TRACEBACK", "1")
    else:
        monkeypatch.delenv("OML_TRACEBACK", raising=False)
    monkeypatch.setattr(registry_command, "run", _raising(ConfigError("bad key")))
    with pytest.raises(ConfigError, match="bad key"):
        main(argv)


def test_a_stopped_run_names_the_command_that_resumes_it(monkeypatch, capsys):
    monkeypatch.delenv("OML_TRACEBACK", raising=False)
    stopped = stops.TrainingInterrupted(signal.SIGTERM, Path("/runs/a b/last.ckpt"), epoch=1, step=9)
    monkeypatch.setattr(pipeline_commands, "run", _raising(stopped))
    assert main(["train", "--config-name", "tiny", "max_epochs=3", "resume=/old/last.ckpt"]) == 143
    assert capsys.readouterr().err == (
        "oml train: SIGTERM received: stopped after step 9 (epoch 1); to go on: "
        "oml train --config-name tiny max_epochs=3 'resume=/runs/a b/last.ckpt'\n"
    )


def test_a_diverged_run_names_its_last_good_checkpoint_not_a_resume_command(monkeypatch, capsys):
    monkeypatch.delenv("OML_TRACEBACK", raising=False)
    stopped = stops.NonFiniteLossError(
        "at step 5 (epoch 0, batch 5) the loss is nan", Path("/runs/last.ckpt")
    )
    monkeypatch.setattr(pipeline_commands, "run", _raising(stopped))
    assert main(["train", "optimizer.args.lr=1e30"]) == 1
    assert capsys.readouterr().err == (
        "oml train: at step 5 (epoch 0, batch 5) the loss is nan; last good checkpoint: /runs/last.ckpt\n"
    )


def test_a_full_disk_while_generating_names_the_mock_dataset_dir(monkeypatch, tmp_path, capsys):
    def no_space(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(mock.Image.Image, "save", no_space)
    with pytest.raises(
        OSError, match="cannot write the mock dataset to .*: No space left on device"
    ) as error:
        generate_mock_dataset(tmp_path / "a")
    assert error.value.errno == errno.ENOSPC

    assert main(["mock-dataset", str(tmp_path / "b")]) == 2
    expected = f"cannot write the mock dataset to '{tmp_path / 'b'}': No space left on device"
    assert capsys.readouterr().err == f"oml mock-dataset: error: {expected}\n"
