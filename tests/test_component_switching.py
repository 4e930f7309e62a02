"""Switching components from the command line: ``GROUP@KEY=OPTION`` for every registered name of every kind
(composition and construction, parametrised from the registry), ``KEY={...}`` and ``KEY.args={...}``
(replacement, never a merge), ``KEY.name=OTHER`` (OTHER's default config, never two components' arguments),
and one training step with a switched component of every kind a pipeline takes."""

from __future__ import annotations

import re

import pytest
import torch
from omegaconf import OmegaConf

from oml_core import hookimpl
from oml_core.cli import main
from oml_core.config.compose import compose_config
from oml_core.registry import KINDS, ConfigError, Registry, UnknownNameError
from oml_core.utils.imports import resolve

TRAIN = "extractor_training_pipeline"
TRAIN_POSTPROCESSOR = "postprocessor_training_pipeline"
VALIDATE = "extractor_validation_pipeline"
SCHEDULING = (
    "scheduling={scheduler: {name: step, args: {}}, scheduler_interval: epoch, scheduler_frequency: 1}"
)
LAMBDA_SCHEDULING = "scheduling={scheduler: {name: lambda, args: {lr_lambda: constant}}}"
#: The kinds whose components are ``{name, args}`` specs, with the pipeline and key a spec of them goes to and
#: the overrides that make that key exist.
SPEC_KINDS = {
    "extractor": (TRAIN, "extractor", []),
    "loss": (TRAIN, "criterion", []),
    "miner": (TRAIN, "criterion.args.miner", []),
    "sampler": (TRAIN, "sampler", []),
    "optimizer": (TRAIN, "optimizer", []),
    "scheduler": (TRAIN, "scheduling.scheduler", [SCHEDULING]),
    "lr_function": (TRAIN, "scheduling.scheduler.args.lr_lambda", [LAMBDA_SCHEDULING]),
    "transforms": (TRAIN, "transforms_train", []),
    "logger": (TRAIN, "logger", []),
    "pairwise_model": (TRAIN_POSTPROCESSOR, "pairwise_model", []),
    "pairs_miner": (TRAIN_POSTPROCESSOR, "pairs_miner", []),
    "postprocessor": (VALIDATE, "postprocessor", []),
    "knn_backend": (VALIDATE, "metric_args.knn_backend", []),
    "dataset": (TRAIN, "dataset", []),
}
#: The kinds that are no ``{name, args}`` spec of one key: metrics are asked for by ``<name>_top_k``, zoo entries
#: by key, commands by ``oml NAME``, callbacks in the list ``callbacks``.
NOT_SPEC_KINDS = {"retrieval_metric", "pretrained", "command", "callback"}
#: Kinds whose every default config the plugins' own tests build (and use: train a step, log offline, ...):
#: ``oml_models`` (extractors, pairwise models), ``oml_losses`` and ``oml_pml`` (losses), ``oml_loggers``.
#: Building them here again would double the slowest part (ViTs, logger libraries); composition is checked.
BUILT_BY_THE_PLUGINS_TESTS = {"extractor", "pairwise_model", "loss", "logger"}
REGISTRY = Registry()
LABELS = [0, 0, 1, 1, 2, 2, 3, 3] * 4


def _plain(cfg, key):
    return OmegaConf.to_container(OmegaConf.select(cfg, key), resolve=True)


def _runtime(kind: str) -> dict:
    """The runtime arguments a pipeline gives a component of ``kind`` when it builds it."""
    if kind == "optimizer":
        return {"params": [torch.nn.Parameter(torch.zeros(2))]}
    if kind == "scheduler":
        return {"optimizer": torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)}
    return {}


def _sampler_runtime(spec: dict) -> dict:
    """What the training pipelines offer a sampler: the labels, their categories, a generator."""
    offers = {
        "labels": lambda: LABELS,
        "label2category": lambda: {0: "a", 1: "a", 2: "b", 3: "b"},
        "generator": lambda: torch.Generator().manual_seed(0),
    }
    return REGISTRY.offered("sampler", spec, offers)


def test_the_spec_kinds_are_every_kind_but_metrics_and_the_zoo():
    assert set(SPEC_KINDS) | NOT_SPEC_KINDS == set(KINDS)


def _switches():
    for kind, (pipeline, key, extra) in SPEC_KINDS.items():
        for name in REGISTRY.names(kind):
            yield pytest.param(kind, name, pipeline, key, extra, id=f"{kind}@{key}={name}")


@pytest.mark.parametrize("kind, name, pipeline, key, extra", list(_switches()))
def test_group_at_key_composes_the_default_config_whole_and_it_builds(
    kind, name, pipeline, key, extra, tmp_path
):
    group_override = f"{kind}@{key}={name}"
    cfg = compose_config(pipeline, [*extra, group_override], registry=REGISTRY)
    expected = REGISTRY.default_config(kind, name)
    assert expected is not None, f"{kind} {name!r} has no default config"
    assert _plain(cfg, key) == expected  # whole: none of the former component's arguments

    if kind in BUILT_BY_THE_PLUGINS_TESTS:
        return
    runtime = _sampler_runtime(expected) if kind == "sampler" else _runtime(kind)
    built = REGISTRY.build(kind, expected, **runtime)
    interface = KINDS[kind].interface
    assert built is not None and (interface is None or isinstance(built, resolve(interface)))
    if kind == "optimizer":
        assert built.param_groups[0]["lr"] == expected["args"]["lr"]


def test_an_inline_spec_replaces_the_component_whole():
    cfg = compose_config(TRAIN, ["extractor={name: tiny_conv, args: {feat_dim: 8}}"], registry=REGISTRY)
    assert _plain(cfg, "extractor") == {"name": "tiny_conv", "args": {"feat_dim": 8}}
    cfg = compose_config(TRAIN, ["extractor.args={feat_dim: 32}"], registry=REGISTRY)
    assert _plain(cfg, "extractor") == {"name": "resnet", "args": {"feat_dim": 32}}
    cfg = compose_config(TRAIN, ["metric_args={cmc_top_k: [2]}"], registry=REGISTRY)
    assert _plain(cfg, "metric_args") == {"cmc_top_k": [2]}


def test_another_name_takes_that_components_default_config_then_the_overrides_under_it():
    cfg = compose_config(TRAIN, ["extractor.args.feat_dim=16", "extractor.name=tiny_conv"], registry=REGISTRY)
    assert _plain(cfg, "extractor") == {
        "name": "tiny_conv",
        "args": {"weights": None, "feat_dim": 16, "normalise_features": True},  # weights: every extractor's
    }
    # a nested spec likewise
    cfg = compose_config(TRAIN, ["criterion.args.miner.name=hard_triplets"], registry=REGISTRY)
    assert _plain(cfg, "criterion.args.miner") == REGISTRY.default_config("miner", "hard_triplets")
    # the same name: a plain override, the arguments kept
    cfg = compose_config(TRAIN, ["extractor.name=resnet", "extractor.args.arch=resnet34"], registry=REGISTRY)
    assert _plain(cfg, "extractor")["args"] == {
        "weights": None,
        "arch": "resnet34",
        "gem_p": None,
        "remove_fc": True,
        "normalise_features": True,
    }


def test_another_name_without_a_default_config_is_refused_saying_how_to_switch():
    class Bare:
        @hookimpl
        def oml_register_extractors(self, register):
            register("bare_net", "torch.nn:Identity")

    registry = Registry([Bare()])
    with pytest.raises(ConfigError) as error:
        compose_config(TRAIN, ["extractor.name=bare_net"], registry=registry)
    assert str(error.value) == (
        "extractor.name=bare_net: extractor 'bare_net' has no default config, and 'resnet''s arguments do not "
        "fit it; give the whole spec: 'extractor={name: bare_net, args: {...}}'"
    )
    with pytest.raises(
        UnknownNameError, match=re.escape("Unknown extractor 'resnett'. Did you mean: resnet")
    ):
        compose_config(TRAIN, ["extractor.name=resnett"], registry=registry)


def test_an_oml_config_with_a_defaults_list_and_oml_search_path_composes(tmp_path):
    (tmp_path / "train.yaml").write_text(
        "defaults:\n  - optimizer: sgd\n  - sampler: balance\n"
        "max_epochs: 2\n"
        "hydra:\n  searchpath:\n    - pkg://oml.configs\n  job:\n    chdir: True\n"
    )
    cfg = compose_config("train", ["optimizer.args.lr=0.5"], config_path=str(tmp_path), registry=REGISTRY)
    assert _plain(cfg, "optimizer") == {"name": "sgd", "args": {"lr": 0.5, "momentum": 0.9}}
    assert _plain(cfg, "sampler") == REGISTRY.default_config("sampler", "balance")


FAST = [
    "max_epochs=1",
    "check_images=false",
    "validate_before_training=false",
    "lightning_trainer_extra_args.enable_progress_bar=false",
    "+lightning_trainer_extra_args.limit_train_batches=1",
    "transforms_val.args.im_size=32",
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "switches",
    [
        pytest.param(
            [
                "extractor.name=tiny_conv",
                "miner@criterion.args.miner=hard_triplets",
                "optimizer@optimizer=sgd",
                "sampler@sampler=category_balance",
                "sampler.args.n_categories=2",
                "dataframe_name=df_with_category.csv",
                SCHEDULING,
                "scheduler@scheduling.scheduler=cosine_annealing",
                "transforms@transforms_train=augs_torch",
                "transforms_train.args.im_size=32",
                "logger@logger=mlflow",
            ],
            id="extractor-miner-optimizer-sampler-scheduler-transforms-logger",
        ),
        pytest.param(
            [
                "extractor.name=tiny_conv",
                "loss@criterion=arcface",
                "criterion.args.in_features=32",
                "criterion.args.num_classes=16",
                "transforms_train.args.im_size=32",
            ],
            id="loss",
        ),
    ],
)
def test_one_training_step_with_switched_components(switches, tmp_path, oml_cache_dir, monkeypatch, capsys):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    monkeypatch.chdir(tmp_path)
    assert main(["train", f"logs_root={tmp_path / 'logs'}", *FAST, *switches]) == 0
    (run_dir,) = (tmp_path / "logs").iterdir()
    assert (run_dir / "checkpoints" / "best.ckpt").is_file()
    state = torch.load(run_dir / "checkpoints" / "best.ckpt", map_location="cpu", weights_only=True)
    assert any(key.startswith("extractor.backbone.") for key in state["state_dict"])  # tiny_conv's layers
    assert "Best checkpoint:" in capsys.readouterr().out


@pytest.mark.slow
def test_postprocessing_with_switched_pairwise_model_pairs_miner_and_postprocessor(
    tmp_path, oml_cache_dir, monkeypatch
):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    monkeypatch.chdir(tmp_path)
    common = ["lightning_trainer_extra_args.enable_progress_bar=false", f"logs_root={tmp_path / 'logs'}"]
    train = [
        "max_epochs=1",
        "+lightning_trainer_extra_args.limit_train_batches=1",
        "pairwise_model@pairwise_model=concat_siamese",  # its default config: a ViT, switched to tiny_conv
        "pairwise_model.args.extractor.name=tiny_conv",
        "pairwise_model.args.mlp_hidden_dims=[16]",
        "pairs_miner@pairs_miner=pairs",
        "transforms_train.args.im_size=32",
        "transforms_extraction.args.im_size=32",
    ]
    assert main(["train-postprocessor", *common, *train]) == 0
    validate = ["postprocessor@postprocessor=adaptive_thresholding", "transforms_val.args.im_size=32"]
    assert main(["validate", *common, *validate]) == 0
