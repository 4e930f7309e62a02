"""Runs that survive: a run killed after epoch 1 and resumed from its last.ckpt ends exactly as the
uninterrupted run, in a new run directory, and nothing an earlier run wrote is overwritten."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest
import torch

from oml_core.lightning.pipelines.train import extractor_training_pipeline
from oml_core.registry import ConfigError

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from tiny_training import tiny_config  # noqa: E402


def digests(run_dir: Path) -> dict[str, str]:
    """The md5 of every file under ``run_dir``."""
    return {
        str(path.relative_to(run_dir)): hashlib.md5(path.read_bytes()).hexdigest()
        for path in sorted(run_dir.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(autouse=True)
def _mock_dataset_cache(oml_cache_dir, monkeypatch):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))


def test_a_resumed_run_ends_as_the_uninterrupted_one_in_a_new_directory(tmp_path):
    """The random augmentation (a flip) and the balance sampler draw from the global RNG and the sampler's
    generator: both must come back from the checkpoint for the second epoch to be the same."""
    straight = extractor_training_pipeline(tiny_config(tmp_path / "straight", max_epochs=2))
    killed = extractor_training_pipeline(tiny_config(tmp_path / "runs", max_epochs=1, logs_folder="run"))
    assert killed.run_dir == tmp_path / "runs" / "run"
    written_by_killed = digests(killed.run_dir)
    assert {"checkpoints/best.ckpt", "checkpoints/last.ckpt"} <= set(written_by_killed)

    resumed = extractor_training_pipeline(
        tiny_config(tmp_path / "runs", max_epochs=2, logs_folder="run", resume=str(killed.last_checkpoint))
    )
    assert resumed.run_dir == tmp_path / "runs" / "run_1"  # the same logs_folder: a new directory
    assert resumed.last_checkpoint == resumed.run_dir / "checkpoints" / "last.ckpt"
    assert digests(killed.run_dir) == written_by_killed

    expected = torch.load(straight.last_checkpoint, weights_only=True)
    got = torch.load(resumed.last_checkpoint, weights_only=True)
    assert (
        (got["epoch"], got["global_step"]) == (expected["epoch"], expected["global_step"]) == (1, 4)
    )  # written at the end of epoch 1 (0-based, Lightning's convention), after 2 epochs of 2 steps
    assert expected["state_dict"].keys() == got["state_dict"].keys()
    for key, value in expected["state_dict"].items():
        assert torch.equal(got["state_dict"][key], value), key
    assert resumed.metrics == straight.metrics
    assert resumed.metrics != killed.metrics


def test_resume_from_a_missing_checkpoint_fails_at_once(tmp_path):
    missing = tmp_path / "nowhere" / "last.ckpt"
    with pytest.raises(ConfigError, match=f"^resume: the checkpoint '{missing}' does not exist$"):
        extractor_training_pipeline(tiny_config(tmp_path, resume=str(missing)))
    assert not (tmp_path / "nowhere").exists() and list(tmp_path.iterdir()) == []
