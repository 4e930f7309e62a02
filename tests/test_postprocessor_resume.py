"""The post-processor's training pipeline resumes as the extractor's does: in its own run folder, to the
weights and metrics of the uninterrupted run, and a resume that changes the run is refused in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf

from oml_core.config.compose import compose_config
from oml_core.config.schemas import PostprocessorTrainingConfig
from oml_core.config.typed import validate_config
from oml_core.lightning.callbacks.run_record import plain
from oml_core.lightning.pipelines.train_postprocessor import postprocessor_training_pipeline
from oml_core.registry import ConfigError, Registry

TINY_EXTRACTOR = {"name": "tiny_conv", "args": {"feat_dim": 16}}


def tiny_postprocessor_config(logs_root: Path, **overrides: Any) -> dict[str, Any]:
    """The default config of ``oml train-postprocessor`` at 32 px with the example plugin's ``tiny_conv`` as the
    extractor and inside the siamese (no embeddings cache)."""
    cfg = compose_config(
        "postprocessor_training_pipeline",
        [
            f"logs_root={logs_root}",
            "lightning_trainer_extra_args.enable_progress_bar=false",
            "transforms_train.args.im_size=32",
            "transforms_extraction.args.im_size=32",
            "embeddings_cache_dir=null",
        ],
        None,
        Registry(),
    )
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    plain["extractor"] = TINY_EXTRACTOR
    plain["pairwise_model"] = {"name": "trivial_distance_siamese", "args": {"extractor": TINY_EXTRACTOR}}
    del plain["postprocessor"]["args"]["pairwise_model"]  # the model being trained
    return {**plain, **overrides}


@pytest.mark.slow
def test_a_resumed_postprocessor_run_goes_on_in_its_folder_and_ends_as_the_uninterrupted_one(
    tmp_path, oml_cache_dir, monkeypatch
):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    straight = postprocessor_training_pipeline(tiny_postprocessor_config(tmp_path, max_epochs=2))
    first = postprocessor_training_pipeline(
        tiny_postprocessor_config(tmp_path, max_epochs=1, logs_folder="run")
    )
    last = first.run_dir / "checkpoints" / "last.ckpt"
    before = last.read_bytes()
    first_state = torch.load(last, weights_only=True)
    assert first_state["oml_run"]["epochs_done"] == 1
    with pytest.raises(ConfigError, match=r"in hard_pairs_mining \(True -> False\)"):
        postprocessor_training_pipeline(
            tiny_postprocessor_config(tmp_path, max_epochs=2, resume=str(last), hard_pairs_mining=False)
        )
    assert last.read_bytes() == before

    resumed = postprocessor_training_pipeline(
        tiny_postprocessor_config(tmp_path, max_epochs=2, resume=str(last))
    )
    assert resumed.run_dir == first.run_dir
    expected = torch.load(straight.last_checkpoint, weights_only=True)
    got = torch.load(resumed.last_checkpoint, weights_only=True)
    assert got["global_step"] == expected["global_step"] == 2 * first_state["global_step"]
    assert expected["state_dict"].keys() == got["state_dict"].keys()
    assert all(torch.equal(got["state_dict"][k], v) for k, v in expected["state_dict"].items())
    assert resumed.metrics == straight.metrics
    assert resumed.best_epoch == straight.best_epoch


@pytest.mark.slow
def test_the_typed_config_trains_the_postprocessor_as_the_dict_does(tmp_path, oml_cache_dir, monkeypatch):
    """The config enters once: the object ``validate_config`` makes of the dict trains the same weights to the same
    metrics, and the logger gets every key of the typed config either way."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    from_dict = postprocessor_training_pipeline(
        tiny_postprocessor_config(tmp_path, max_epochs=1, logs_folder="a")
    )
    config = validate_config(
        tiny_postprocessor_config(tmp_path, max_epochs=1, logs_folder="b"), "postprocessor_training_pipeline"
    )
    assert isinstance(config, PostprocessorTrainingConfig)
    from_object = postprocessor_training_pipeline(config)
    assert from_object.run_dir == tmp_path / "b"
    assert from_object.metrics_before == from_dict.metrics_before and from_object.metrics == from_dict.metrics
    expected = torch.load(from_dict.last_checkpoint, weights_only=True)["state_dict"]
    got = torch.load(from_object.last_checkpoint, weights_only=True)["state_dict"]
    assert expected.keys() == got.keys() and all(torch.equal(got[k], v) for k, v in expected.items())
    logged = OmegaConf.to_container(OmegaConf.load(from_object.log_dir / "config.yaml"))
    assert logged == plain(config)
    assert OmegaConf.to_container(OmegaConf.load(from_dict.log_dir / "config.yaml")) == {
        **logged,
        "logs_folder": "a",
    }
