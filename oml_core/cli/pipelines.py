"""The commands that run a pipeline: ``oml train|validate|predict|train-postprocessor|validate-postprocessor
[--config-path DIR] [--config-name NAME] [--show-config | --cfg job] [hydra overrides ...]``.

A pipeline's command composes its config with the overrides (an argparse-style flag that names a key of the
pipeline's schema is that key's override, :func:`flags_as_overrides`), checks it before Lightning is imported
(:func:`check_before_lightning`), runs the pipeline and prints the report of its result
(:mod:`oml_core.reports.pipelines`) in the run's main process; ``--show-config`` prints the config
(:func:`~oml_core.reports.config.config_yaml`), then what the checks of a run would refuse (exit status 2), and
runs nothing. ``--help`` explains the overrides
(:func:`pipeline_epilog`) and ends with the pipeline's config keys.
"""

from __future__ import annotations

import argparse
import difflib
import textwrap
import warnings
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from oml_core.cli.parser import Subparsers, common_parser
from oml_core.config.compose import OML_CONFIGS_DIR, OVERRIDE_GRAMMAR_URL, compose_config
from oml_core.registry import KINDS, ConfigError, Registry
from oml_core.reports.config import config_yaml

#: ``oml COMMAND`` -> the pipeline it runs; its default config has the pipeline's name (as OML's do).
PIPELINE_CONFIGS = {
    "train": "extractor_training_pipeline",
    "validate": "extractor_validation_pipeline",
    "predict": "extractor_prediction_pipeline",
    "train-postprocessor": "postprocessor_training_pipeline",
    "validate-postprocessor": "postprocessor_validation_pipeline",
}
PIPELINE_HELP = {
    "train": "train an extractor (defaults: the built-in mock dataset)",
    "validate": "compute the retrieval metrics of an extractor (defaults: the built-in mock dataset)",
    "predict": "save an extractor's features of every image to predictions.json, or as Parquet or .npy "
    "(predictions_format; defaults: the mock images)",
    "train-postprocessor": "train a pairwise re-ranker on top of an extractor (defaults: the mock dataset)",
    "validate-postprocessor": "compute the retrieval metrics before and after a pairwise re-ranker "
    "(defaults: the mock dataset)",
}
#: The examples of a pipeline's ``--help`` (keys of its own default config, so that each one composes):
#: ``value``, ``nested``, ``list``, ``null``: one override each; ``replace``: command lines that replace a
#: component (``GROUP@KEY=OPTION``, then overrides under KEY); ``switch``: ``KEY.name=OTHER``.
PIPELINE_EXAMPLES: dict[str, dict[str, Any]] = {
    "train": {
        "value": "max_epochs=3",
        "nested": "optimizer.args.lr=0.5",
        "list": "tags=[a,b]",
        "null": "sampler=null",
        "replace": (
            "loss@criterion=arcface criterion.args.in_features=512 criterion.args.num_classes=16",
            "miner@criterion.args.miner=hard_triplets",
            "optimizer@optimizer=sgd optimizer.args.lr=0.01",
        ),
        "switch": "extractor.name=vit",
        "inline": "optimizer={name: sgd, args: {lr: 0.01, momentum: 0.9}}",
    },
    "validate": {
        "value": "bs_val=32",
        "nested": "extractor.args.arch=resnet50",
        "list": "tags=[a,b]",
        "null": "logger=null",
        "replace": (
            "extractor@extractor=vit extractor.args.arch=vits8",
            "postprocessor@postprocessor=pairwise_reranker",
        ),
        "switch": "extractor.name=vit",
        "inline": "transforms_val={name: norm_resize, args: {im_size: 64}}",
    },
    "predict": {
        "value": "bs=32",
        "nested": "extractor.args.arch=resnet50",
        "list": "devices=[0]",
        "null": "extractor.args.weights=null",
        "replace": (
            "extractor@extractor=vit extractor.args.arch=vits8",
            "transforms@transforms_predict=norm_resize_torch",
        ),
        "switch": "extractor.name=vit",
        "inline": "transforms_predict={name: norm_resize, args: {im_size: 64}}",
    },
    "train-postprocessor": {
        "value": "max_epochs=3",
        "nested": "optimizer.args.lr=0.5",
        "list": "tags=[a,b]",
        "null": "sampler=null",
        "replace": (
            "pairwise_model@pairwise_model=linear_siamese pairwise_model.args.feat_dim=512",
            "sampler@sampler=category_balance",
        ),
        "switch": "pairwise_model.name=linear_siamese",
        "inline": "optimizer={name: sgd, args: {lr: 0.01, momentum: 0.9}}",
    },
    "validate-postprocessor": {
        "value": "bs_val=32",
        "nested": "postprocessor.args.top_n=3",
        "list": "tags=[a,b]",
        "null": "logger=null",
        "replace": (
            "pairwise_model@postprocessor.args.pairwise_model=linear_siamese",
            "extractor@extractor=vit extractor.args.arch=vits8",
        ),
        "switch": "extractor.name=vit",
        "inline": "transforms_val={name: norm_resize, args: {im_size: 64}}",
    },
}


def add_parser(subparsers: Subparsers) -> None:
    """Add the parser of each pipeline's command (:data:`PIPELINE_CONFIGS`) to ``subparsers``."""
    common = common_parser()
    for command, config_name in PIPELINE_CONFIGS.items():
        pipeline = subparsers.add_parser(
            command,
            help=PIPELINE_HELP[command],
            description=f"oml {command}: {PIPELINE_HELP[command]}. Options, then hydra overrides.",
            epilog=pipeline_epilog(command),
            formatter_class=argparse.RawDescriptionHelpFormatter,
            parents=[common],
            config_keys_of=config_name,
        )
        pipeline.add_argument(
            "--config-path", "-cp", metavar="DIR", help="directory of your yaml configs (default: oml's own)"
        )
        pipeline.add_argument(
            "--config-name",
            "-cn",
            metavar="NAME",
            default=config_name,
            help=f"config name without .yaml (default: {config_name})",
        )
        pipeline.add_argument(
            "--show-config",
            action="store_true",
            help="print the config composed with the overrides (interpolations resolved) as yaml, then what a run "
            "would refuse of it (exit status 2); run nothing",
        )
        pipeline.add_argument(
            "--cfg",
            "-c",
            choices=("job",),
            help="hydra's spelling of --show-config (--cfg job)",
        )
        if command == "train":
            pipeline.add_argument(
                "--skip-image-check",
                action="store_true",
                help="do not read every image before training (the override check_images=false)",
            )
        pipeline.set_defaults(handler=run, takes_overrides=True)


def run(args: argparse.Namespace, overrides: list[str]) -> int:
    """Run the pipeline of ``args.command`` on its config composed with ``overrides`` (composed first, so that
    a bad config or override fails before Lightning is imported) and print its report
    (:data:`oml_core.reports.pipelines.REPORTS`) in the main process of the run; with ``--show-config`` (``--cfg
    job``) print that config instead (:func:`~oml_core.reports.config.config_yaml`) and run nothing."""
    registry = Registry()
    overrides = flags_as_overrides(args.command, overrides)
    if getattr(args, "skip_image_check", False):
        overrides = [*overrides, "++check_images=false"]  # set, or add to a config without it
    from oml_core.config.schemas import schema_of

    pipeline = PIPELINE_CONFIGS[args.command]
    schema_keys = [field.name for field in fields(schema_of(pipeline))]
    cfg = compose_config(args.config_name, overrides, args.config_path, registry, schema_keys)
    if args.show_config or args.cfg == "job":
        return show_config(cfg, pipeline)
    check_before_lightning(pipeline, cfg, registry)
    from oml_core.lightning import pipelines
    from oml_core.reports.pipelines import REPORTS  # imports the pipelines, and Lightning with them

    result = getattr(pipelines, pipeline)(cfg, registry=registry)
    # the other DDP processes (Lightning starts them as `oml COMMAND` too, torchrun as the same command) are silent
    if result.is_main_process:
        print(REPORTS[pipeline](result))
    return 0


def check_before_lightning(pipeline: str, cfg: Any, registry: Registry) -> None:
    """The checks of ``pipeline``'s config that need no Lightning: its schema
    (:func:`~oml_core.config.typed.validate_config`) and its components' arguments
    (:func:`~oml_core.config.typed.check_component_arguments`), run before the pipeline's
    module, and Lightning with it (seconds of imports), is imported: a typo in a config is one line at once. The
    pipeline runs them again, and says then what they warn of (an ignored key).

    Raises:
        ConfigError: a key of the config is unknown, missing or malformed, or a component's argument is.
        RegistryError: an unknown component name or argument.
    """
    from oml_core.config.typed import check_component_arguments, validate_config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # said once, by the pipeline
        check_component_arguments(validate_config(cfg, pipeline), registry)


def show_config(cfg: Any, pipeline: str) -> int:
    """``--show-config``: print the composed config ``cfg`` of ``pipeline``
    (:func:`~oml_core.reports.config.config_yaml`), then run the typed check that a run makes at its door
    (:func:`~oml_core.config.typed.validate_config`: every key, type, range and bound): a config it refuses is shown
    all the same, and the refusal follows it as the command's error (exit status 2), so that ``oml COMMAND
    --show-config ... && oml COMMAND ...`` runs only a config that the typed check accepts. The components'
    arguments are left to the run (:func:`check_before_lightning`): checking them imports every component's code,
    seconds that showing a config does not take.

    Raises:
        ConfigError: ``a run would refuse this config: <the first problem>`` (one line).
    """
    from oml_core.config.typed import validate_config

    print(config_yaml(cfg, pipeline), end="", flush=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an ignored key is said by the run
            validate_config(cfg, pipeline)
    except ConfigError as e:
        raise ConfigError(f"a run would refuse this config: {e}") from e
    return 0


def flags_as_overrides(command: str, arguments: Sequence[str]) -> list[str]:
    """The overrides of ``oml COMMAND ARGUMENTS`` (what argparse left of its command line), where an
    argparse-style flag that names a key of the pipeline's schema becomes that key's override: ``--max-epochs 3``
    and ``--max_epochs=3`` become ``max_epochs=3`` (``-`` read as ``_``; ``--optimizer.args.lr 0.1`` sets a
    nested key). Every other argument is kept as it is.

    Raises:
        ConfigError: a flag that names no key of the schema (``--max-epoch``: with the close key, and how
            overrides are written), or a flag without a value (``--max-epochs`` last).
    """
    if not any(argument.startswith("--") for argument in arguments):
        return list(arguments)
    from oml_core.config.schemas import schema_of

    keys = sorted(f.name for f in fields(schema_of(PIPELINE_CONFIGS[command])))
    overrides: list[str] = []
    rest = iter(arguments)
    for argument in rest:
        if not argument.startswith("--"):
            overrides.append(argument)
            continue
        name, has_value, value = argument[2:].partition("=")
        key = name.replace("-", "_")
        if key.partition(".")[0] not in keys:
            close = difflib.get_close_matches(key, keys, n=1)
            hint = f"; did you mean {close[0]}=VALUE?" if close else ""
            raise ConfigError(
                f"unknown option {argument!r}{hint} (the config's keys are set with overrides KEY=VALUE, "
                f"e.g. {PIPELINE_EXAMPLES[command]['value']}; see oml {command} --help)"
            )
        if not has_value:
            value = next(rest, "--")
            if value.startswith("--"):
                raise ConfigError(f"{argument} needs a value: write {key}=VALUE")
        overrides.append(f"{key}={value}")
    return overrides


def pipeline_epilog(command: str) -> str:
    """The epilog of ``oml COMMAND --help`` for a pipeline: hydra's overrides, how to replace or switch a
    component (with examples on the pipeline's own keys, :data:`PIPELINE_EXAMPLES`), where the names are
    listed, and the pipeline's default config file."""
    ex = PIPELINE_EXAMPLES[command]
    default = default_config_file(command)
    replace = "\n".join(f"{'':27}oml {command} {line}" for line in ex["replace"])
    rows = (
        ("KEY=VALUE", "set a value", ex["value"]),
        ("A.B.C=VALUE", "set a nested value", ex["nested"]),
        ("KEY=[1,2]", "a list", ex["list"]),
        ("+KEY=VALUE", "add a key the config does not have", ""),
        ("~KEY", "remove a key", ""),
        ("KEY=null", "null (a component: none)", ex["null"]),
    )
    kinds = textwrap.fill(", ".join(KINDS), width=105, initial_indent=" " * 25, subsequent_indent=" " * 25)
    table = "\n".join(f"  {a:<23}{b:<37}{c}".rstrip() for a, b, c in rows)
    return f"""\
overrides: hydra's, after the options ({OVERRIDE_GRAMMAR_URL})
{table}

components (the {{name: ..., args: {{...}}}} specs of the config):
  GROUP@KEY=OPTION       KEY becomes the default config of the component OPTION of the kind GROUP,
                         whole (nothing of the old component's args is kept); the overrides under KEY
                         then apply to it, e.g.
{replace}
  'KEY={{name: NAME, args: {{ARG: VALUE}}}}'
                         a whole spec inline (quoted for the shell), e.g.
                           oml {command} '{ex["inline"]}'
  KEY.name=OTHER         switch to OTHER with OTHER's default config (the args are reset, never
                         mixed with the old component's), e.g. oml {command} {ex["switch"]}
  oml registry KIND      the names of a kind; the kinds (the GROUPs):
{kinds}
  oml registry KIND NAME one component: its arguments with their defaults and its default config

config:
  the default config     {default}
  --config-path DIR --config-name NAME
                         your own yaml instead (DIR/NAME.yaml)
  --show-config          print the config as composed with the overrides (interpolations resolved)
                         and exit without running, e.g. oml {command} --show-config {ex["value"]}
                         (then what a run would refuse of it, in one line: exit status 2)
"""


def default_config_file(command: str) -> Path:
    """The absolute path of the default config of the pipeline ``oml COMMAND``."""
    return (OML_CONFIGS_DIR / f"{PIPELINE_CONFIGS[command]}.yaml").resolve()


__all__ = [
    "PIPELINE_CONFIGS",
    "PIPELINE_EXAMPLES",
    "PIPELINE_HELP",
    "add_parser",
    "check_before_lightning",
    "default_config_file",
    "flags_as_overrides",
    "pipeline_epilog",
    "run",
    "show_config",
]
