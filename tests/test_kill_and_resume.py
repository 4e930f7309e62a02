"""Real kills of training runs in a process of their own (``oml train`` or the tiny script forked by the fork
server of :mod:`tests.scripts.oml_forkserver`, as a new interpreter would run it), then resumed from ``last.ckpt``
in the run's own folder: the resumed run ends with the weights and optimizer state of the uninterrupted run,
bitwise, its ``best.ckpt`` holds the uninterrupted run's best epoch and its report names that epoch.

The run is the tiny config (``tests/scripts/tiny_training.py``) with 8 steps an epoch (a balance sampler of
2 labels x 4 instances over the 16 train labels), 3 epochs.

- Through ``oml train``: SIGKILL in the middle of an epoch (after an epoch ended), SIGINT / SIGTERM, with a step
  checkpoint after every step, so that a kill lands between two step checkpoints of an epoch (the moment is
  chosen by watching ``last.ckpt`` being replaced).
- At a precise moment (the tiny script, whose loss sends its own process the signal at a chosen step): SIGINT
  and SIGTERM in the last step of an epoch (an interrupt as the epoch ends: ``best.ckpt`` then ``last.ckpt``);
  SIGKILL right after an epoch's ``best.ckpt``, while ``last.ckpt`` is older (it is written on a time cadence);
  SIGKILL, SIGTERM and SIGINT in the middle of the last epoch of a run that validates only after its last
  epoch (its final validation must run when resumed).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from oml_core.lightning.pipelines.train import extractor_training_pipeline
from oml_core.registry import Registry
from oml_core.reports.pipelines import training_report
from tests.scripts.oml_forkserver import ForkedRun, OmlForkServer

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from tiny_training import SIGNAL_AT_ENV, SIGNALLING_LOSS, SignallingPlugin, tiny_config  # noqa: E402

pytestmark = pytest.mark.slow

STEPS_PER_EPOCH = 8
MAX_EPOCHS = 3
TINY_SCRIPT = Path(__file__).parent / "scripts" / "tiny_training.py"
#: ``checkpoint_every_seconds`` that never comes within these runs: last.ckpt at the end and on an interrupt only.
NEVER = 1e6


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
    """The arguments of ``oml train`` with the tiny config of ``config_dir`` and ``overrides``."""
    return ["train", "--config-path", str(config_dir), "--config-name", "tiny", *overrides]


@pytest.fixture(scope="module")
def env(oml_cache_dir: Path) -> dict[str, str]:
    return {**os.environ, "OML_CACHE_DIR": str(oml_cache_dir), "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kill")


@pytest.fixture(scope="module")
def straight(workspace: Path, env: dict[str, str], oml_fork_server: OmlForkServer) -> dict:
    """The last checkpoint of the uninterrupted run."""
    config_dir = write_config(workspace / "configs", workspace / "logs")
    done = oml_fork_server.run(oml_train(config_dir, "logs_folder=straight"), env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(workspace / "logs" / "straight" / "checkpoints" / "last.ckpt", weights_only=False)


def start_and_wait_for_saves(
    server: OmlForkServer, argv: list[str], env: dict[str, str], last: Path, saves: int
) -> ForkedRun:
    """Start ``oml ARGV`` (a process of its own, forked by ``server``) and return once ``last`` was replaced
    ``saves`` times (every atomic save is a new file, so a new inode), the process still running."""
    process = server.start(argv, env)
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
    workspace, env, straight, oml_fork_server
):
    config_dir = workspace / "configs"
    last = workspace / "logs" / "killed" / "checkpoints" / "last.ckpt"
    # epoch 0 saves after steps 1..7 and at its end (8 saves); 3 more: after step 3 of epoch 1
    process = start_and_wait_for_saves(
        oml_fork_server, oml_train(config_dir, "logs_folder=killed"), env, last, 11
    )
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

    resumed = oml_fork_server.run(  # logs_folder=resumed is not used: the run goes on in its own folder
        oml_train(config_dir, "logs_folder=resumed", f"resume={last}"), env, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not (workspace / "logs" / "resumed").exists()
    final = torch.load(last, weights_only=False)
    assert final["global_step"] == MAX_EPOCHS * STEPS_PER_EPOCH
    assert_same_training_state(final, straight)


@pytest.mark.parametrize(
    ("signum", "exit_code", "resume"), [(signal.SIGINT, 130, True), (signal.SIGTERM, 143, False)]
)
def test_an_interrupt_saves_the_step_prints_the_resume_command_and_the_resumed_run_ends_the_same(
    workspace, env, straight, oml_fork_server, signum, exit_code, resume
):
    """(The resumed run of SIGTERM is that of SIGINT: its checkpoint is the same kind, it is not run again.)"""
    config_dir = workspace / "configs"
    folder = f"interrupted_{signum}"
    last = workspace / "logs" / folder / "checkpoints" / "last.ckpt"
    process = start_and_wait_for_saves(
        oml_fork_server, oml_train(config_dir, f"logs_folder={folder}"), env, last, 10
    )
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

    resumed = oml_fork_server.run(  # the printed command, as printed: the run goes on in its own folder
        shlex.split(command.group(1))[1:], env, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not (workspace / "logs" / f"{folder}_1").exists()
    assert_same_training_state(torch.load(last, weights_only=False), straight)


# ------------------------------------------------------------------------- signals at a precise moment
def signalled_config(folder: Path, name: str, **overrides: object) -> Path:
    """The tiny config with the loss that signals (:data:`SIGNALLING_LOSS`), as a yaml file of the tiny script
    that writes into ``folder/logs/<name>``."""
    cfg = tiny_config(
        folder / "logs",
        max_epochs=MAX_EPOCHS,
        sampler={"name": "balance", "args": {"n_labels": 2, "n_instances": 4}},
        criterion={"name": SIGNALLING_LOSS, "args": {"in_features": 16, "num_classes": 16, "s": 8.0}},
        logs_folder=name,
        **overrides,
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def killed_run(
    server: OmlForkServer, config: Path, env: dict[str, str], step: int, signum: signal.Signals
) -> tuple[int, str]:
    """Run the tiny script on ``config`` (a process of its own, forked by ``server``) with ``signum`` sent at
    training step ``step``; its exit status and stderr."""
    done = server.run(
        [str(config)], {**env, SIGNAL_AT_ENV: f"{step}:{signum.name}"}, script=TINY_SCRIPT, timeout=600
    )
    return done.returncode, done.stderr


def resume_in_process(
    config: Path, checkpoint: Path, monkeypatch: pytest.MonkeyPatch, oml_cache_dir: Path
) -> object:
    """Resume ``config`` from ``checkpoint`` in this process (no signal: the variable is unset)."""
    monkeypatch.delenv(SIGNAL_AT_ENV, raising=False)
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    cfg = {**yaml.safe_load(config.read_text()), "resume": str(checkpoint)}
    return extractor_training_pipeline(cfg, registry=Registry([SignallingPlugin()]))


def best_state(checkpoint: dict) -> dict:
    """The BestCheckpoint state recorded in a checkpoint."""
    (state,) = [v for k, v in checkpoint["callbacks"].items() if k.startswith("BestCheckpoint")]
    return state


@pytest.fixture(scope="module")
def uninterrupted(workspace: Path, oml_cache_dir: Path) -> dict[int, object]:
    """The uninterrupted runs of the signalling config, by ``valid_period`` (1: every epoch validates; 4: only
    the last epoch, after which the run validates whatever the period)."""
    results = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(SIGNAL_AT_ENV, raising=False)
        patch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
        for period in (1, 4):
            config = signalled_config(workspace, f"uninterrupted_{period}", valid_period=period)
            cfg = yaml.safe_load(config.read_text())
            results[period] = extractor_training_pipeline(cfg, registry=Registry([SignallingPlugin()]))
    return results


def assert_resumed_as_uninterrupted(resumed, expected, run_dir: Path, out: str) -> None:
    """The resumed run wrote into ``run_dir``, its last and best checkpoints are the uninterrupted run's (the
    same epoch, the same weights), its report names the best epoch, and the pipeline printed no report
    (``out``)."""
    assert resumed.run_dir == run_dir and sorted(p.name for p in run_dir.parent.iterdir()) == [run_dir.name]
    assert resumed.log_dir == run_dir / "version_0"
    assert_same_training_state(
        torch.load(resumed.last_checkpoint, weights_only=True),
        torch.load(expected.last_checkpoint, weights_only=True),
    )
    got_best = torch.load(resumed.best_checkpoint, weights_only=True)
    expected_best = torch.load(expected.best_checkpoint, weights_only=True)
    assert_same_training_state(got_best, expected_best)
    assert resumed.best_epoch == expected.best_epoch == expected_best["epoch"] + 1
    assert best_state(got_best)["best_epoch"] == expected.best_epoch
    assert resumed.best_metrics == expected.best_metrics
    report = training_report(resumed)  # what `oml train` prints; the pipeline itself reports nothing
    assert (
        f"Best checkpoint:  {run_dir / 'checkpoints' / 'best.ckpt'} (epoch {expected.best_epoch})\n" in report
    )
    assert "Best checkpoint:" not in out


@pytest.mark.parametrize(("signum", "exit_code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_as_an_epoch_ends_writes_best_then_last_and_resumes_to_the_uninterrupted_run(
    workspace, env, oml_cache_dir, uninterrupted, monkeypatch, capsys, signum, exit_code, oml_fork_server
):
    """The signal lands in the last step of epoch 2: the run validates, writes best.ckpt when the epoch is its
    best, then last.ckpt (recording that best), and stops. last.ckpt is written on the interrupt only (its
    time cadence never comes)."""
    folder = workspace / f"epoch_end_{signum.name}"
    config = signalled_config(folder, "run", checkpoint_every_seconds=NEVER)
    status, stderr = killed_run(oml_fork_server, config, env, 2 * STEPS_PER_EPOCH, signum)
    assert status == exit_code, stderr[-3000:]
    checkpoints = folder / "logs" / "run" / "checkpoints"
    last = torch.load(checkpoints / "last.ckpt", weights_only=True)
    best = torch.load(checkpoints / "best.ckpt", weights_only=True)
    assert last["global_step"] == 2 * STEPS_PER_EPOCH and "oml_mid_epoch_loader" not in last
    assert last["oml_run"]["epochs_done"] == 2
    assert best_state(last)["best_model_path"] == str(checkpoints / "best.ckpt")
    assert float(best_state(last)["best_model_score"]) == float(best_state(best)["best_model_score"])
    assert best_state(last)["best_epoch"] == best_state(best)["best_epoch"] == best["epoch"] + 1
    so_far = {e: m["OVERALL/cmc/1"] for e, m in uninterrupted[1].epochs.items() if 1 <= e <= 2}
    assert best_state(last)["best_epoch"] == max(so_far, key=lambda e: (so_far[e], -e))  # first of equals

    resumed = resume_in_process(config, checkpoints / "last.ckpt", monkeypatch, oml_cache_dir)
    assert_resumed_as_uninterrupted(
        resumed, uninterrupted[1], folder / "logs" / "run", capsys.readouterr().out
    )


def test_a_sigkill_after_a_new_best_but_before_last_ckpt_resumes_to_the_uninterrupted_best(
    workspace, env, oml_cache_dir, uninterrupted, monkeypatch, capsys, oml_fork_server
):
    """SIGKILL at the first step of epoch 2: best.ckpt of epoch 1 is on disk, last.ckpt is the step checkpoint
    of step 6 (its time cadence never comes). The resumed run takes the best state recorded in best.ckpt, which
    is newer than last.ckpt."""
    folder = workspace / "kill_after_best"
    config = signalled_config(folder, "run", checkpoint_every_seconds=NEVER, checkpoint_every_n_steps=3)
    status, stderr = killed_run(oml_fork_server, config, env, STEPS_PER_EPOCH + 1, signal.SIGKILL)
    assert status == -signal.SIGKILL, stderr[-3000:]
    checkpoints = folder / "logs" / "run" / "checkpoints"
    last = torch.load(checkpoints / "last.ckpt", weights_only=True)
    best = torch.load(checkpoints / "best.ckpt", weights_only=True)
    assert (last["global_step"], best["global_step"]) == (6, STEPS_PER_EPOCH)
    assert best_state(last)["best_model_score"] is None  # last.ckpt knows no best yet

    resumed = resume_in_process(config, checkpoints / "last.ckpt", monkeypatch, oml_cache_dir)
    assert_resumed_as_uninterrupted(
        resumed, uninterrupted[1], folder / "logs" / "run", capsys.readouterr().out
    )


@pytest.mark.parametrize(
    ("signum", "exit_code", "saved_step"),
    [(signal.SIGKILL, -signal.SIGKILL, 19), (signal.SIGTERM, 143, 20), (signal.SIGINT, 130, 20)],
)
def test_a_run_stopped_in_its_last_epoch_runs_its_final_validation_when_resumed(
    workspace,
    env,
    oml_cache_dir,
    uninterrupted,
    monkeypatch,
    capsys,
    signum,
    exit_code,
    saved_step,
    oml_fork_server,
):
    """``valid_period=4`` > ``max_epochs``: only the last epoch validates. Stopped at step 20 (the middle of the
    last epoch; SIGKILL leaves the step checkpoint of step 19, the third of that epoch), the resumed run goes on
    in the middle of that epoch, validates it and writes best.ckpt."""
    folder = workspace / f"last_epoch_{signum.name}"
    config = signalled_config(
        folder, "run", valid_period=4, checkpoint_every_seconds=NEVER, checkpoint_every_n_steps=3
    )
    status, stderr = killed_run(oml_fork_server, config, env, 2 * STEPS_PER_EPOCH + 4, signum)
    assert status == exit_code, stderr[-3000:]
    checkpoints = folder / "logs" / "run" / "checkpoints"
    last = torch.load(checkpoints / "last.ckpt", weights_only=True)
    assert last["global_step"] == saved_step and "oml_mid_epoch_loader" in last
    assert not (checkpoints / "best.ckpt").exists()

    resumed = resume_in_process(config, checkpoints / "last.ckpt", monkeypatch, oml_cache_dir)
    assert sorted(resumed.epochs) == [0, MAX_EPOCHS]  # the start, then the final validation
    assert_resumed_as_uninterrupted(
        resumed, uninterrupted[4], folder / "logs" / "run", capsys.readouterr().out
    )
