"""A plugin's every-run callback that raises in a hook, or hangs there until one Ctrl-C, stops ``oml train`` with
one line naming it, its plugin and distribution, the hook and what went wrong; the state of the run at the failure
is saved first (``last.ckpt``) and the line gives the command that goes on from it with the callback switched off;
nothing the run wrote before is lost.

A real plugin distribution (:func:`tests.scripts.fake_plugins.fake_distribution`), ``faulty``, registers two
every-run callbacks that misbehave at the end of the second epoch: ``epoch_bomb`` raises, ``epoch_hang`` writes
``epoch_hang_entered`` in the working directory and sleeps forever. Each test switches the other one off.
"""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path

import pytest
import torch

from oml_core.cli import main
from tests.scripts.fake_plugins import fake_distribution, install_lightning_plugin
from tests.test_hook_every_run_callbacks import tiny_run

pytestmark = pytest.mark.slow

FAULTY_PLUGIN = """\
import time

import pytorch_lightning as pl

from oml_core import hookimpl
from oml_core.utils.lazy import Component, register_components

SECOND_EPOCH = 1


class EpochBomb(pl.Callback):
    def on_train_epoch_end(self, trainer, pl_module):
        if trainer.current_epoch == SECOND_EPOCH:
            raise RuntimeError("the epoch log is full")


class EpochHang(pl.Callback):
    def on_train_epoch_end(self, trainer, pl_module):
        if trainer.current_epoch == SECOND_EPOCH:
            open("epoch_hang_entered", "w").close()
            while True:
                time.sleep(1)


COMPONENTS = (
    Component("callback", "epoch_bomb", "faulty_cb:EpochBomb", "raises", every_run=True),
    Component("callback", "epoch_hang", "faulty_cb:EpochHang", "hangs", every_run=True),
)


@hookimpl
def oml_register_callbacks(register):
    register_components(register, COMPONENTS, "callback")
"""
#: The steps of an epoch of the tiny config (16 train labels, 6 a batch).
STEPS_PER_EPOCH = 2


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    """A folder with the distribution ``faulty-plugin`` installed (for ``sys.path`` or ``PYTHONPATH``)."""
    (tmp_path / "site").mkdir()
    return fake_distribution(tmp_path / "site", "faulty-plugin", "faulty", "faulty_cb", FAULTY_PLUGIN)


@pytest.fixture()
def work(tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The plugin ``faulty`` installed in this process (with every other plugin), the working directory a fresh
    folder, which it returns."""
    install_lightning_plugin(monkeypatch, site)
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def stopped_after_second_epoch(logs: Path) -> Path:
    """The run's ``last.ckpt``, checked to hold the end of the second epoch, next to the run's ``best.ckpt`` and
    its TensorBoard logs; returns it."""
    (last,) = logs.glob("*/checkpoints/last.ckpt")
    state = torch.load(last, weights_only=False)
    assert (state["epoch"], state["global_step"]) == (1, 2 * STEPS_PER_EPOCH)
    assert (last.parent / "best.ckpt").is_file()
    assert list(last.parent.parent.rglob("events.out.tfevents.*"))
    return last


def test_a_callback_that_raises_is_named_its_epoch_saved_and_the_printed_command_goes_on_without_it(
    work, oml_cache_dir, capsys
):
    argv = tiny_run(work, oml_cache_dir, max_epochs=3, callbacks_disabled=["epoch_hang"])
    assert main(argv) == 1
    last = stopped_after_second_epoch(work / "logs")
    command = (
        f"oml train --config-path {work} --config-name tiny 'callbacks_disabled=[epoch_hang,faulty:epoch_bomb]' "
        f"resume={last}"
    )
    assert capsys.readouterr().err == (
        "oml train: the callback 'faulty:epoch_bomb' of the plugin faulty (faulty-plugin 0.3) failed in "
        "on_train_epoch_end: RuntimeError: the epoch log is full; stopped after step 4 (epoch 1); to go on: "
        f"{command}\n"
    )

    assert main(shlex.split(command)[1:]) == 0  # as printed: the third epoch, in the run's own folder
    assert torch.load(last, weights_only=False)["global_step"] == 3 * STEPS_PER_EPOCH


def test_one_ctrl_c_stops_a_callback_that_hangs_naming_it_with_its_epoch_saved(
    work, site, oml_cache_dir, oml_fork_server
):
    argv = tiny_run(work, oml_cache_dir, max_epochs=3, callbacks_disabled=["epoch_bomb"])
    env = {**os.environ, "OML_CACHE_DIR": str(oml_cache_dir), "PYTHONPATH": str(site)}
    process = oml_fork_server.start(argv, env, cwd=work)
    deadline = time.monotonic() + 300
    while not (work / "epoch_hang_entered").exists():
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the callback was never entered"
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)  # a bound to fail the test by, not a timing assertion
    assert process.returncode == 130, err[-3000:]
    last = stopped_after_second_epoch(work / "logs")
    callback = "the callback 'faulty:epoch_hang' of the plugin faulty (faulty-plugin 0.3)"
    assert err.split("\n") == [
        "",
        f"SIGINT received in on_train_epoch_end of {callback}: the callback is stopped and switched off, the run "
        "stops (send it again to exit at once)",
        f"oml train: SIGINT received while {callback} was in on_train_epoch_end; stopped after step 4 (epoch 1); "
        f"to go on: oml train --config-path {work} --config-name tiny "
        f"'callbacks_disabled=[epoch_bomb,faulty:epoch_hang]' resume={last}",
        "",
    ]
