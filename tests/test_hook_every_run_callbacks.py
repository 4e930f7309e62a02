"""Every-run callbacks (``oml_register_callbacks`` with ``every_run=True``): added to every ``oml train`` (and
``oml train-postprocessor``) without the config naming them, once with the config's arguments where
``callbacks`` names them, not at all where ``callbacks_disabled`` lists them; their state goes into the
checkpoints and back into a resumed run; ``oml plugins`` and ``oml registry`` mark them; any other kind marked
every-run is refused at load.

A real plugin distribution (:func:`tests.scripts.fake_plugins.fake_distribution`), ``marks``, registers from its
``Component`` table ``epoch_marks`` and ``epoch_marks_too`` (every run; tags ``default`` and ``too``) and
``plain_marks`` (not every run). Each appends ``<tag> <epochs it saw>`` to ``<folder>/marks.txt`` (``folder``
defaults to ``every_run_marks`` in the working directory) at the end of every training epoch; the epochs are its
state, kept under ``state_key`` ``EpochMarks[<tag>]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import yaml

from oml_core import hookimpl
from oml_core.cli import main
from oml_core.config.callbacks import plugin_callback_specs
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.lightning.pipelines.train_postprocessor import postprocessor_training_pipeline
from oml_core.registry import ConfigError, PluginLoadError, PluginWarning, Registry
from oml_core.utils.lazy import Component, register_components
from tests.scripts.fake_plugins import fake_distribution, install_lightning_plugin
from tests.test_postprocessor_resume import tiny_postprocessor_config

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from tiny_training import tiny_config  # noqa: E402

MARKS_PLUGIN = """\
import os

import pytorch_lightning as pl

from oml_core import hookimpl
from oml_core.utils.lazy import Component, register_components


class EpochMarks(pl.Callback):
    def __init__(self, folder: str = "every_run_marks", tag: str = "default") -> None:
        self.folder, self.tag = folder, tag
        self.epochs = []

    @property
    def state_key(self):
        return f"EpochMarks[{self.tag}]"

    def on_train_epoch_end(self, trainer, pl_module):
        self.epochs.append(trainer.current_epoch)
        os.makedirs(self.folder, exist_ok=True)
        with open(os.path.join(self.folder, "marks.txt"), "a") as f:
            f.write(f"{self.tag} {self.epochs}\\n")

    def state_dict(self):
        return {"epochs": list(self.epochs)}

    def load_state_dict(self, state_dict):
        self.epochs = list(state_dict["epochs"])


def epoch_marks_too(folder: str = "every_run_marks", tag: str = "too") -> EpochMarks:
    return EpochMarks(folder, tag)


COMPONENTS = (
    Component("callback", "epoch_marks_too", "marks_cb:epoch_marks_too", "marks too", every_run=True),
    Component("callback", "epoch_marks", "marks_cb:EpochMarks", "the epochs it saw", every_run=True),
    Component("callback", "plain_marks", "marks_cb:EpochMarks", "the same, where a run names it"),
)


@hookimpl
def oml_register_callbacks(register):
    register_components(register, COMPONENTS, "callback")
"""

LOSS_EVERY_RUN_PLUGIN = """\
from oml_core import hookimpl
from oml_core.utils.lazy import Component, register_components

COMPONENTS = (Component("loss", "every_loss", "torch.nn:MSELoss", "a loss", every_run=True),)


@hookimpl
def oml_register_losses(register):
    register_components(register, COMPONENTS, "loss")
"""
USAGE = 2


@pytest.fixture(scope="module")
def marks_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of the distribution of ``marks``, made once: its files unchanged, the commands' plugin vetting
    checks it once (its verdict holds for its fingerprint) instead of once per test."""
    site = tmp_path_factory.mktemp("marks_site")
    fake_distribution(site, "marks-plugin", "marks", "marks_cb", MARKS_PLUGIN)
    return site


@pytest.fixture()
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marks_site: Path) -> Path:
    """The plugin ``marks`` installed in this process (with every other plugin), the working directory a fresh
    folder; returns that folder (where ``every_run_marks/marks.txt`` is written by default)."""
    install_lightning_plugin(monkeypatch, marks_site)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def tiny_run(folder: Path, oml_cache_dir: Path, **overrides) -> list[str]:
    """The arguments of ``oml train`` that run the tiny config (:func:`tiny_config`) with ``overrides``, written
    to ``folder/tiny.yaml``."""
    cfg = tiny_config(folder / "logs", dataset_root=str(get_mock_dataset_root(oml_cache_dir)), **overrides)
    (folder / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    return ["train", "--config-path", str(folder), "--config-name", "tiny"]


def marks(folder: Path) -> list[str]:
    return (folder / "marks.txt").read_text().splitlines()


@pytest.mark.slow
def test_plain_oml_train_calls_every_run_callbacks_and_a_resumed_run_gets_their_state(
    installed, oml_cache_dir
):
    argv = tiny_run(installed, oml_cache_dir, max_epochs=1)
    assert "callbacks" not in yaml.safe_load((installed / "tiny.yaml").read_text())
    assert main(argv) == 0
    # both every-run callbacks, with their default arguments, in the plugin's order by name; plain_marks not
    assert marks(installed / "every_run_marks") == ["default [0]", "too [0]"]
    (last,) = (installed / "logs").glob("*/checkpoints/last.ckpt")
    states = torch.load(last, weights_only=True)["callbacks"]
    assert states["EpochMarks[default]"] == {"epochs": [0]} and states["EpochMarks[too]"] == {"epochs": [0]}

    # one more epoch from last.ckpt: each callback goes on from its own state
    assert main([*argv, f"+resume={last}", "max_epochs=2"]) == 0
    assert marks(installed / "every_run_marks") == ["default [0]", "too [0]", "default [0, 1]", "too [0, 1]"]


@pytest.mark.slow
def test_a_named_every_run_callback_runs_once_with_its_arguments_and_a_disabled_one_not_at_all(
    installed, oml_cache_dir
):
    named = installed / "named"
    callbacks = [{"name": "epoch_marks", "args": {"folder": str(named), "tag": "named"}}]
    argv = tiny_run(
        installed, oml_cache_dir, max_epochs=1, callbacks=callbacks, callbacks_disabled=["epoch_marks_too"]
    )
    assert main(argv) == 0
    assert marks(named) == ["named [0]"]
    assert not (installed / "every_run_marks").exists()  # neither the default epoch_marks nor epoch_marks_too


@pytest.mark.slow
def test_train_postprocessor_calls_every_run_callbacks_too(installed, tmp_path):
    # the registry given to the pipeline loads the installed plugins (marks among them), as `oml` does
    postprocessor_training_pipeline(
        tiny_postprocessor_config(tmp_path / "logs", max_epochs=1), registry=Registry()
    )
    assert marks(installed / "every_run_marks") == ["default [0]", "too [0]"]


@pytest.mark.parametrize(
    "disabled, line",
    [
        (
            ["epoch_mraks"],
            "oml train: error: callbacks_disabled[0]: Unknown callback 'epoch_mraks'. Did you mean: epoch_marks, "
            "epoch_marks_too? Known callback names: epoch_marks, epoch_marks_too, plain_marks. Run `oml plugins` "
            "to see the installed plugins and what they provide.",
        ),
        (
            ["plain_marks"],
            "oml train: error: callbacks_disabled[0]: the callback 'plain_marks' is not added to every run, so "
            "there is nothing to switch off (the every-run callbacks: marks:epoch_marks, marks:epoch_marks_too); "
            "a callback that is not every-run runs only where callbacks names it",
        ),
        (
            ["epoch_marks_too", "marks:epoch_marks"],
            "oml train: error: callbacks_disabled[1]: the callback 'marks:epoch_marks' is named in callbacks[0] "
            "too; name it there or switch it off here, not both",
        ),
        (
            "epoch_marks",
            "oml train: error: callbacks_disabled: expected a list of strings, got 'epoch_marks'",
        ),
    ],
    ids=["unknown name", "not every-run", "named too", "not a list"],
)
def test_a_bad_callbacks_disabled_is_one_line_before_any_work(
    installed, oml_cache_dir, capsys, disabled, line
):
    argv = tiny_run(
        installed, oml_cache_dir, callbacks=[{"name": "epoch_marks"}], callbacks_disabled=disabled
    )
    assert main(argv) == USAGE
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == line
    assert "Traceback" not in captured.err
    assert not (installed / "logs").exists()


def test_oml_plugins_and_oml_registry_mark_every_run_callbacks(installed, capsys):
    assert main(["plugins", "--format", "json"]) == 0
    (row,) = [row for row in json.loads(capsys.readouterr().out) if row["name"] == "marks"]
    assert row["provides"] == {"callback": ["epoch_marks", "epoch_marks_too", "plain_marks"]}
    assert row["every_run"] == ["epoch_marks", "epoch_marks_too"]

    assert main(["plugins"]) == 0
    assert (
        "\n    callback         epoch_marks (every run), epoch_marks_too (every run), plain_marks\n"
        in capsys.readouterr().out
    )

    assert main(["registry", "callback"]) == 0
    out = capsys.readouterr().out
    assert f"\n    {'epoch_marks':<32} marks (every run) - the epochs it saw\n" in out
    assert f"\n    {'plain_marks':<32} marks - the same, where a run names it\n" in out

    assert main(["registry", "callback", "epoch_marks"]) == 0
    assert "\nevery run:   yes: added to every training run (callbacks_disabled switches it off)\n" in (
        capsys.readouterr().out
    )
    assert main(["registry", "callback", "plain_marks", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["every_run"] is False


def test_another_kind_marked_every_run_is_refused_at_load_naming_the_plugin_and_the_component(
    tmp_path, monkeypatch
):
    fake_distribution(
        tmp_path, "loss-every-run-plugin", "loss_every_run", "loss_every_run_mod", LOSS_EVERY_RUN_PLUGIN
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("OML_LOAD_PLUGINS", "loss_every_run")
    monkeypatch.delenv("OML_STRICT_PLUGINS", raising=False)
    refusal = (
        "oml plugin loss_every_run (loss-every-run-plugin 0.3): hook oml_register_losses failed: ValueError: loss "
        "'every_loss' of plugin loss_every_run (loss-every-run-plugin 0.3): only a callback can be added to every "
        "training run (every_run=True), not a loss"
    )
    with pytest.warns(PluginWarning) as caught:
        assert "every_loss" not in Registry().names("loss")
    assert [str(w.message) for w in caught] == [f"{refusal} (skipped; set OML_STRICT_PLUGINS=1 to raise)"]
    with pytest.raises(PluginLoadError) as raised:
        Registry(strict=True).names("loss")
    assert str(raised.value) == refusal


class TwoPlugins:
    """Two plugins added in code, ``late`` after ``early``: the every-run order is theirs, then the name."""

    class Early:
        COMPONENTS = (
            Component("callback", "zeta", "pytorch_lightning:Callback", "z", every_run=True),
            Component("callback", "alpha", "pytorch_lightning:Callback", "a", every_run=True),
        )

        @hookimpl
        def oml_register_callbacks(self, register):
            register_components(register, self.COMPONENTS, "callback")

    class Late:
        COMPONENTS = (
            Component("callback", "beta", "pytorch_lightning:Callback", "b", every_run=True),
            Component(
                "callback", "early_stop", "pytorch_lightning.callbacks:EarlyStopping", "e", every_run=True
            ),
        )

        @hookimpl
        def oml_register_callbacks(self, register):
            register_components(register, self.COMPONENTS, "callback")


def two_plugins() -> Registry:
    return Registry(
        [("early", TwoPlugins.Early()), ("late", TwoPlugins.Late())], load_entrypoints=False, builtins=False
    )


def test_every_run_callbacks_come_after_the_named_ones_in_load_order_then_by_name():
    registry = two_plugins()
    assert [e.qualified_name for e in registry.every_run_callbacks()] == [
        "early:alpha",
        "early:zeta",
        "late:beta",
        "late:early_stop",
    ]
    named = [{"name": "beta", "args": {}}]
    assert plugin_callback_specs(registry, named, ["early_stop"]) == [
        ("callbacks[0]", {"name": "beta", "args": {}}),
        ("every-run callback 'early:alpha'", {"name": "early:alpha", "args": {}}),
        ("every-run callback 'early:zeta'", {"name": "early:zeta", "args": {}}),
    ]


def test_an_every_run_callback_that_needs_arguments_stops_the_run_unless_named_or_disabled():
    registry = two_plugins()  # late:early_stop is EarlyStopping, whose monitor is required
    with pytest.raises(ConfigError) as raised:
        plugin_callback_specs(registry, [], [])
    assert str(raised.value) == (
        "the every-run callback 'late:early_stop' of plugin late needs the argument(s) ['monitor']: give them in "
        "callbacks ({name: early_stop, args: {...}}) or switch it off (callbacks_disabled: [early_stop])"
    )
    named = [{"name": "early_stop", "args": {"monitor": "OVERALL/cmc/1"}}]
    assert [key for key, _ in plugin_callback_specs(registry, named, [])][0] == "callbacks[0]"
    assert len(plugin_callback_specs(registry, [], ["late:early_stop"])) == 3
