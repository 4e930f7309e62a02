"""Real kills of ``oml train`` in a subprocess: SIGKILL in the middle of an epoch (after an epoch ended), and
SIGINT / SIGTERM; the run resumed from its ``last.ckpt`` ends with the weights and optimizer state of the
uninterrupted run, bitwise.

The run is the tiny config (``tests/scripts/tiny_training.py``) with 8 steps an epoch (a balance sampler of
2 labels x 4 instances over the 16 train labels) and a step checkpoint after every step, so that a kill
lands between two step checkpoints of an epoch.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from tiny_training import tiny_config  # noqa: E402

pytestmark = pytest.mark.slow

STEPS_PER_EPOCH = 8
MAX_EPOCHS = 3
OML = [sys.executable, "-m", "oml_core.cli"]


def write_config(folder: Path, logs_root: Path) -> Path:
    """The tiny config as a yaml file of ``oml train --config-path folder --config-name tiny``."""
    cfg = tiny_config(
        logs_root,
        max_epochs=MAX_EPOCHS,
        sampler={"name": "balance", "args": {"n_labels": 2, "n_instances": 4}},
        checkpoint_every_n_steps=1,
        logs_folder=None,  # keys the command line sets
        resume=None,
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    return folder


def oml_train(config_dir: Path, *overrides: str) -> list[str]:
    return [*OML, "train", "--config-path", str(config_dir), "--config-name", "tiny", *overrides]


@pytest.fixture(scope="module")
def env(oml_cache_dir: Path) -> dict[str, str]:
    return {**os.environ, "OML_CACHE_DIR": str(oml_cache_dir), "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kill")


@pytest.fixture(scope="module")
def straight(workspace: Path, env: dict[str, str]) -> dict:
    """The last checkpoint of the uninterrupted run."""
    config_dir = write_config(workspace / "configs", workspace / "logs")
    done = subprocess.run(
        oml_train(config_dir, "logs_folder=straight"), env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(workspace / "logs" / "straight" / "checkpoints" / "last.ckpt", weights_only=False)


def start_and_wait_for_saves(
    command: list[str], env: dict[str, str], last: Path, saves: int
) -> subprocess.Popen:
    """Start ``command`` and return once ``last`` was replaced ``saves`` times (every atomic save is a new
    file, so a new inode), the process still running."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[int] = []
    deadline = time.monotonic() + 300
    while len(seen) < saves:
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the run wrote no checkpoints"
        try:
            inode = last.stat().st_ino
        except FileNotFoundError:
            inode = None
        if inode is not None and (not seen or seen[-1] != inode):
            seen.append(inode)
        time.sleep(0.001)
    return process


def assert_same_training_state(got: dict, expected: dict) -> None:
    assert (got["epoch"], got["global_step"]) == (expected["epoch"], expected["global_step"])
    assert got["state_dict"].keys() == expected["state_dict"].keys()
    for key, value in expected["state_dict"].items():
        assert torch.equal(got["state_dict"][key], value), key
    got_optimizer, expected_optimizer = got["optimizer_states"][0], expected["optimizer_states"][0]
    assert got_optimizer["param_groups"] == expected_optimizer["param_groups"]
    assert got_optimizer["state"].keys() == expected_optimizer["state"].keys()
    for index, state in expected_optimizer["state"].items():
        for name, value in state.items():
            assert torch.equal(torch.as_tensor(got_optimizer["state"][index][name]), torch.as_tensor(value))


def test_sigkill_in_the_middle_of_an_epoch_then_resume_gives_the_uninterrupted_weights(
    workspace, env, straight
):
    config_dir = workspace / "configs"
    last = workspace / "logs" / "killed" / "checkpoints" / "last.ckpt"
    # epoch 0 saves after steps 1..7 and at its end (8 saves); 3 more: after step 3 of epoch 1
    process = start_and_wait_for_saves(oml_train(config_dir, "logs_folder=killed"), env, last, 11)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL

    at_kill = torch.load(last, weights_only=False)  # whole: written atomically
    assert at_kill["epoch"] == 1 and STEPS_PER_EPOCH < at_kill["global_step"] < 2 * STEPS_PER_EPOCH
    assert "oml_mid_epoch_loader" in at_kill
    assert [p.name for p in last.parent.iterdir() if p.name.startswith(".tmp-")] in (
        [],
        [f".tmp-last.ckpt.{process.pid}"],
    )

    resumed = subprocess.run(
        oml_train(config_dir, "logs_folder=resumed", f"resume={last}"),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final = torch.load(workspace / "logs" / "resumed" / "checkpoints" / "last.ckpt", weights_only=False)
    assert final["global_step"] == MAX_EPOCHS * STEPS_PER_EPOCH
    assert_same_training_state(final, straight)


@pytest.mark.parametrize(
    ("signum", "exit_code", "resume"), [(signal.SIGINT, 130, True), (signal.SIGTERM, 143, False)]
)
def test_an_interrupt_saves_the_step_prints_the_resume_command_and_the_resumed_run_ends_the_same(
    workspace, env, straight, signum, exit_code, resume
):
    """(The resumed run of SIGTERM is that of SIGINT: its checkpoint is the same kind, it is not run again.)"""
    config_dir = workspace / "configs"
    folder = f"interrupted_{signum}"
    last = workspace / "logs" / folder / "checkpoints" / "last.ckpt"
    process = start_and_wait_for_saves(oml_train(config_dir, f"logs_folder={folder}"), env, last, 10)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == exit_code, stderr[-3000:]
    assert "Traceback" not in stderr
    command_line = [line for line in stderr.splitlines() if "resume=" in line]
    assert len(command_line) == 1, stderr[-3000:]
    command = re.search(r"to go on: (oml train .*)$", command_line[0])
    assert command is not None, command_line[0]
    expected = f"oml train --config-path {config_dir} --config-name tiny logs_folder={folder} resume={last}"
    assert command.group(1) == expected
    at_stop = torch.load(last, weights_only=False)
    assert at_stop["epoch"] == 1 and STEPS_PER_EPOCH < at_stop["global_step"] < 2 * STEPS_PER_EPOCH
    assert "oml_mid_epoch_loader" in at_stop
    if not resume:
        return

    resumed = subprocess.run(  # the printed command, as printed: a new run directory, <folder>_1
        [*OML, *shlex.split(command.group(1))[1:]], env=env, capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    final = torch.load(workspace / "logs" / f"{folder}_1" / "checkpoints" / "last.ckpt", weights_only=False)
    assert_same_training_state(final, straight)
