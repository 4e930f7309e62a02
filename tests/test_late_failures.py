"""Failures that used to come late, or as an ``internal error`` with a traceback, now come as one line before any
work (or the input simply works), through the ``oml`` command line where a user meets them:

1. ``nan_policy: skip_batch`` stops as soon as skipping cannot help (weights or embeddings not finite, 5 skipped
   batches in a row, every batch of an epoch), naming the step, the loss and the learning rate;
2. weights with NaN or infinite values, named by file and first such tensor, before anything is validated;
3. an interpolation to a missing key (``seed=${nope}``), on every pipeline command and ``oml index build``;
4. a config file that is not UTF-8 text, given as the primary config or reached through a defaults list;
5. ``lightning_trainer_extra_args`` values that ``pl.Trainer`` refuses, at once or in the first step of a fit;
6. argparse-style flags (``--max-epochs 3``) read as the override of the schema key they name;
7. a component's constructor that raises: its config key, name, plugin and distribution, and the error;
8. a CSV that is not UTF-8 (``dataframe_encoding``, ``oml check-dataframe --encoding``), named by line and row;
9. ``oml check-dataframe`` on a CSV that a pipeline cannot use (no train rows, no validation rows);
10. a ``precision`` that Lightning would silently replace on the machine (``16`` on a CPU);
11. a learning rate that is 0, NaN or infinite (torch refuses a negative one itself), for any optimizer.

The commands run as the console script in a subprocess where the command line itself is what is tested (flags,
config files, plugins, ``oml check-dataframe``), and as ``oml_core.cli.main`` in process elsewhere (the same
code, without 5 s of imports each). The faults are real: bytes that are not UTF-8, a plugin distribution whose
extractor raises, a checkpoint with a NaN, a batch norm fed an infinite value, a learning rate that overflows.
"""

from __future__ import annotations

import math
import shutil
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest
import pytorch_lightning as pl
import torch
import yaml
from torch import Tensor, nn

from oml_core import hookimpl
from oml_core.cli import main
from oml_core.cli.errors import error_report
from oml_core.cli.pipelines import flags_as_overrides
from oml_core.config.components import build_component
from oml_core.datasets.dataframe_format import DataFrameFormatError, read_csv_file
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.lightning.modules.optimization import MAX_SKIPPED_IN_A_ROW, finite_loss_or_none
from oml_core.lightning.pipelines.shared.preflight import check_engine
from oml_core.lightning.pipelines.shared.training import build_optimizer
from oml_core.lightning.pipelines.train import extractor_training_pipeline
from oml_core.lightning.stops import NonFiniteLossError
from oml_core.registry import ConfigError, Registry
from oml_core.utils.checkpoints import CheckpointError, load_checkpoint
from oml_core.utils.misc_torch import first_non_finite
from oml_core.utils.text import is_text_encoding
from tests.scripts.fake_plugins import fake_distribution

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from tiny_training import IMAGE_ARGS, tiny_config  # noqa: E402

#: The rows of the mock dataset's csv: 128 train rows, then 64 validation rows.
N_TRAIN_ROWS = 128
CPU = {"accelerator": "cpu", "devices": 1}


@pytest.fixture(scope="module")
def mock_root(oml_cache_dir: Path) -> Path:
    return get_mock_dataset_root(oml_cache_dir)


@pytest.fixture(autouse=True)
def _isolated_cache(oml_cache_dir, monkeypatch):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    monkeypatch.delenv("OML_TRACEBACK", raising=False)


def the_error_line(stderr: str, command: str) -> str:
    """The one line of ``stderr`` that the command ``oml COMMAND`` printed, checked to be the only one and no
    traceback or internal error."""
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith(f"oml {command}: ")]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    """``oml ARGV`` in process: ``(exit status, stdout, stderr)``."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def tiny_yaml(folder: Path, logs_root: Path, **overrides) -> list[str]:
    """The tiny training config (:func:`tiny_config`) written to ``folder/tiny.yaml``: the arguments that make
    ``oml train`` run it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.yaml").write_text(yaml.safe_dump(tiny_config(logs_root, **overrides)))
    return ["--config-path", str(folder), "--config-name", "tiny"]


def latin1_copy(mock_root: Path, folder: Path) -> Path:
    """A copy of the mock dataset whose ``df.csv`` has a ``category`` column and is saved as latin-1, its data
    row 5 in the category ``café`` (the byte 0xe9 at line 7, column 34)."""
    shutil.copytree(mock_root / "images", folder / "images")
    df = pd.read_csv(mock_root / "df.csv")
    df["category"] = "plain"
    df.loc[5, "category"] = "café"
    df.to_csv(folder / "df.csv", index=False, encoding="latin-1")
    return folder / "df.csv"


# ------------------------------------------------------------------------- 1. nan_policy: skip_batch
class TinyBatchNorm(pl.LightningModule):
    """A linear layer and a batch norm: an infinite input makes the norm's running statistics NaN."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.norm = nn.BatchNorm1d(2)

    def forward(self, x: Tensor) -> Tensor:
        return self.norm(self.linear(x))


def test_skipping_stops_at_the_fifth_non_finite_loss_in_a_row_and_counts_from_a_finite_one():
    module = TinyBatchNorm()
    nan = torch.tensor(float("nan"))
    with pytest.warns(
        UserWarning, match=r"outside a fit the loss is nan \(learning rate unknown\): the batch"
    ):
        for _ in range(MAX_SKIPPED_IN_A_ROW - 1):
            assert finite_loss_or_none(module, nan, "skip_batch") is None
    one = torch.tensor(1.0)
    assert finite_loss_or_none(module, one, "skip_batch") is one  # the count starts again
    with warnings.catch_warnings(record=True):
        for _ in range(MAX_SKIPPED_IN_A_ROW - 1):
            assert finite_loss_or_none(module, nan, "skip_batch") is None
    with pytest.raises(NonFiniteLossError) as caught:
        finite_loss_or_none(module, nan, "skip_batch")
    assert str(caught.value) == (
        "outside a fit the loss is nan (learning rate unknown), 5 batches in a row with a non-finite loss: "
        "training stopped (nan_policy: skip_batch cannot help); lower the learning rate; last good checkpoint: "
        "none written yet"
    )


def test_skipping_stops_at_once_when_a_batch_norm_statistic_went_nan():
    module = TinyBatchNorm().train()
    outputs = module(torch.tensor([[1.0, 2.0], [float("inf"), 0.0], [3.0, 1.0]]))
    with pytest.raises(NonFiniteLossError) as caught:
        finite_loss_or_none(module, outputs.sum(), "skip_batch", outputs)
    assert str(caught.value) == (
        "outside a fit the loss is nan (learning rate unknown), and the weight 'norm.running_mean' is not finite "
        "itself: training stopped (nan_policy: skip_batch cannot help); lower the learning rate; last good "
        "checkpoint: none written yet"
    )


def test_skipping_stops_at_once_when_the_outputs_are_not_finite_with_finite_weights():
    module = TinyBatchNorm()
    outputs = torch.tensor([[float("inf"), 1.0]])
    with pytest.raises(
        NonFiniteLossError, match=r"and so are the model's outputs \(the forward pass overflows"
    ):
        finite_loss_or_none(module, outputs.sum(), "skip_batch", outputs)


def test_a_finite_loss_of_non_finite_outputs_is_not_a_skip_matter():
    module = TinyBatchNorm()
    loss = torch.tensor(0.5)
    assert finite_loss_or_none(module, loss, "skip_batch", torch.tensor([float("inf")])) is loss


@pytest.mark.slow
def test_a_learning_rate_that_overflows_stops_a_skip_batch_run_in_one_line(tmp_path, capsys):
    """``lr=1e30``: step 1 makes the weights about 1e30, finite; at step 2 the forward pass overflows: the loss
    and the embeddings are NaN. Skipping would go on into a validation of NaN embeddings (an internal error
    before); the run stops at step 2, before the first epoch's line."""
    logs = tmp_path / "logs"
    argv = tiny_yaml(tmp_path / "cfg", logs, max_epochs=3, logs_folder="run", nan_policy="skip_batch")
    status, out, err = run_main(capsys, "train", *argv, "optimizer.args.lr=1e30")
    assert status == 1
    assert the_error_line(err, "train") == (
        "oml train: at step 2 (epoch 0, batch 2) the loss is nan (learning rate 1e+30), and so are the model's "
        "outputs (the forward pass overflows: the weights are too large): training stopped (nan_policy: "
        "skip_batch cannot help); lower the learning rate; last good checkpoint: none written yet"
    )
    assert "epoch 1/3" not in out and not list(logs.rglob("*.ckpt"))


class AlwaysNan(nn.Module):
    """A loss that is NaN for every batch, the embeddings being finite: skipping can only waste the run."""

    def forward(self, features: Tensor, labels: Tensor) -> Tensor:
        return (features**2).mean() * float("nan")


class AlwaysNanPlugin:
    @hookimpl
    def oml_register_losses(self, register):
        register("always_nan", AlwaysNan)


@pytest.mark.slow
def test_a_skip_batch_run_whose_every_batch_of_an_epoch_was_skipped_stops_before_validating(tmp_path):
    """2 steps an epoch: the second skipped batch in a row is the last of epoch 0, nothing was trained."""
    cfg = tiny_config(
        tmp_path, criterion={"name": "always_nan", "args": {}}, nan_policy="skip_batch", logs_folder="run"
    )
    with pytest.raises(NonFiniteLossError) as caught, warnings.catch_warnings(record=True) as caught_warnings:
        warnings.simplefilter("always")
        extractor_training_pipeline(cfg, registry=Registry([AlwaysNanPlugin()]))
    assert str(caught.value) == (
        "at step 2 (epoch 0, batch 2) the loss is nan (learning rate 0.02), as was every batch of epoch 0 "
        "(2 batches, nothing trained): training stopped (nan_policy: skip_batch cannot help); lower the "
        "learning rate; last good checkpoint: none written yet"
    )
    skipped = [w for w in caught_warnings if "the batch is skipped" in str(w.message)]
    assert [str(w.message) for w in skipped] == [
        "at step 1 (epoch 0, batch 1) the loss is nan (learning rate 0.02): the batch is skipped "
        "(nan_policy: skip_batch)"
    ]
    assert not list(tmp_path.rglob("*.ckpt"))


# ------------------------------------------------------------------------------ 2. non-finite weights
def test_first_non_finite_screens_by_sums_without_flagging_an_overflowing_sum():
    huge = torch.full((4,), 3e38)  # finite values whose sum overflows to inf
    assert first_non_finite([("huge", huge), ("counter", torch.tensor([7])), ("extra", "state")]) is None
    late_nan = torch.zeros(1000)
    late_nan[999] = float("nan")
    assert first_non_finite([("a", torch.ones(3)), ("b", late_nan), ("c", torch.full((2,), math.inf))]) == "b"
    assert first_non_finite([("c", torch.tensor([1.0, -math.inf]))]) == "c"


def test_load_checkpoint_refuses_an_infinite_value_before_the_module_changes(tmp_path):
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    state = {key: value.clone() for key, value in model.state_dict().items()}
    state["1.bias"] = torch.tensor([math.inf])
    path = tmp_path / "diverged.pth"
    torch.save({"state_dict": {f"model.{key}": value for key, value in state.items()}}, path)
    before = {key: value.clone() for key, value in model.state_dict().items()}
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(model, path)
    assert str(caught.value) == (
        f"the checkpoint {str(path)!r} has NaN or infinite values, first in the tensor '1.bias' (saved by a run "
        f"that diverged?); give weights whose values are all finite"
    )
    assert all(torch.equal(before[key], value) for key, value in model.state_dict().items())


def test_validate_with_nan_weights_fails_in_one_line_before_validating(tmp_path, capsys):
    registry = Registry()
    extractor = registry.build("extractor", {"name": "tiny_conv", "args": {"feat_dim": 16}})
    state = extractor.state_dict()
    state["backbone.2.weight"][3, 5, 1, 1] = float("nan")
    weights = tmp_path / "nan.pth"
    torch.save(state, weights)
    logs = tmp_path / "logs"
    status, _, err = run_main(
        capsys,
        "validate",
        f"logs_root={logs}",
        f"extractor={{name: tiny_conv, args: {{feat_dim: 16, weights: {weights}}}}}",
    )
    assert status == 2
    assert the_error_line(err, "validate") == (
        f"oml validate: error: extractor_validation_pipeline: config key 'extractor' ('tiny_conv'): the "
        f"checkpoint {str(weights)!r} has NaN or infinite values, first in the tensor 'backbone.2.weight' (saved "
        f"by a run that diverged?); give weights whose values are all finite"
    )
    assert not logs.exists()


# ------------------------------------------------------------------------------ 3. a missing reference
@pytest.mark.parametrize(
    "command",
    ["train", "validate", "predict", "train-postprocessor", "validate-postprocessor", "index build"],
)
def test_every_command_with_a_config_names_the_missing_reference(command, tmp_path, capsys):
    status, _, err = run_main(capsys, *command.split(), "seed=${nope}", f"logs_root={tmp_path / 'logs'}")
    assert status == 2
    assert the_error_line(err, command) == (
        f"oml {command}: error: cannot resolve the config: config key 'seed': Interpolation key 'nope' not found"
    )
    assert not (tmp_path / "logs").exists()


def test_a_nested_reference_names_its_key_and_an_unknown_resolver_too(tmp_path, capsys):
    status, _, err = run_main(capsys, "train", "optimizer.args.lr=${training.lr}")
    assert status == 2
    assert the_error_line(err, "train") == (
        "oml train: error: cannot resolve the config: config key 'optimizer.args.lr': Interpolation key "
        "'training.lr' not found"
    )
    status, _, err = run_main(capsys, "train", "postfix=${nope:1}")
    assert the_error_line(err, "train") == (
        "oml train: error: cannot resolve the config: config key 'postfix': Unsupported interpolation type nope"
    )


# --------------------------------------------------------------------------------- 4. a binary config
PNG_START = b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe"


def test_a_binary_config_file_is_named_in_one_line(run_oml, tmp_path):
    (tmp_path / "run.yaml").write_bytes(PNG_START)
    done = run_oml("train", "--config-path", str(tmp_path), "--config-name", "run")
    assert done.returncode == 2
    assert the_error_line(done.stderr, "train") == (
        f"oml train: error: the config file {str(tmp_path / 'run.yaml')!r} is not UTF-8 text: the byte 0x89 at "
        f"line 1, column 1 is not UTF-8 (a config is a yaml text file, saved as UTF-8)"
    )


def test_a_latin1_config_reached_through_the_defaults_list_is_named(run_oml, tmp_path):
    (tmp_path / "optimizer").mkdir()
    (tmp_path / "optimizer" / "mine.yaml").write_bytes(b"name: sgd\n# r\xe9glages\nargs: {lr: 0.1}\n")
    (tmp_path / "run.yaml").write_text("defaults:\n  - optimizer: mine\n  - _self_\nmax_epochs: 1\n")
    done = run_oml("train", "--config-path", str(tmp_path), "--config-name", "run")
    assert done.returncode == 2
    assert the_error_line(done.stderr, "train") == (
        f"oml train: error: the config file {str(tmp_path / 'optimizer' / 'mine.yaml')!r} is not UTF-8 text: the "
        f"byte 0xe9 at line 2, column 4 is not UTF-8 (a config is a yaml text file, saved as UTF-8)"
    )


# ------------------------------------------------------------------------ 5. pl.Trainer's arguments
def test_a_trainer_argument_lightning_refuses_fails_before_the_data_is_read(tmp_path, capsys):
    status, out, err = run_main(
        capsys, "train", "+lightning_trainer_extra_args.limit_train_batches=-1", f"logs_root={tmp_path / 'l'}"
    )
    assert status == 2
    assert the_error_line(err, "train") == (
        "oml train: error: lightning_trainer_extra_args.limit_train_batches: pl.Trainer refuses -1: You have "
        "passed invalid value -1 for limit_train_batches, it has to be in [0.0, 1.0] or an int."
    )
    assert "Checked" not in out and not (tmp_path / "l").exists()  # not even the images were read


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # pl.Trainer takes these, then divides by them in the first step of a fit (ZeroDivisionError)
        (
            {"accumulate_grad_batches": 0},
            "lightning_trainer_extra_args.accumulate_grad_batches: must be > 0, got 0",
        ),
        (
            {"check_val_every_n_epoch": 0},
            "lightning_trainer_extra_args.check_val_every_n_epoch: must be > 0, got 0",
        ),
        (
            {"val_check_interval": 0.0},
            "lightning_trainer_extra_args.val_check_interval: must be > 0, got 0.0",
        ),
        # a fit would fail on the type (set_anomaly_enabled)
        ({"detect_anomaly": "yes"}, "lightning_trainer_extra_args.detect_anomaly: expected bool, got 'yes'"),
        (
            {"enable_progress_bar": None, "max_steps": -5},
            "lightning_trainer_extra_args.max_steps: pl.Trainer refuses -5: `max_steps` must be a non-negative "
            "integer or -1 (infinite steps). You passed in -5.",
        ),
    ],
)
def test_trainer_arguments_that_would_fail_a_fit_are_named(extra, message):
    with pytest.raises(ConfigError) as caught:
        check_engine(CPU, 32, extra)
    assert str(caught.value) == message


def test_trainer_arguments_lightning_takes_pass():
    check_engine(
        CPU, 32, {"enable_progress_bar": None, "limit_train_batches": 2, "val_check_interval": "00:00:01:00"}
    )


# --------------------------------------------------------------------------- 6. flags as overrides
def test_a_flag_naming_a_schema_key_is_its_override(capsys):
    status, out, err = run_main(
        capsys, "train", "--max-epochs", "3", "--optimizer.args.lr=0.5", "--show-config"
    )
    assert status == 0, err
    shown = yaml.safe_load(out)
    assert shown["max_epochs"] == 3 and shown["optimizer"]["args"]["lr"] == 0.5


def test_flags_translate_to_overrides_and_other_arguments_stay():
    assert flags_as_overrides("train", ["--max-epochs", "3", "seed=1", "--bs_val=8", "--postfix", "-1"]) == [
        "max_epochs=3",
        "seed=1",
        "bs_val=8",
        "postfix=-1",
    ]
    assert flags_as_overrides("validate", ["bs_val=8"]) == ["bs_val=8"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--max-epoch", "3"],
            "unknown option '--max-epoch'; did you mean max_epochs=VALUE? (the config's keys are set with "
            "overrides KEY=VALUE, e.g. max_epochs=3; see oml train --help)",
        ),
        (["--max-epochs"], "--max-epochs needs a value: write max_epochs=VALUE"),
        (["--max-epochs", "--seed=1"], "--max-epochs needs a value: write max_epochs=VALUE"),
    ],
)
def test_a_flag_naming_no_key_or_without_a_value_says_what_to_write(argv, message, capsys):
    status, _, err = run_main(capsys, "train", *argv)
    assert status == 2
    assert the_error_line(err, "train") == f"oml train: error: {message}"


# ------------------------------------------------------------------------ 7. a constructor that raises
EXPLODING_PLUGIN = """
from oml_core import hookimpl
from oml_core.interfaces.models import IExtractor


class ExplodingExtractor(IExtractor):
    def __init__(self, feat_dim: int = 8) -> None:
        super().__init__()
        raise RuntimeError("no kernel image is available for execution on the device")

    @property
    def feat_dim(self) -> int:
        return 8


@hookimpl
def oml_register_extractors(register):
    register("exploding", ExplodingExtractor)
"""


def test_a_constructor_that_raises_is_named_with_its_plugin_before_any_work(run_oml, tmp_path):
    (tmp_path / "site").mkdir()
    plugin = fake_distribution(
        tmp_path / "site", "exploding-oml-plugin", "exploding", "exploding_oml_plugin", EXPLODING_PLUGIN
    )
    logs = tmp_path / "logs"
    done = run_oml(
        "train",
        "extractor={name: exploding, args: {}}",
        f"logs_root={logs}",
        "max_epochs=1",
        env={"PYTHONPATH": str(plugin), "OML_LOAD_PLUGINS": None},
    )
    assert done.returncode == 2
    assert the_error_line(done.stderr, "train") == (
        "oml train: error: extractor_training_pipeline: config key 'extractor': the extractor 'exploding' of the "
        "plugin exploding (exploding-oml-plugin 0.3) failed to build: RuntimeError: no kernel image is available "
        "for execution on the device"
    )
    assert not logs.exists()


def unfinished(**args) -> None:
    """A factory that is not finished: it raises whatever its arguments."""
    raise NotImplementedError("a later version has it")


class UnfinishedPlugin:
    @hookimpl
    def oml_register_lr_functions(self, register):
        register("unfinished", unfinished)

    @hookimpl
    def oml_register_schedulers(self, register):
        register("unfinished_scheduler", unfinished)


def test_a_nested_component_that_raises_is_the_one_named():
    registry = Registry([UnfinishedPlugin()])
    optimizer = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)
    spec = {"name": "lambda", "args": {"lr_lambda": {"name": "unfinished", "args": {}}}}
    with pytest.raises(ConfigError) as caught:
        build_component(
            registry,
            "scheduler",
            spec,
            "scheduling.scheduler",
            "extractor_training_pipeline",
            optimizer=optimizer,
        )
    assert str(caught.value) == (
        "extractor_training_pipeline: config key 'scheduling.scheduler': the lr_function 'unfinished' of the plugin "
        "UnfinishedPlugin failed to build: NotImplementedError: a later version has it"
    )


def test_the_command_line_names_the_plugin_of_a_component_built_outside_a_config_key():
    registry = Registry([UnfinishedPlugin()])
    with pytest.raises(NotImplementedError) as caught:
        registry.build("scheduler", {"name": "unfinished_scheduler", "args": {}})
    assert error_report(caught.value, ["train"]) == (
        "internal error: the scheduler 'unfinished_scheduler' of the plugin UnfinishedPlugin failed to build: "
        "NotImplementedError: a later version has it (run with OML_TRACEBACK=1 for the traceback)",
        1,
    )


# ------------------------------------------------------------------------------- 8. a latin-1 CSV
def test_a_latin1_csv_is_named_by_line_and_row_and_reads_with_its_encoding(run_oml, mock_root, tmp_path):
    csv = latin1_copy(mock_root, tmp_path / "data")
    done = run_oml("check-dataframe", str(csv))
    assert done.returncode == 1
    assert the_error_line(done.stderr, "check-dataframe") == (
        f"oml check-dataframe: error: '{csv}': is not utf-8 text: the byte 0xe9 at line 7 (row 5), column 34 is "
        f"not utf-8; give the file's encoding (the config key dataframe_encoding, oml check-dataframe --encoding), "
        f"e.g. latin-1 or cp1252, or save it as UTF-8"
    )
    done = run_oml("check-dataframe", str(csv), "--encoding", "latin-1")
    assert done.returncode == 0 and f"'{csv}': OK, in OML's retrieval format" in done.stdout
    assert "2 categories" in done.stdout
    done = run_oml("check-dataframe", str(csv), "--encoding", "zlib")  # a codec, but not of text
    assert done.returncode == 1
    assert the_error_line(done.stderr, "check-dataframe") == (
        f"oml check-dataframe: error: '{csv}': unknown encoding 'zlib' (e.g. utf-8, latin-1, cp1252)"
    )


def test_a_pipeline_refuses_a_latin1_csv_at_once_and_validates_it_with_dataframe_encoding(
    mock_root, tmp_path, capsys
):
    csv = latin1_copy(mock_root, tmp_path / "data")
    tiny = [
        f"dataset_root={csv.parent}",
        f"logs_root={tmp_path / 'logs'}",
        "extractor={name: tiny_conv, args: {feat_dim: 16}}",
        f"transforms_val.args.im_size={IMAGE_ARGS['im_size']}",
        "logger=null",
    ]
    status, _, err = run_main(capsys, "validate", *tiny)
    assert status == 2
    assert the_error_line(err, "validate").startswith(
        f"oml validate: error: '{csv}': is not utf-8 text: the byte 0xe9 at line 7 (row 5), column 34"
    )
    assert not (tmp_path / "logs").exists()
    status, out, err = run_main(capsys, "validate", *tiny, "dataframe_encoding=latin-1")
    assert status == 0, err[-3000:]
    assert "OVERALL/cmc/1" in out
    status, _, err = run_main(capsys, "validate", *tiny, "dataframe_encoding=klingon")
    assert the_error_line(err, "validate") == (
        "oml validate: error: dataframe_encoding: expected a text encoding Python knows (utf-8, latin-1, cp1252, "
        "...), got 'klingon'"
    )


def test_the_row_of_an_undecodable_byte_is_pandas_count_past_quoted_line_breaks_and_blank_lines(tmp_path):
    csv = tmp_path / "df.csv"
    csv.write_bytes(
        b'label,path,split,note\n0,a.png,train,"two\nlines"\n\n1,b.png,train,x\n2,c.png,train,caf\xe9\n'
    )
    with pytest.raises(
        DataFrameFormatError, match=r"the byte 0xe9 at line 6 \(row 2\), column 18 is not utf-8"
    ):
        read_csv_file(csv)
    csv.write_bytes(b"label,p\xe4th\n0,a.png\n")
    with pytest.raises(DataFrameFormatError, match=r"the byte 0xe4 at line 1 \(the header\), column 8"):
        read_csv_file(csv)
    assert list(read_csv_file(csv, encoding="cp1252").columns) == ["label", "päth"]


def test_text_encodings_are_told_from_other_codecs():
    assert [is_text_encoding(name) for name in ("utf-8", "latin-1", "cp1252", "utf-16", "UTF8")] == [True] * 5
    assert [is_text_encoding(name) for name in ("zlib", "rot13", "base64", "klingon", None, 8)] == [False] * 6


# -------------------------------------------------------------------- 9. what a CSV can be used for
def test_check_dataframe_says_what_a_csv_without_a_split_can_be_used_for(run_oml, mock_root, tmp_path):
    df = pd.read_csv(mock_root / "df.csv")
    df[df["split"] == "validation"].to_csv(tmp_path / "val_only.csv", index=False)
    df[df["split"] == "train"].to_csv(tmp_path / "train_only.csv", index=False)
    root = ["--dataset-root", str(mock_root)]

    done = run_oml("check-dataframe", str(tmp_path / "val_only.csv"), *root)
    assert done.returncode == 0 and "validation: 64 rows" in done.stdout
    assert done.stderr.splitlines() == [
        f"oml check-dataframe: warning: '{tmp_path / 'val_only.csv'}': no train rows: usable for validate/predict "
        f"only (oml train and oml train-postprocessor need rows with split=train)"
    ]
    done = run_oml("check-dataframe", str(tmp_path / "train_only.csv"), *root)
    assert done.returncode == 0 and f"train:      {N_TRAIN_ROWS} rows" in done.stdout
    assert done.stderr.splitlines() == [
        f"oml check-dataframe: warning: '{tmp_path / 'train_only.csv'}': no validation rows: usable for predict "
        f"only (oml train, oml validate and the post-processor pipelines need rows with split=validation)"
    ]


# ------------------------------------------------------------------------------------- 10. precision
@pytest.mark.parametrize("precision", [16, "16", "16-mixed"])
def test_float16_autocast_on_a_cpu_is_refused_with_what_to_use(precision):
    with pytest.raises(ConfigError) as caught:
        check_engine(CPU, precision)
    meaning = " (16-mixed)" if precision != "16-mixed" else ""
    assert str(caught.value) == (
        f"precision: {precision!r}{meaning} is not available on the cpu: Lightning would silently run "
        f"'bf16-mixed' instead (bfloat16 autocast, many times slower than 32 on most CPUs); set precision=32, or "
        f"precision=bf16-mixed to run that on purpose"
    )


@pytest.mark.parametrize("precision", ["bf16", "bf16-mixed", "16-true", "bf16-true", 32, "32-true", 64])
def test_precisions_a_cpu_runs_as_asked_pass(precision):
    check_engine(CPU, precision)


def test_precision_16_on_a_cpu_fails_oml_train_before_the_data_is_read(tmp_path, capsys):
    status, out, err = run_main(capsys, "train", "precision=16", f"logs_root={tmp_path / 'l'}")
    assert status == 2
    assert the_error_line(err, "train").startswith(
        "oml train: error: precision: 16 (16-mixed) is not available on the cpu: Lightning would silently run "
        "'bf16-mixed' instead"
    )
    assert "Checked" not in out and not (tmp_path / "l").exists()


# ---------------------------------------------------------------------------------- 11. learning rate
@pytest.mark.parametrize(
    ("lr", "message"),
    [
        (
            "0",
            "optimizer.args.lr: the learning rate 0 must be a finite number > 0; to keep the model as it is for "
            "the first epochs, set freeze_n_epochs",
        ),
        ("inf", "optimizer.args.lr: the learning rate inf must be a finite number > 0"),
        ("nan", "optimizer.args.lr: the learning rate nan must be a finite number > 0"),
    ],
)
def test_a_learning_rate_that_cannot_train_fails_oml_train_before_any_epoch(lr, message, tmp_path, capsys):
    logs = tmp_path / "logs"
    status, out, err = run_main(
        capsys, "train", *tiny_yaml(tmp_path / "cfg", logs), f"optimizer.args.lr={lr}"
    )
    assert status == 2
    assert the_error_line(err, "train") == f"oml train: error: extractor_training_pipeline: {message}"
    assert "epoch" not in out and not logs.exists()


class HalvingSGD(torch.optim.SGD):
    """A plugin's optimizer whose learning rate argument has its own name, and whose second parameter group
    gets ``learning_rate * scale``."""

    def __init__(self, params, learning_rate: float = 0.1, scale: float = 0.5) -> None:
        params = list(params)
        groups = [{"params": params[:1]}, {"params": params[1:], "lr": learning_rate * scale}]
        super().__init__(groups, lr=learning_rate)


class HalvingSGDPlugin:
    @hookimpl
    def oml_register_optimizers(self, register):
        register("halving_sgd", HalvingSGD)


def test_the_learning_rate_of_every_parameter_group_of_a_plugin_optimizer_is_checked():
    registry = Registry([HalvingSGDPlugin()])
    params = list(nn.Linear(2, 2).parameters())
    spec = {"name": "halving_sgd", "args": {"learning_rate": 0.1, "scale": 0.0}}
    with pytest.raises(ConfigError) as caught:
        build_optimizer(registry, spec, params, "extractor_training_pipeline")
    assert str(caught.value) == (
        "extractor_training_pipeline: optimizer ('halving_sgd'): the learning rate 0 (parameter group 1) must be a "
        "finite number > 0; to keep the model as it is for the first epochs, set freeze_n_epochs"
    )
    spec["args"]["scale"] = 2.0
    optimizer = build_optimizer(registry, spec, params, "extractor_training_pipeline")
    assert [group["lr"] for group in optimizer.param_groups] == [0.1, 0.2]
