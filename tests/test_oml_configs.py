"""OML 4.0's pipeline configs run unchanged through ``oml``: configs shaped like OML's own (its test configs and
``train_cub.yaml``: no ``postfix``, a ``defaults:`` list, a ``hydra:`` section searching ``pkg://oml.configs``,
user variables such as ``hydra_dir`` and ``extractor_weights``, OML's optional keys left out), with only the
paths pointed at the mock dataset and the sizes made small; and the rules for keys a pipeline does not know."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from oml_core.cli import main
from oml_core.config.typed import validate_config
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.registry import ConfigError

TRAIN = "extractor_training_pipeline"
#: OML's tests/test_runs/test_pipelines/configs/train.yaml, on one CPU device, a ResNet-18 and 32 px images.
OML_TRAIN = """
seed: 42
precision: 32
accelerator: cpu
devices: 1
find_unused_parameters: True

dataset_root: {root}
dataframe_name: df.csv
logs_root: logs

num_workers: 0
cache_size: 10

transforms_train:
  name: augs_torch
  args:
    im_size: 32

transforms_val:
  name: norm_resize_torch
  args:
    im_size: 32

criterion:
  name: arcface
  args:
    smoothing_epsilon: 0
    m: 0.4
    s: 64
    in_features: 512
    num_classes: 16

defaults:
  - optimizer: sgd
  - sampler: balance

extractor:
  name: resnet
  args:
    arch: resnet18
    weights: null
    normalise_features: False
    gem_p: null
    remove_fc: True

scheduling:
  scheduler_interval: epoch
  scheduler_frequency: 1
  scheduler:
    name: multi_step
    args:
      milestones:
        - 1
        - 2
        - 3

bs_val: 32

metric_args:
  metrics_to_exclude_from_visualization: [cmc, precision]
  cmc_top_k: [1, 5]
  map_top_k: [5]
  precision_top_k: [1, 5]
  return_only_overall_category: False
  visualize_only_overall_category: True

log_images: False

metric_for_checkpointing: OVERALL/precision/5

max_epochs: 1
valid_period: 1

logger:
  name: tensorboard
  args:
    save_dir: "."

lightning_trainer_extra_args:
  max_time: "00:12:00:00"  # 12h

tags:
  - mock

hydra:
  run:
    dir: ${{logs_root}}
  searchpath:
   - pkg://oml.configs
  job:
    chdir: True
"""
#: OML's pipelines/features_extraction/extractor_cub/train_cub.yaml, on the mock dataset.
OML_TRAIN_CUB = """
postfix: metric_learning

seed: 42
precision: 32
accelerator: cpu
devices: 1
find_unused_parameters: False

dataframe_name: df_with_bboxes.csv
dataset_root: {root}
logs_root: logs/CUB_200_2011/
logs_folder: ${{now:%Y-%m-%d_%H-%M-%S}}_${{postfix}}

num_workers: 0
cache_size: 0

transforms_train:
  name: augs_torch
  args:
    im_size: 32

transforms_val:
  name: norm_resize_torch
  args:
    im_size: 32

sampler:
  name: balance
  args:
    n_labels: 4
    n_instances: 4

bs_val: 64
max_epochs: 1
valid_period: 5

metric_args:
  metrics_to_exclude_from_visualization: [cmc,]
  cmc_top_k: [1]
  map_top_k: [5]
  fmr_vals: [0.01]
  pcf_variance: [0.5, 0.9, 0.99]
  return_only_overall_category: True
  visualize_only_overall_category: True

log_images: False

metric_for_checkpointing: OVERALL/cmc/1
mode_for_checkpointing: max

extractor:
  name: resnet
  args:
    normalise_features: False
    weights: null
    arch: resnet18
    gem_p: null
    remove_fc: True

criterion:
  name: triplet_with_miner
  args:
    need_logs: True
    margin: null
    reduction: mean
    miner:
      name: triplets_with_memory
      args:
        bank_size_in_batches: 5
        tri_expand_k: 3

optimizer:
  name: adam
  args:
    lr: 1e-5  # if you provide scheduler this parameter will be ignored

scheduling: null

logger:
  name: tensorboard
  args:
    save_dir: "."

hydra_dir: ${{logs_root}}/${{logs_folder}}/

tags:
  - ${{postfix}}
  - cub

hydra:
  run:
    dir: ${{hydra_dir}}
  searchpath:
    - pkg://oml.configs
  job:
    chdir: True
"""
#: OML's tests/test_runs/test_pipelines/configs/validate.yaml (a re-ranker over the extractor's top 3).
OML_VALIDATE = """
accelerator: cpu
devices: 1

dataset_root: {root}
dataframe_name: df_with_bboxes.csv

transforms_val:
  name: norm_resize_torch
  args:
    im_size: 32

logs_root: logs

num_workers: 0

bs_val: 2

postprocessor:
  name: pairwise_reranker
  args:
    top_n: 3
    pairwise_model:
      name: trivial_distance_siamese
      args:
        extractor:
          name: resnet
          args:
            arch: resnet18
            gem_p: 7.0
            remove_fc: True
            normalise_features: False
            weights: null
    num_workers: 0
    batch_size: 4
    verbose: True

metric_args:
  metrics_to_exclude_from_visualization: [cmc,]
  cmc_top_k: [1, 5]
  map_top_k: [5]
  precision_top_k: [1, 5]
  return_only_overall_category: False
  visualize_only_overall_category: True

extractor:
  name: resnet
  args:
    arch: resnet18
    gem_p: null
    remove_fc: True
    normalise_features: False
    weights: {weights}

hydra:
  run:
    dir: ${{logs_root}}
  job:
    chdir: True
"""
#: OML's tests/test_runs/test_pipelines/configs/predict.yaml.
OML_PREDICT = """
precision: 32
accelerator: cpu
devices: 1

data_dir: {images}
save_dir: "."

bs: 4
num_workers: 0

transforms_predict:
  name: norm_resize_torch
  args:
    im_size: 32

extractor:
  name: resnet
  args:
    arch: resnet18
    gem_p: null
    remove_fc: True
    normalise_features: False
    weights: {weights}

hydra:
  run:
    dir: ${{save_dir}}
  searchpath:
   - pkg://oml.configs
  job:
    chdir: True
"""
#: OML's pipelines/postprocessing/pairwise_postprocessing/postprocessor_train.yaml (and its test config).
OML_TRAIN_POSTPROCESSOR = """
postfix: "postprocessing"

seed: 42
precision: 32
accelerator: cpu
devices: 1
find_unused_parameters: False

dataset_root: {root}
logs_root: logs
dataframe_name: df_with_category.csv
logs_folder: ${{now:%Y-%m-%d_%H-%M-%S}}_${{postfix}}

num_workers: 0
cache_size: 50
max_epochs: 1
valid_period: 1

embeddings_cache_dir: ${{logs_root}}

extractor_weights: null

extractor:
  name: resnet
  args:
    arch: resnet18
    gem_p: null
    remove_fc: True
    normalise_features: True
    weights: ${{extractor_weights}}

transforms_extraction:
  name: norm_resize_hypvit_torch
  args:
    im_size: 32
    crop_size: 32

pairwise_model:
  name: concat_siamese
  args:
    mlp_hidden_dims: [16]
    extractor:
      name: resnet
      args:
        arch: resnet18
        gem_p: null
        remove_fc: True
        normalise_features: False
        weights: ${{extractor_weights}}

hard_pairs_mining: True

optimizer:
  name: adam
  args:
    lr: 1e-5

freeze_n_epochs: 1
scheduling:
  scheduler_interval: epoch
  scheduler_frequency: 1
  scheduler:
    name: multi_step
    args:
      gamma: 5e-3
      milestones:
        - ${{freeze_n_epochs}}

sampler:
  name: category_balance
  args:
    n_labels: 2
    n_instances: 2
    n_categories: 1
    resample_labels: True
    weight_categories: True

transforms_train:
  name: augs_hypvit_torch
  args:
    im_size: 32
    min_scale: 0.8

batch_size_inference: 128

postprocessor:
  name: pairwise_reranker
  args:
    top_n: 5
    pairwise_model: ${{pairwise_model}}
    num_workers: 0
    batch_size: ${{batch_size_inference}}
    verbose: True
    use_fp16: True

metric_for_checkpointing: OVERALL/cmc/1
mode_for_checkpointing: max

log_images: False
metric_args:
  cmc_top_k: [1, 5]
  map_top_k: [5]
  return_only_overall_category: False
  visualize_only_overall_category: False

logger:
  name: tensorboard
  args:
    save_dir: "."

tags:
  - mock

hydra_dir: ${{logs_root}}/${{logs_folder}}/

hydra:
  run:
    dir: ${{hydra_dir}}
  searchpath:
   - pkg://oml.configs
  job:
    chdir: True
"""
#: OML's pipelines/postprocessing/pairwise_postprocessing/postprocessor_validate.yaml.
OML_VALIDATE_POSTPROCESSOR = """
accelerator: cpu
precision: 32
devices: 1

dataset_root: {root}
dataframe_name: df.csv

bs_val: 32
num_workers: 0

extractor_weights: null
postprocessor_weights: {weights}

transforms_val:
  name: norm_resize_hypvit_torch
  args:
    im_size: 32
    crop_size: 32

extractor:
  name: resnet
  args:
    arch: resnet18
    gem_p: null
    remove_fc: True
    normalise_features: True
    weights: ${{extractor_weights}}

postprocessor:
  name: pairwise_reranker
  args:
    top_n: 5
    pairwise_model:
      name: concat_siamese
      args:
        mlp_hidden_dims: [16]
        use_tta: False
        weights: ${{postprocessor_weights}}
        extractor:
          name: resnet
          args:
            arch: resnet18
            gem_p: null
            remove_fc: True
            normalise_features: False
            weights: null
    num_workers: ${{num_workers}}
    batch_size: ${{bs_val}}
    verbose: True
    use_fp16: False

metric_args:
  metrics_to_exclude_from_visualization: [cmc,]
  cmc_top_k: [1, 10]
  map_top_k: [5, 10]
  fmr_vals: []
  precision_top_k: []
  pcf_variance: []
  return_only_overall_category: True
  visualize_only_overall_category: True

hydra:
  run:
    dir: ${{logs_root}}
  job:
    chdir: True
"""


def _run(command: str, folder: Path, name: str, text: str) -> None:
    (folder / f"{name}.yaml").write_text(text)
    skip = ["--skip-image-check"] if command == "train" else []
    assert main([command, "--config-path", str(folder), "--config-name", name, *skip]) == 0


@pytest.fixture()
def oml_world(tmp_path, oml_cache_dir, monkeypatch):
    """The mock dataset's root; the working dir is a fresh folder with a ``configs`` folder."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    return get_mock_dataset_root(oml_cache_dir)


@pytest.mark.slow
def test_omls_train_validate_and_predict_configs_run_unchanged(oml_world, tmp_path, capsys):
    configs = tmp_path / "configs"
    _run("train", configs, "train", OML_TRAIN.format(root=oml_world))
    (run_dir,) = (tmp_path / "logs").iterdir()
    assert run_dir.name.count("_") == 1  # no postfix: <date>_<time>
    best = run_dir / "checkpoints" / "best.ckpt"
    assert best.is_file()
    out = capsys.readouterr().out
    assert "OVERALL/precision/5" in out and f"Best checkpoint:  {best} (epoch 1)" in out

    _run("validate", configs, "validate", OML_VALIDATE.format(root=oml_world, weights=best))
    assert "OVERALL/cmc/1" in capsys.readouterr().out
    _run("predict", configs, "predict", OML_PREDICT.format(images=oml_world / "images", weights=best))
    assert (tmp_path / "predictions.json").is_file()


@pytest.mark.slow
def test_a_config_shaped_like_omls_train_cub_runs_unchanged(oml_world, tmp_path, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter(
            "error"
        )  # hydra_dir, used by the hydra section, is no unknown key to warn about
        _run("train", tmp_path / "configs", "train_cub", OML_TRAIN_CUB.format(root=oml_world))
    (run_dir,) = (tmp_path / "logs" / "CUB_200_2011").iterdir()
    assert run_dir.name.endswith("_metric_learning")  # logs_folder: ${now:...}_${postfix}
    assert (
        run_dir / "checkpoints" / "best.ckpt"
    ).is_file()  # valid_period 5 > max_epochs 1: validated anyway
    assert "OVERALL/fnmr@fmr/0.01" in capsys.readouterr().out


@pytest.mark.slow
def test_omls_postprocessor_configs_run_unchanged(oml_world, tmp_path, capsys):
    configs = tmp_path / "configs"
    _run(
        "train-postprocessor", configs, "postprocessor_train", OML_TRAIN_POSTPROCESSOR.format(root=oml_world)
    )
    (best,) = (tmp_path / "logs").rglob("best.ckpt")
    capsys.readouterr()
    text = OML_VALIDATE_POSTPROCESSOR.format(root=oml_world, weights=best)
    _run("validate", configs, "postprocessor_validate", text)
    assert "OVERALL/cmc/10" in capsys.readouterr().out


BASE = {
    "seed": 1,
    "dataframe_name": "df.csv",
    "transforms_train": {"name": "augs_flip", "args": {}},
    "transforms_val": {"name": "norm_resize", "args": {}},
    "max_epochs": 1,
    "metric_for_checkpointing": "OVERALL/cmc/1",
    "optimizer": {"name": "adam", "args": {"lr": 0.1}},
    "bs_val": 4,
    "bs_train": 4,
    "extractor": {"name": "resnet", "args": {}},
    "criterion": {"name": "triplet", "args": {}},
}


def test_omls_optional_keys_are_optional_with_omls_defaults():
    config = validate_config(BASE, TRAIN)
    assert (config.postfix, config.logs_root, config.show_dataset_warnings) == ("", "logs", True)
    assert (config.cache_size, config.freeze_n_epochs, config.log_images, config.precision) == (
        0,
        0,
        False,
        32,
    )
    assert config.mode_for_checkpointing == "max" and config.scheduling is None and config.logger is None


def test_a_misspelt_key_is_an_error_naming_the_known_one():
    with pytest.raises(ConfigError, match="unknown config key 'valid_perod'; did you mean 'valid_period'"):
        validate_config({**BASE, "valid_perod": 2}, TRAIN)


def test_a_users_variable_is_ignored_silently_when_an_interpolation_uses_it():
    from omegaconf import OmegaConf

    cfg = OmegaConf.create(
        {
            **BASE,
            "extractor_weights": None,
            "extractor": {"name": "resnet", "args": {"weights": "${extractor_weights}"}},
            "hydra_dir": "${logs_root}/x",
            "hydra": {"run": {"dir": "${hydra_dir}"}},
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = validate_config(cfg, TRAIN)
    assert config.extractor.args == {"weights": None}


def test_an_unknown_key_nothing_uses_is_ignored_with_a_warning_naming_it():
    with pytest.warns(
        UserWarning, match="the config key 'my_note' is not one of the pipeline's; it is ignored"
    ):
        validate_config({**BASE, "my_note": "first try"}, TRAIN)
    with pytest.warns(UserWarning, match="defaults list is ignored: only hydra's composition applies it"):
        validate_config({**BASE, "defaults": [{"optimizer": "sgd"}]}, TRAIN)
