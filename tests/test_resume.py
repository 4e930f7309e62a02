"""Resuming a run: it goes on in its own folder and ends exactly as the uninterrupted run; a resume whose model,
loss, optimizer, seed or data differ from the run's is refused in one line before any work (unless
``resume_allow_changes`` allows a new seed or dataset); a finished run resumed says so; only a verified file is
ever called the last good checkpoint."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from torch import Tensor, nn

from oml_core import hookimpl
from oml_core.cli import main
from oml_core.config.typed import validate_config
from oml_core.datasets.image_data import resolve_dataset_root
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.lightning.callbacks.run_record import make_run_record
from oml_core.lightning.pipelines.shared.resume import plan_resume
from oml_core.lightning.pipelines.train import PIPELINE, extractor_training_pipeline
from oml_core.lightning.stops import NonFiniteLossError
from oml_core.registry import ConfigError, Registry

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from tiny_training import tiny_config  # noqa: E402


class TurnsNan(nn.Module):
    """``mean(features ** 2)``, NaN once the test sets :attr:`nan` (not a config argument: the resumed run's
    config is the run's)."""

    nan = False

    def forward(self, features: Tensor, labels: Tensor) -> Tensor:
        return (features**2).mean() * (float("nan") if TurnsNan.nan else 1.0)


class TurnsNanPlugin:
    @hookimpl
    def oml_register_losses(self, register):
        register("turns_nan", TurnsNan)


def digests(run_dir: Path) -> dict[str, str]:
    """The md5 of every file under ``run_dir``."""
    return {
        str(path.relative_to(run_dir)): hashlib.md5(path.read_bytes()).hexdigest()
        for path in sorted(run_dir.rglob("*"))
        if path.is_file()
    }


def weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    return torch.load(checkpoint, weights_only=True)["state_dict"]


def same_weights(a: Path, b: Path) -> bool:
    first, second = weights(a), weights(b)
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


@pytest.fixture(autouse=True)
def _mock_dataset_cache(oml_cache_dir, monkeypatch):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))


@pytest.fixture(scope="module")
def finished(oml_cache_dir, tmp_path_factory) -> Path:
    """The folder of a finished one-epoch run of the tiny config (never written into by the tests)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
        root = tmp_path_factory.mktemp("finished")
        result = extractor_training_pipeline(tiny_config(root, max_epochs=1, logs_folder="run"))
    return result.run_dir


def copy_of(run_dir: Path, where: Path) -> Path:
    """A copy of a run folder, to resume without touching the original."""
    return Path(shutil.copytree(run_dir, where / run_dir.name))


def changed_dataset(oml_cache_dir: Path, where: Path) -> Path:
    """A copy of the mock dataset whose dataframe lists the same rows in another order (other bytes)."""

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
        source = get_mock_dataset_root()
    root = Path(shutil.copytree(source, where / "dataset"))
    df = pd.read_csv(root / "df.csv")
    df.iloc[::-1].to_csv(root / "df.csv", index=False)
    return root


@pytest.mark.slow
def test_a_resumed_run_goes_on_in_its_own_folder_and_ends_as_the_uninterrupted_one(tmp_path, finished):
    """The random augmentation (a flip) and the balance sampler draw from the global RNG and the sampler's
    generator: both come back from the checkpoint, so the second epoch is the same. ``logs_folder`` is ignored:
    the run's folder is the checkpoint's, and TensorBoard goes on in its ``version_0``."""
    straight = extractor_training_pipeline(tiny_config(tmp_path / "straight", max_epochs=2))
    run = copy_of(finished, tmp_path / "runs")
    resumed = extractor_training_pipeline(
        tiny_config(
            tmp_path / "elsewhere",
            max_epochs=2,
            logs_folder="other",
            resume=str(run / "checkpoints" / "last.ckpt"),
        )
    )
    assert resumed.run_dir == run and not (tmp_path / "elsewhere").exists()
    assert resumed.log_dir == run / "version_0"
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "version_0"]
    assert resumed.last_checkpoint == run / "checkpoints" / "last.ckpt"

    expected = torch.load(straight.last_checkpoint, weights_only=True)
    got = torch.load(resumed.last_checkpoint, weights_only=True)
    assert (
        (got["epoch"], got["global_step"]) == (expected["epoch"], expected["global_step"]) == (1, 4)
    )  # written at the end of epoch 1 (0-based, Lightning's convention), after 2 epochs of 2 steps
    assert same_weights(resumed.last_checkpoint, straight.last_checkpoint)
    assert resumed.metrics == straight.metrics
    assert resumed.epochs == straight.epochs  # epoch 0 and 1 from the checkpoint, 2 from the resumed run
    assert (resumed.best_epoch, resumed.best_metrics) == (straight.best_epoch, straight.best_metrics)
    assert same_weights(resumed.best_checkpoint, straight.best_checkpoint)


#: A process that starts writing ARGV[1] atomically, says so, and waits to be killed in the middle of the write.
KILLED_WRITER = """
import sys, time
from oml_core.utils.atomic import atomic_write
with atomic_write(sys.argv[1]) as file:
    file.write(b"half a checkpoint" * 1000)
    file.flush()
    print("writing", flush=True)
    time.sleep(600)
"""


def test_the_start_of_a_resumed_run_removes_what_a_killed_write_left(tmp_path, finished):
    run = copy_of(finished, tmp_path / "runs")
    last = run / "checkpoints" / "last.ckpt"
    writer = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(last)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
    finally:
        writer.kill()  # SIGKILL, in the middle of the write
        writer.wait()
    stale = last.with_name(f".tmp-last.ckpt.{writer.pid}")
    assert stale.stat().st_size == len(b"half a checkpoint") * 1000
    config = validate_config(tiny_config(tmp_path / "elsewhere", max_epochs=2, resume=str(last)), PIPELINE)
    dataframe = resolve_dataset_root(config.dataset_root) / config.dataframe_name
    plan_resume(make_run_record(PIPELINE, config, dataframe), config)  # the start, before any work
    assert not stale.exists()
    assert sorted(p.name for p in last.parent.iterdir()) == sorted(
        p.name for p in (finished / "checkpoints").iterdir()
    )


def test_resume_from_a_missing_checkpoint_fails_at_once(tmp_path):
    missing = tmp_path / "nowhere" / "last.ckpt"
    with pytest.raises(ConfigError, match=f"^resume: the checkpoint '{missing}' does not exist$"):
        extractor_training_pipeline(tiny_config(tmp_path, resume=str(missing)))
    assert not (tmp_path / "nowhere").exists() and list(tmp_path.iterdir()) == []


ARCFACE_32 = {"name": "arcface", "args": {"in_features": 32, "num_classes": 16, "s": 8.0}}
TRIPLET = {"name": "triplet_with_miner", "args": {"margin": 0.2}}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("overrides", "differs"),
    [
        (
            {"extractor": {"name": "tiny_conv", "args": {"feat_dim": 32}}, "criterion": ARCFACE_32},
            "extractor.args.feat_dim (16 -> 32), criterion.args.in_features (16 -> 32)",
        ),
        ({"optimizer": {"name": "adam", "args": {"lr": 0.02}}}, "optimizer ('sgd' -> 'adam')"),
        ({"optimizer": {"name": "sgd", "args": {"lr": 0.5}}}, "optimizer.args.lr (0.02 -> 0.5)"),
        ({"criterion": TRIPLET}, "criterion ('arcface' -> 'triplet_with_miner')"),
        (
            {"sampler": {"name": "balance", "args": {"n_labels": 4, "n_instances": 5}}},
            "sampler.args.n_labels (6 -> 4)",
        ),
        ({"seed": 8}, "seed (7 -> 8)"),
    ],
)
def test_a_resume_that_changes_the_run_is_refused_in_one_line_before_any_work(finished, overrides, differs):
    before = digests(finished)
    last = finished / "checkpoints" / "last.ckpt"
    cfg = tiny_config(finished.parent, max_epochs=3, resume=str(last), **overrides)
    with pytest.raises(ConfigError) as caught:
        extractor_training_pipeline(cfg)
    message = str(caught.value)
    assert message.startswith(f"resume: the config differs from the run of '{last}' in {differs}: ")
    assert "\n" not in message
    end = "undo the change or start a new run"
    assert message.endswith(
        f"{end}, or allow it with resume_allow_changes=[seed]" if "seed" in overrides else end
    )
    assert digests(finished) == before  # nothing written: no checkpoint, no log
    assert sorted(p.name for p in finished.parent.iterdir()) == ["run"]


@pytest.mark.slow
def test_a_resume_on_other_data_is_refused_unless_allowed(finished, oml_cache_dir, tmp_path):
    """Allowed, the earlier epochs' metrics (measured on the other data) are not carried over: the table and
    best.ckpt hold the new epochs only."""
    dataset = changed_dataset(oml_cache_dir, tmp_path)
    last = finished / "checkpoints" / "last.ckpt"
    before = digests(finished)
    with pytest.raises(ConfigError, match=r"in dataset \('.*df\.csv' sha256 [0-9a-f]{12} -> '") as caught:
        extractor_training_pipeline(
            tiny_config(finished.parent, max_epochs=2, resume=str(last), dataset_root=str(dataset))
        )
    assert str(caught.value).endswith("or allow it with resume_allow_changes=[dataset]")
    assert digests(finished) == before

    run = copy_of(finished, tmp_path / "runs")
    warning = (
        r"^resume: the dataset differs from the run's \(dataset \('.*' sha256 [0-9a-f]{12} -> '.*' sha256 "
        r"[0-9a-f]{12}\); resume_allow_changes has dataset\): the metrics and best.ckpt of its 1 earlier epochs, "
        r"measured on the other data, are not carried over; best.ckpt becomes the best epoch on the new data$"
    )
    with pytest.warns(UserWarning, match=warning):
        resumed = extractor_training_pipeline(
            tiny_config(
                tmp_path,
                max_epochs=2,
                resume=str(run / "checkpoints" / "last.ckpt"),
                dataset_root=str(dataset),
                resume_allow_changes=["dataset"],
            )
        )
    assert resumed.run_dir == run
    assert sorted(resumed.epochs) == [2] and resumed.best_epoch == 2
    best = torch.load(resumed.best_checkpoint, weights_only=True)
    assert (best["epoch"], best["global_step"]) == (1, 4)  # written by the resumed run, after epoch 2


@pytest.mark.slow
def test_a_new_seed_is_taken_when_allowed(finished, tmp_path):
    """The random state then starts from the new seed: the second epoch differs from the one seed 7 gives."""
    same = extractor_training_pipeline(
        tiny_config(
            tmp_path,
            max_epochs=2,
            resume=str(copy_of(finished, tmp_path / "a") / "checkpoints" / "last.ckpt"),
        )
    )
    with pytest.warns(UserWarning, match=r"^resume: seed=8 differs from the run's \(resume_allow_changes"):
        reseeded = extractor_training_pipeline(
            tiny_config(
                tmp_path,
                max_epochs=2,
                seed=8,
                resume_allow_changes=["seed"],
                resume=str(copy_of(finished, tmp_path / "b") / "checkpoints" / "last.ckpt"),
            )
        )
    assert reseeded.run_dir == tmp_path / "b" / "run"
    assert torch.load(reseeded.last_checkpoint, weights_only=True)["global_step"] == 4
    assert not same_weights(reseeded.last_checkpoint, same.last_checkpoint)


@pytest.mark.slow
def test_a_finished_run_resumed_says_so_in_one_line(finished, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OML_TRACEBACK", raising=False)
    last = finished / "checkpoints" / "last.ckpt"
    cfg = tiny_config(finished.parent, max_epochs=1, resume=None, logs_folder=None)
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(cfg))
    before = digests(finished)
    status = main(["train", "--config-path", str(tmp_path), "--config-name", "tiny", f"resume={last}"])
    assert status == 2
    assert capsys.readouterr().err == (
        f"oml train: error: resume: the run of '{last}' already finished its max_epochs=1 (1 trained): nothing is "
        "left to train; raise max_epochs to train on (e.g. max_epochs=2)\n"
    )
    # another optimizer on the command line: one line too, no traceback
    status = main(
        ["train", "--config-path", str(tmp_path), "--config-name", "tiny", f"resume={last}", "max_epochs=2"]
        + ["optimizer@optimizer=adam"]
    )
    assert status == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(
        f"oml train: error: resume: the config differs from the run of '{last}' in optimizer"
    )
    assert digests(finished) == before


def test_resume_keys_are_checked_by_the_schema():
    cfg = tiny_config(Path("logs"))
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "resume_allow_changes: expected a list of values among 'seed', 'dataset', got ['model']"
        ),
    ):
        validate_config({**cfg, "resume_allow_changes": ["model"]}, "extractor_training_pipeline")
    with pytest.raises(
        ConfigError, match=re.escape("checkpoint_every_seconds: expected a number in [0, inf], got -1")
    ):
        validate_config({**cfg, "checkpoint_every_seconds": -1}, "extractor_training_pipeline")


def test_a_checkpoint_outside_a_run_folder_or_without_a_run_record_is_refused(tmp_path, finished):
    moved = tmp_path / "last.ckpt"
    shutil.copy(finished / "checkpoints" / "last.ckpt", moved)
    with pytest.raises(
        ConfigError, match=r"is not in a run's checkpoints folder \(<run>/checkpoints/last\.ckpt\)"
    ):
        extractor_training_pipeline(tiny_config(tmp_path, max_epochs=2, resume=str(moved)))
    foreign = tmp_path / "foreign" / "checkpoints" / "last.ckpt"
    foreign.parent.mkdir(parents=True)
    state = torch.load(finished / "checkpoints" / "last.ckpt", weights_only=True)
    del state["oml_run"]
    torch.save(state, foreign)
    with pytest.raises(ConfigError, match=r"does not record the config of its run"):
        extractor_training_pipeline(tiny_config(tmp_path, max_epochs=2, resume=str(foreign)))


@pytest.mark.slow
@pytest.mark.parametrize("verified", [True, False])
def test_only_a_verified_checkpoint_is_called_the_last_good_one(tmp_path, monkeypatch, verified):
    """A resumed run whose loss turns NaN before it writes anything names the checkpoint it resumed, when that
    file's digest was checked; a file that carries no digest (re-saved by plain ``torch.save``) is never called
    good. (The loss turns NaN at the resumed run's first step.)"""
    registry = Registry([TurnsNanPlugin()])
    criterion = {"name": "turns_nan", "args": {}}
    first = extractor_training_pipeline(
        tiny_config(tmp_path, max_epochs=1, criterion=criterion, logs_folder="run"), registry=registry
    )
    if not verified:
        torch.save(torch.load(first.last_checkpoint, weights_only=True), first.last_checkpoint)
    monkeypatch.setattr(TurnsNan, "nan", True)
    cfg = tiny_config(tmp_path, max_epochs=2, criterion=criterion, resume=str(first.last_checkpoint))
    with pytest.raises(NonFiniteLossError) as caught:
        extractor_training_pipeline(cfg, registry=registry)
    good = str(first.last_checkpoint) if verified else "none written yet"
    assert str(caught.value).endswith(f"; last good checkpoint: {good}")
