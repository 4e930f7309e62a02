"""``oml_register_callbacks``: a plugin's Lightning callback, named in the config key ``callbacks``, is called
during ``oml train``, its state goes into the checkpoints and back into a resumed run; a bad ``callbacks`` entry
is one line before any work.

A real plugin distribution (:func:`tests.scripts.fake_plugins.fake_distribution`), ``epoch_logger``, registers
``epoch_log`` (writes the epochs it saw, its arguments and the Trainer's ``max_epochs`` to a json file after
every training epoch; the epochs are its state) and ``not_a_callback`` (builds a plain object).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from oml_core.cli import main
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.registry import InterfaceError, Registry
from tests.scripts.fake_plugins import fake_distribution, install_lightning_plugin

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from tiny_training import tiny_config  # noqa: E402

EPOCH_LOGGER = """\
import json

import pytorch_lightning as pl

from oml_core import hookimpl


class EpochLog(pl.Callback):
    def __init__(self, path: str, tag: str = "seen") -> None:
        self.path, self.tag = path, tag
        self.epochs = []

    def on_train_epoch_end(self, trainer, pl_module):
        self.epochs.append(trainer.current_epoch)
        with open(self.path, "w") as f:
            json.dump({"tag": self.tag, "epochs": self.epochs, "max_epochs": trainer.max_epochs}, f)

    def state_dict(self):
        return {"epochs": list(self.epochs)}

    def load_state_dict(self, state_dict):
        self.epochs = list(state_dict["epochs"])


def not_a_callback():
    return object()


@hookimpl
def oml_register_callbacks(register):
    register("epoch_log", EpochLog, description="the epochs it saw, to a json file")
    register("not_a_callback", not_a_callback)
"""
USAGE = 2


@pytest.fixture(scope="module")
def epoch_logger_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the distribution of ``epoch_logger``, made once: its files unchanged, the commands' plugin
    vetting checks it once (its verdict holds for its fingerprint) instead of once per test."""
    site = tmp_path_factory.mktemp("epoch_logger_site")
    fake_distribution(site, "epoch-logger-plugin", "epoch_logger", "epoch_logger_cb", EPOCH_LOGGER)
    return site


@pytest.fixture()
def installed(monkeypatch: pytest.MonkeyPatch, epoch_logger_site: Path) -> Path:
    """The plugin ``epoch_logger`` installed in this process (with every other plugin); returns its folder."""
    site = epoch_logger_site
    install_lightning_plugin(monkeypatch, site)
    return site


def tiny_run(folder: Path, oml_cache_dir: Path, **overrides) -> list[str]:
    """The arguments of ``oml train`` that run the tiny config (:func:`tiny_config`) with ``overrides``, written
    to ``folder/tiny.yaml``."""
    cfg = tiny_config(folder / "logs", dataset_root=str(get_mock_dataset_root(oml_cache_dir)), **overrides)
    (folder / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    return ["train", "--config-path", str(folder), "--config-name", "tiny"]


@pytest.mark.slow
def test_the_callback_is_called_during_oml_train_and_a_resumed_run_gets_its_state(
    installed, tmp_path, oml_cache_dir, run_oml
):
    log = tmp_path / "epochs.json"
    callbacks = [{"name": "epoch_log", "args": {"path": str(log), "tag": "tiny"}}]
    argv = tiny_run(tmp_path, oml_cache_dir, max_epochs=1, callbacks=callbacks)
    done = run_oml(*argv, env={"PYTHONPATH": str(installed)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(log.read_text()) == {"tag": "tiny", "epochs": [0], "max_epochs": 1}

    # the same callbacks, one more epoch: the state of the first run's callback comes back from last.ckpt
    (last,) = (tmp_path / "logs").glob("*/checkpoints/last.ckpt")
    assert main([*argv, f"+resume={last}", "max_epochs=2"]) == 0
    assert json.loads(log.read_text()) == {"tag": "tiny", "epochs": [0, 1], "max_epochs": 2}


@pytest.mark.parametrize(
    "callbacks, line",
    [
        (
            [{"name": "epoch_lgo"}],
            "oml train: error: Unknown callback 'epoch_lgo'. Did you mean: epoch_log? Known callback names: "
            "epoch_log, not_a_callback. Run `oml plugins` to see the installed plugins and what they provide.",
        ),
        (
            [{"name": "epoch_log", "args": {"path": "x.json", "tag": 3}}],
            "oml train: error: callbacks[0].args.tag: expected str, got 3",
        ),
        (
            {"name": "epoch_log"},
            "oml train: error: callbacks: expected a list of {name, args} specs of callbacks, got "
            "{'name': 'epoch_log'}",
        ),
    ],
    ids=["unknown name", "argument type", "not a list"],
)
def test_a_bad_callbacks_entry_is_one_line_before_any_work(
    installed, tmp_path, oml_cache_dir, capsys, callbacks, line
):
    assert main(tiny_run(tmp_path, oml_cache_dir, callbacks=callbacks)) == USAGE
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == line
    assert "Traceback" not in captured.err
    assert not (tmp_path / "logs").exists()


def test_a_callback_that_builds_no_lightning_callback_is_named_with_its_plugin(installed):
    with pytest.raises(InterfaceError) as raised:
        Registry().build("callback", {"name": "not_a_callback"})
    assert str(raised.value) == (
        "callback 'not_a_callback' from epoch_logger (epoch-logger-plugin 0.3) built a object, which does not "
        "implement pytorch_lightning.callbacks.callback.Callback"
    )
