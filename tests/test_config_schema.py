"""Every config value is checked against its pipeline's schema (types and ranges) and every component argument
against its factory's annotations before anything is built; the first problem is one line naming the key, the
value and what is expected."""

from __future__ import annotations

import subprocess
import sys
import warnings
from dataclasses import fields, replace
from typing import Any

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from oml_core.config.compose import compose_config
from oml_core.config.rules import ComponentSpec
from oml_core.config.schemas import (
    PRECISION,
    SCHEMA_GROUP,
    SCHEMAS,
    ExtractorTrainingConfig,
    SchedulingConfig,
    optional_defaults,
    required_keys,
)
from oml_core.config.typed import check_component_arguments, validate_config
from oml_core.lightning.callbacks.run_record import plain as as_plain
from oml_core.lightning.pipelines import extractor_training_pipeline, extractor_validation_pipeline
from oml_core.registry import ConfigError, Registry

TRAIN = "extractor_training_pipeline"
VALIDATE = "extractor_validation_pipeline"
PREDICT = "extractor_prediction_pipeline"
TRAIN_POSTPROCESSOR = "postprocessor_training_pipeline"
VALIDATE_POSTPROCESSOR = "postprocessor_validation_pipeline"
STEP = "{scheduler: {name: step, args: {step_size: 1}}"
TRAIN_KEYS = ", ".join(sorted(f.name for f in fields(ExtractorTrainingConfig)))


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry()


#: A value of :func:`composed`'s changes: the key is removed.
DELETE = object()


def composed(pipeline: str, registry: Registry, *changes: str | tuple[str, Any]) -> dict[str, Any]:
    """The default config of ``pipeline`` with hydra overrides (as ``oml <command>`` composes it) and changes
    that hydra cannot make (a mapping replaced by a list, a key removed): ``(dotted key, value or DELETE)``."""
    overrides = [change for change in changes if isinstance(change, str)]
    cfg = OmegaConf.to_container(compose_config(pipeline, overrides, registry=registry), resolve=True)
    for change in changes:
        if isinstance(change, tuple):
            *path, last = change[0].split(".")
            where = cfg
            for key in path:
                where = where[key]
            if change[1] is DELETE:
                del where[last]
            else:
                where[last] = change[1]
    return cfg


def check(pipeline: str, registry: Registry, cfg: Any) -> None:
    """What a pipeline checks before any work: the schema, then the components' arguments."""
    check_component_arguments(validate_config(cfg, pipeline), registry)


@pytest.mark.parametrize("pipeline", list(SCHEMAS))
def test_the_default_config_of_every_pipeline_is_valid(pipeline, registry):
    cfg = compose_config(pipeline, [], registry=registry)
    config = validate_config(cfg, pipeline)  # a DictConfig with interpolations works as well as a dict
    assert isinstance(config, SCHEMAS[pipeline]) and config.pipeline == pipeline
    check_component_arguments(config, registry)
    plain = OmegaConf.to_container(cfg, resolve=True)
    for f in fields(config):
        value = getattr(config, f.name)
        if isinstance(value, SchedulingConfig):  # a nested section compares as the mapping it was given as
            value = as_plain(value)
        assert value == plain.get(f.name, optional_defaults(pipeline).get(f.name)), f.name
    again = validate_config(config, pipeline)  # the typed config enters as the dict does
    assert again == config and again is not config


def test_a_typed_config_built_by_hand_is_checked_as_a_dict_is(registry):
    config = validate_config(composed(TRAIN, registry), TRAIN)
    assert isinstance(config, ExtractorTrainingConfig)
    with pytest.raises(ConfigError, match=r"^max_epochs: expected a positive int, got 0$"):
        validate_config(replace(config, max_epochs=0), TRAIN)
    with pytest.raises(
        ConfigError, match=r"^scheduling.scheduler_interval: expected 'step' or 'epoch', got 'x'$"
    ):
        validate_config(
            replace(config, scheduling=SchedulingConfig(scheduler="step", scheduler_interval="x")), TRAIN
        )
    by_hand = replace(config, extractor="resnet", scheduling=SchedulingConfig(scheduler="step"), tags="one")
    checked = validate_config(by_hand, TRAIN)
    assert checked.extractor == ComponentSpec(name="resnet") and checked.tags == ["one"]
    assert checked.scheduling == SchedulingConfig(scheduler=ComponentSpec(name="step"))
    prediction = validate_config(
        composed(PREDICT, registry), PREDICT
    )  # another pipeline's: its keys are checked
    with (
        warnings.catch_warnings(record=True) as caught,
        pytest.raises(
            ConfigError, match=rf"^{TRAIN}: unknown config key 'transforms_predict'; did you mean 'tr"
        ),
    ):
        warnings.simplefilter("always")
        validate_config(prediction, TRAIN)
    assert [str(warning.message) for warning in caught] == [
        f"{TRAIN}: the config key {key!r} is not one of the pipeline's; it is ignored"
        for key in ("data_dir", "save_dir", "predictions_format", "bs")
    ]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("max_epochs=abc", "max_epochs: expected a positive int, got 'abc'"),
        ("max_epochs=-3", "max_epochs: expected a positive int, got -3"),
        ("max_epochs=true", "max_epochs: expected a positive int, got True"),
        ("max_epochs=3.0", "max_epochs: expected a positive int, got 3.0"),
        ("seed=abc", "seed: expected an int in [0, 4294967295], got 'abc'"),
        ("seed=-1", "seed: expected an int in [0, 4294967295], got -1"),
        ("bs_val=-1", "bs_val: expected a positive int, got -1"),
        ("bs_val=0", "bs_val: expected a positive int, got 0"),
        ("valid_period=0", "valid_period: expected a positive int, got 0"),
        ("num_workers=-1", "num_workers: expected a non-negative int, got -1"),
        ("freeze_n_epochs=-1", "freeze_n_epochs: expected a non-negative int, got -1"),
        ("bs_train=0", "bs_train: expected a positive int or null, got 0"),
        ("checkpoint_every_n_steps=0", "checkpoint_every_n_steps: expected a positive int or null, got 0"),
        ("metric_args.cmc_top_k=[0]", "metric_args.cmc_top_k: expected a list of positive ints, got [0]"),
        ("metric_args.cmc_top_k=5", "metric_args.cmc_top_k: expected a list of positive ints, got 5"),
        (
            "+metric_args.recall_top_k=[1,-5]",
            "metric_args.recall_top_k: expected a list of positive ints, got [1, -5]",
        ),
        (
            "+metric_args.fmr_vals=[0.1,2]",
            "metric_args.fmr_vals: expected a list of numbers in [0, 1], got [0.1, 2]",
        ),
        (
            "metric_args.return_only_overall_category=yes",
            "metric_args.return_only_overall_category: expected bool, got 'yes'",
        ),
        (
            "+metric_args.cmc_topk=[1]",
            "metric_args: unknown config key 'cmc_topk'; did you mean 'cmc_top_k'? (known keys: cmc_top_k, distance, "
            "fmr_vals, fnmr_per_category, knn_backend, map_top_k, metric_kwargs, "
            "metrics_to_exclude_from_visualization, pcf_variance, precision_top_k, return_only_overall_category, "
            "shard_gallery, verbose, visualize_only_overall_category)",
        ),
        (("metric_args", [1]), "metric_args: expected a mapping of EmbeddingMetrics' arguments, got [1]"),
        (
            "devices=0",
            "devices: expected a positive int, a non-empty list of non-negative ints or null, got 0",
        ),
        (
            "devices=[]",
            "devices: expected a positive int, a non-empty list of non-negative ints or null, got []",
        ),
        ("precision=17", f"precision: expected {PRECISION.expected}, got 17"),
        ("accelerator=3", "accelerator: expected a string or null, got 3"),
        ("postfix=[a]", "postfix: expected a string, got ['a']"),
        ("find_unused_parameters=1", "find_unused_parameters: expected true or false, got 1"),
        ("gather_across_devices=1", "gather_across_devices: expected true or false, got 1"),
        ("log_images=no", "log_images: expected true or false, got 'no'"),
        ("logs_root=null", "logs_root: expected a path, got None"),
        ("tags=3", "tags: expected a list, a string or null, got 3"),
        ("mode_for_checkpointing=maximum", "mode_for_checkpointing: expected 'min' or 'max', got 'maximum'"),
        ("nan_policy=ignore", "nan_policy: expected 'stop' or 'skip_batch', got 'ignore'"),
        (
            ("lightning_trainer_extra_args", [1]),
            "lightning_trainer_extra_args: expected a mapping or null, got [1]",
        ),
        (
            "+max_epoch=3",
            f"{TRAIN}: unknown config key 'max_epoch'; did you mean 'max_epochs'? (known keys: {TRAIN_KEYS})",
        ),
        ("~max_epochs", f"{TRAIN}: the config lacks the key(s) ['max_epochs']"),
        ("max_epochs=???", f"{TRAIN}: the config lacks the key(s) ['max_epochs']"),
        ("sampler=null", f"{TRAIN}: with sampler null the config needs bs_train"),
        (
            "+criterion.arg=1",
            "criterion: unknown config key 'arg'; did you mean 'args'? (known keys: args, name)",
        ),
        ("criterion.name=3", "criterion.name: expected a string, got 3"),
        (("criterion.args", [1]), "criterion.args: expected a mapping, got [1]"),
        ("~criterion.name", "criterion: the config lacks the key(s) ['name']"),
        (
            f"scheduling={STEP}, scheduler_interval: batch}}",
            "scheduling.scheduler_interval: expected 'step' or 'epoch', got 'batch'",
        ),
        (
            f"scheduling={STEP}, scheduler_frequency: 0}}",
            "scheduling.scheduler_frequency: expected a positive int, got 0",
        ),
        (
            f"scheduling={STEP}, interval: epoch}}",
            "scheduling: unknown config key 'interval'; did you mean 'scheduler_interval'? (known keys: "
            "monitor_metric, scheduler, scheduler_frequency, scheduler_interval)",
        ),
        ("scheduling={scheduler_interval: epoch}", "scheduling: the config lacks the key(s) ['scheduler']"),
        (
            "scheduling=1",
            "scheduling: expected null or a mapping of scheduler, scheduler_interval, scheduler_frequency and "
            "monitor_metric, got 1",
        ),
        # the components' arguments, against their factories' annotations
        ("optimizer.args.lr=abc", "optimizer.args.lr: expected float or Tensor, got 'abc'"),
        ("criterion.args.margin=abc", "criterion.args.margin: expected float or None, got 'abc'"),
        ("criterion.args.need_logs=abc", "criterion.args.need_logs: expected bool, got 'abc'"),
        (
            "+criterion.args.miner.args.max_output_triplets=many",
            "criterion.args.miner.args.max_output_triplets: expected int, got 'many'",
        ),
        ("extractor.args.arch=3", "extractor.args.arch: expected str, got 3"),
        ("sampler.args.n_labels=abc", "sampler.args.n_labels: expected int, got 'abc'"),
        ("transforms_val.args.im_size=big", "transforms_val.args.im_size: expected int, got 'big'"),
        (
            "scheduling={scheduler: {name: step, args: {step_size: soon}}}",
            "scheduling.scheduler.args.step_size: expected int, got 'soon'",
        ),
    ],
)
def test_a_bad_training_value_is_one_line_naming_the_key(registry, override, message):
    cfg = composed(TRAIN, registry, override)
    with pytest.raises(ConfigError) as error:
        check(TRAIN, registry, cfg)
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("pipeline", "override", "message"),
    [
        (VALIDATE, "bs_val=0", "bs_val: expected a positive int, got 0"),
        (
            VALIDATE,
            ("postprocessor", 3),
            "postprocessor: expected a {name, args} spec of a postprocessor or null, got 3",
        ),
        (VALIDATE, "cache_size=-1", "cache_size: expected a non-negative int, got -1"),
        (
            VALIDATE,
            "metric_args.pcf_variance=[1.5]",
            "metric_args.pcf_variance: expected a list of numbers in [0, 1], got [1.5]",
        ),
        (VALIDATE, "extractor.args.gem_p=abc", "extractor.args.gem_p: expected float or None, got 'abc'"),
        (PREDICT, "bs=0", "bs: expected a positive int, got 0"),
        (PREDICT, "data_dir=3", "data_dir: expected a path or null, got 3"),
        (
            PREDICT,
            "+save_dirr=out",
            f"{PREDICT}: unknown config key 'save_dirr'; did you mean 'save_dir'? (known keys: "
            f"{', '.join(sorted(f.name for f in fields(SCHEMAS[PREDICT])))})",
        ),
        (
            TRAIN_POSTPROCESSOR,
            "batch_size_inference=0",
            "batch_size_inference: expected a positive int, got 0",
        ),
        (
            TRAIN_POSTPROCESSOR,
            "hard_pairs_mining=hard",
            "hard_pairs_mining: expected true or false, got 'hard'",
        ),
        (
            TRAIN_POSTPROCESSOR,
            "pairwise_model.args.output_bias=abc",
            "pairwise_model.args.output_bias: expected float, got 'abc'",
        ),
        (
            TRAIN_POSTPROCESSOR,
            "postprocessor.args.top_n=five",
            "postprocessor.args.top_n: expected int, got 'five'",
        ),
        (
            VALIDATE_POSTPROCESSOR,
            ("postprocessor", DELETE),
            f"{VALIDATE_POSTPROCESSOR}: the config lacks the key(s) ['postprocessor']",
        ),
        (
            VALIDATE_POSTPROCESSOR,
            "embeddings_cache_dir=3",
            "embeddings_cache_dir: expected a path or null, got 3",
        ),
        (
            VALIDATE_POSTPROCESSOR,
            "postprocessor.args.pairwise_model.args.output_bias=maybe",
            "postprocessor.args.pairwise_model.args.output_bias: expected float, got 'maybe'",
        ),
    ],
)
def test_a_bad_value_of_another_pipeline_is_one_line_naming_the_key(registry, pipeline, override, message):
    cfg = composed(pipeline, registry, override)
    with pytest.raises(ConfigError) as error:
        check(pipeline, registry, cfg)
    assert str(error.value) == message


def test_the_checked_config_holds_typed_values_and_the_defaults(registry, tmp_path):
    cfg = composed(TRAIN, registry, "scheduling={}", "metric_args=null", ("logger", DELETE), ("tags", DELETE))
    cfg.update(logs_root=tmp_path, optimizer="adam", extractor={"name": "resnet", "args": None})
    config = validate_config(cfg, TRAIN)
    assert isinstance(config, ExtractorTrainingConfig)
    assert config.logs_root == str(tmp_path)  # a path given in code is held as a string
    assert config.optimizer == ComponentSpec(name="adam") == {"name": "adam", "args": {}}  # a bare name
    assert config.extractor == {"name": "resnet", "args": {}}
    assert config.criterion.name == "triplet_with_miner" and config.criterion.args["margin"] == 0.2
    assert dict(config.criterion) == {"name": "triplet_with_miner", "args": cfg["criterion"]["args"]}
    assert (config.scheduling, config.metric_args, config.logger, config.tags) == (None, {}, None, [])
    assert validate_config({**cfg, "tags": "one"}, TRAIN).tags == ["one"]
    assert validate_config({**cfg, "postfix": 1}, TRAIN).postfix == "1"
    assert config.max_epochs == cfg["max_epochs"] and config.devices == 1

    cfg["scheduling"] = {"scheduler": {"name": "step", "args": {"step_size": 2}}}
    scheduling = validate_config(cfg, TRAIN).scheduling
    assert scheduling == SchedulingConfig(scheduler=ComponentSpec("step", {"step_size": 2}))
    assert (scheduling.scheduler_interval, scheduling.scheduler_frequency, scheduling.monitor_metric) == (
        "step",
        1,
        None,
    )


def test_required_keys_and_defaults_are_the_pipelines():
    assert required_keys(VALIDATE) == ("dataframe_name", "bs_val", "extractor")
    assert optional_defaults(VALIDATE) == {
        "postfix": "validation",
        "seed": 42,
        "precision": 32,
        "accelerator": None,
        "devices": 1,
        "num_nodes": 1,
        "dataset": None,
        "dataset_root": None,
        "dataframe_encoding": "utf-8",
        "logs_root": "logs",
        "logs_folder": None,
        "num_workers": 0,
        "lightning_trainer_extra_args": None,
        "cache_size": 0,
        "transforms_val": None,
        "metric_args": {},
        "postprocessor": None,
        "log_images": False,
        "logger": None,
        "tags": [],
    }
    assert set(required_keys(TRAIN)) == {  # OML's: postfix and logs_root are optional there
        "seed",
        "dataframe_name",
        "extractor",
        "criterion",
        "optimizer",
        "max_epochs",
        "bs_val",
        "metric_for_checkpointing",
    }
    assert optional_defaults(TRAIN)["postfix"] == "" and optional_defaults(TRAIN)["logs_root"] == "logs"
    assert optional_defaults(TRAIN)["show_dataset_warnings"] is True
    assert optional_defaults(TRAIN)["validate_before_training"] is True
    assert (
        optional_defaults(TRAIN)["devices"] is None and optional_defaults(TRAIN_POSTPROCESSOR)["devices"] == 1
    )
    defaults = optional_defaults(VALIDATE)
    defaults["tags"].append("changed")
    assert optional_defaults(VALIDATE)["tags"] == []  # fresh copies


@pytest.mark.parametrize("pipeline", list(SCHEMAS))
def test_the_schemas_are_hydra_structured_configs_in_the_config_store(pipeline):
    node = ConfigStore.instance().load(f"{SCHEMA_GROUP}/{pipeline}.yaml").node
    assert [key for key in node if OmegaConf.is_missing(node, key)] == list(required_keys(pipeline))
    assert {key: node[key] for key in node if not OmegaConf.is_missing(node, key)} == optional_defaults(
        pipeline
    )


def test_an_unknown_pipeline_is_named():
    with pytest.raises(
        ValueError, match="^no pipeline 'train'; the pipelines are extractor_training_pipeline, "
    ):
        validate_config({}, "train")


# ------------------------------------------------------------------------------------------ the pipelines
def test_the_pipelines_check_types_before_any_work(registry, tmp_path, oml_cache_dir, monkeypatch):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    logs = tmp_path / "logs"
    cfg = composed(TRAIN, registry, f"logs_root={logs}", "valid_period=0")
    with pytest.raises(ConfigError, match=r"^valid_period: expected a positive int, got 0$"):
        extractor_training_pipeline(cfg, registry=registry)
    cfg = composed(VALIDATE, registry, f"logs_root={logs}", "extractor.args.normalise_features=yes")
    with pytest.raises(ConfigError, match=r"^extractor.args.normalise_features: expected bool, got 'yes'$"):
        extractor_validation_pipeline(cfg, registry=registry)
    assert not logs.exists()


@pytest.mark.parametrize("cfg", [OmegaConf.create([1, 2]), [1, 2], "max_epochs=1"])
def test_a_config_that_is_no_mapping_is_a_one_line_config_error(cfg):
    """A yaml whose top level is a list (a ListConfig once hydra loads it) used to fail with an AttributeError."""
    with pytest.raises(ConfigError, match="must be a mapping"):
        validate_config(cfg, "extractor_validation_pipeline")


def test_the_schema_holds_lightnings_own_precision_values_and_seed_range():
    """The schema checks ``precision`` and ``seed`` before Lightning is imported, against values held in oml: they
    must be the installed Lightning's (the literals of ``Fabric``'s ``precision`` annotation, its seed range)."""
    import typing

    from lightning_fabric import Fabric
    from lightning_fabric.utilities.seed import max_seed_value, min_seed_value

    from oml_core.config.schemas import PRECISION_OPTIONS, SEED_RANGE

    def literals(annotation):
        for argument in typing.get_args(annotation):
            yield from literals(argument) if typing.get_args(argument) else (argument,)

    lightnings = {
        o for o in literals(typing.get_type_hints(Fabric.__init__)["precision"]) if isinstance(o, int | str)
    }
    assert set(PRECISION_OPTIONS) == lightnings and len(PRECISION_OPTIONS) == len(lightnings)
    assert SEED_RANGE == (min_seed_value, max_seed_value)


def test_a_config_is_checked_before_lightning_is_imported():
    """``oml train`` checks its config (schema and components' arguments) before the pipeline's module, and Lightning
    with it, is imported: a typo is one line at once."""
    code = (
        "import sys\n"
        "from oml_core.cli import main\n"
        "status = main(['train', 'max_epochs=abc'])\n"
        "assert status == 2, status\n"
        "assert 'pytorch_lightning' not in sys.modules and 'lightning_fabric' not in sys.modules\n"
        "assert 'torch' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["oml train: error: max_epochs: expected a positive int, got 'abc'"]
