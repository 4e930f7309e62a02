"""The schema of every pipeline's config (and of ``oml index build``'s): the keys it accepts, the type and range of
every value and the defaults of the optional keys, checked in one go before the pipeline does any work.

A run's config enters once: the pipeline converts its argument (a dict, a ``DictConfig`` or the schema's object
itself) with :func:`validate_config` at its door and from there reads only the typed config (``config.bs_val``).

One dataclass per pipeline (hydra's structured configs, stored in hydra's ``ConfigStore`` as
``oml_schema/<pipeline name>``) has a field per top-level key: a required key has no default (``MISSING``), an
optional key the default the pipeline uses. Every field carries a :class:`Rule`, a small reusable validator (``a
positive int``, ``a list of positive ints``, ``a {name, args} spec of a loss``, ...). :func:`validate_config`
checks a config against its pipeline's schema and reports the first problem in one line naming the key, the
value and what is expected::

    validate_config({..., "max_epochs": "abc"}, "extractor_training_pipeline")
    # ConfigError: max_epochs: expected a positive int, got 'abc'
    validate_config({..., "metric_args": {"cmc_top_k": [0]}}, "extractor_validation_pipeline")
    # ConfigError: metric_args.cmc_top_k: expected a list of positive ints, got [0]

The arguments of the components are checked against the annotations of their factories by
:func:`check_component_arguments`, which needs the registry (``criterion.args.margin: expected float, got
'abc'``, see :mod:`oml_core.registry.arg_types`).
"""

from __future__ import annotations

import copy
import difflib
import functools
import inspect
import math
import os
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar, cast

from omegaconf import MISSING

from oml_core.compose import unresolvable_config_error
from oml_core.const import TOP_K_SUFFIX
from oml_core.datasets.dataframe_format import DEFAULT_ENCODING
from oml_core.lightning.options import NAN_POLICIES, SCHEDULER_INTERVALS
from oml_core.lightning.pipelines.shared.common import HYDRA_KEYS, as_config, check_keys, require
from oml_core.lightning.pipelines.shared.engine import run_dir_path
from oml_core.lightning.pipelines.shared.plugin_callbacks import plugin_callback_specs
from oml_core.registry import ConfigError, Registry
from oml_core.registry.arg_types import check_argument_types, fits
from oml_core.registry.registry import check_spec_argument_types
from oml_core.utils.text import is_text_encoding

#: The ``ConfigStore`` group of the schemas (``oml_schema/extractor_training_pipeline``, ...).
SCHEMA_GROUP = "oml_schema"

_RULE = "oml_rule"  # a field's metadata key: its Rule
_KIND = "oml_kind"  # a field's metadata key: the kind of the component it holds

T = TypeVar("T")


# ------------------------------------------------------------------------------------------------- rules
def _as_is(value: Any, key: str) -> Any:
    return value


#: How the pipelines' rules word a refusal: ``max_epochs: expected a positive int, got 'abc'``.
EXPECTED = "{key}: expected {expected}, got {value}"
#: How ``oml index build``'s rules word one: ``bs must be an integer >= 1, got 0``.
MUST_BE = "{key} must be {expected}, got {value}"


@dataclass(frozen=True)
class Rule:
    """A validator of one config value.

    Attributes:
        expected: What the value must be, as messages say it: ``"a positive int"``.
        plural: The same said of the items of a list: ``"positive ints"``.
        accepts: Whether a value has the right type and range (the parts of a mapping are ``convert``'s).
        convert: ``(value, key) -> value as the schema holds it`` for an accepted value; it checks the parts of
            the value, whose messages name their keys under ``key`` (``metric_args.cmc_top_k``).
        refusal: The message of a value ``accepts`` refuses, its ``{key}``, ``{expected}`` and ``{value}`` (the
            value's ``repr``) filled in: :data:`EXPECTED` (the pipelines'), or :data:`MUST_BE` (see
            :func:`must_be`).
    """

    expected: str
    plural: str
    accepts: Callable[[Any], bool]
    convert: Callable[[Any, str], Any] = _as_is
    refusal: str = EXPECTED

    def check(self, value: Any, key: str) -> Any:
        """``value`` (of the config key ``key``) as the schema holds it.

        Raises:
            ConfigError: ``<key>: expected <expected>, got <value>`` (as :attr:`refusal` words it), or the problem
                of a part of the value.
        """
        if not self.accepts(value):
            raise ConfigError(self.refusal.format(key=key, expected=self.expected, value=repr(value)))
        return self.convert(value, key)


def must_be(rule: Rule, expected: str) -> Rule:
    """``rule`` whose refusal reads ``<key> must be <expected>, got <value>`` (:data:`MUST_BE`)."""
    return replace(rule, expected=expected, refusal=MUST_BE)


def _is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)


def integer(low: int | None = None, high: int | None = None) -> Rule:
    """An int (never a bool) in ``[low, high]`` (a bound that is None is open): ``a positive int``."""
    if high is not None:
        noun = f"int in [{low}, {high}]"
    else:
        noun = {None: "int", 0: "non-negative int", 1: "positive int"}.get(low, f"int >= {low}")
    return Rule(
        f"an {noun}" if noun[0] in "aeiou" else f"a {noun}",
        noun.replace("int", "ints", 1),
        lambda v: fits(int, v) and (low is None or v >= low) and (high is None or v <= high),
    )


def number(low: float, high: float) -> Rule:
    """A number (an int or a float, never a bool) in ``[low, high]``."""
    return Rule(
        f"a number in [{low}, {high}]",
        f"numbers in [{low}, {high}]",
        lambda v: fits(float, v) and low <= v <= high,
    )


def one_of(*options: Any) -> Rule:
    """One of ``options`` (of the same type: ``16`` is not ``"16"``, ``True`` is not ``1``)."""
    said = [repr(option) for option in options]
    expected = f"{said[0]} or {said[1]}" if len(said) == 2 else f"one of {', '.join(said)}"
    return Rule(
        expected,
        f"values among {', '.join(said)}",
        lambda v: any(type(v) is type(o) and v == o for o in options),
    )


def either(*rules: Rule) -> Rule:
    """A value that one of ``rules`` accepts (converted by the first of them that does)."""

    def convert(value: Any, key: str) -> Any:
        return next(rule for rule in rules if rule.accepts(value)).convert(value, key)

    return Rule(
        _alternatives([rule.expected for rule in rules]),
        _alternatives([rule.plural for rule in rules]),
        lambda v: any(rule.accepts(v) for rule in rules),
        convert,
    )


def nullable(*rules: Rule) -> Rule:
    """Null, or a value that one of ``rules`` accepts."""
    return either(*rules, NULL)


def list_of(item: Rule, non_empty: bool = False) -> Rule:
    """A list (or tuple) whose every item ``item`` accepts, held as a list; the message names the whole list."""
    noun = f"{'non-empty ' if non_empty else ''}list of {item.plural}"

    def convert(value: Any, key: str) -> list[Any]:
        return [item.convert(v, f"{key}[{i}]") for i, v in enumerate(value)]

    return Rule(
        f"a {noun}",
        noun.replace("list", "lists", 1),
        lambda v: _is_list(v) and (len(v) > 0 or not non_empty) and all(item.accepts(x) for x in v),
        convert,
    )


def _alternatives(said: list[str]) -> str:
    return said[0] if len(said) == 1 else f"{', '.join(said[:-1])} or {said[-1]}"


NULL = Rule("null", "nulls", lambda v: v is None)
BOOL = Rule("true or false", "booleans", lambda v: isinstance(v, bool))
STRING = Rule("a string", "strings", lambda v: isinstance(v, str))
#: A name (the run's ``postfix``): a string, or an int as hydra reads ``postfix=1``, held as a string.
NAME = Rule("a string", "strings", lambda v: isinstance(v, str) or fits(int, v), lambda v, key: str(v))
#: A file or folder: a string (or an ``os.PathLike`` given in code), held as a string.
PATH = Rule("a path", "paths", lambda v: isinstance(v, str | os.PathLike), lambda v, key: os.fspath(v))
MAPPING = Rule("a mapping", "mappings", lambda v: isinstance(v, Mapping), lambda v, key: dict(v))
#: ``tags``: a list, one tag or null (none), held as a list.
TAGS = Rule(
    "a list, a string or null",
    "tag lists",
    lambda v: v is None or isinstance(v, str) or _is_list(v),
    lambda v, key: [v] if isinstance(v, str) else list(v or []),
)
#: A component's ``args``: a mapping (null: none), held as a dict.
ARGS = Rule(
    "a mapping", "mappings", lambda v: v is None or isinstance(v, Mapping), lambda v, key: dict(v or {})
)
POSITIVE_INT = integer(1)
NON_NEGATIVE_INT = integer(0)
FRACTION = number(0, 1)
#: What ``resume_allow_changes`` may let a resumed run change (see :mod:`~oml_core.lightning.pipelines.shared.resume`).
RESUME_ALLOWED_CHANGES = ("seed", "dataset")


#: The seeds Lightning's ``seed_everything`` takes: numpy's, ``[0, 2**32 - 1]`` (``lightning_fabric``'s
#: ``min_seed_value``, ``max_seed_value``; a test keeps them equal).
SEED_RANGE = (0, 2**32 - 1)
#: The ``precision`` values Lightning accepts: the literals of the ``precision`` annotation of ``Fabric``'s public
#: signature (a test keeps them equal to the installed Lightning's). Held here, so that a config is checked before
#: Lightning is imported (seconds before a user learns of a typo).
PRECISION_OPTIONS = (
    16,
    32,
    64,
    "16",
    "16-mixed",
    "16-true",
    "32",
    "32-true",
    "64",
    "64-true",
    "bf16",
    "bf16-mixed",
    "bf16-true",
    "transformer-engine",
    "transformer-engine-float16",
)


#: ``dataframe_encoding``: the text encoding of the csv (Python's name of it).
ENCODING = Rule(
    "a text encoding Python knows (utf-8, latin-1, cp1252, ...)", "text encodings", is_text_encoding
)
#: Lightning's seeds (numpy's range).
SEED = integer(*SEED_RANGE)
PRECISION = one_of(*PRECISION_OPTIONS)
#: ``devices``: null (every GPU, or 1 on the CPU), a number of devices or a list of device indices.
DEVICES = nullable(POSITIVE_INT, list_of(NON_NEGATIVE_INT, non_empty=True))


# ----------------------------------------------------------------------------------------------- fields
def setting(rule: Rule, default: Any = MISSING) -> Any:
    """A schema field checked by ``rule``; without ``default`` the key is required (hydra's ``MISSING``)."""
    if isinstance(default, list | dict):
        return field(default_factory=functools.partial(copy.deepcopy, default), metadata={_RULE: rule})
    return field(default=default, metadata={_RULE: rule})


def spec(kind: str, optional: bool = False, *, required: bool | None = None) -> Any:
    """A schema field holding a component of ``kind``: a spec, or null too when ``optional``. The key is required
    unless ``optional`` (then null by default); ``required=True`` makes an ``optional`` key required too (given,
    as a spec or null)."""
    rule = nullable(component(kind)) if optional else component(kind)
    is_required = not optional if required is None else required
    return field(default=MISSING if is_required else None, metadata={_RULE: rule, _KIND: kind})


def specs(kind: str) -> Any:
    """A schema field holding a list of components of ``kind`` (each a ``{name, args}`` spec or a name), ``[]`` by
    default."""
    return field(default_factory=list, metadata={_RULE: list_of(component(kind)), _KIND: kind})


# ---------------------------------------------------------------------------------------- nested values
@dataclass(eq=False)
class ComponentSpec(Mapping[str, Any]):
    """A component's config: its registered ``name`` and the ``args`` of its factory (nested specs among them).

    It is a mapping of ``name`` and ``args``, so that it goes wherever a ``{name, args}`` dict goes
    (``registry.build(kind, spec)``) and equals such a dict.
    """

    name: str = setting(STRING)
    args: dict[str, Any] = setting(ARGS, {})

    def __getitem__(self, key: str) -> Any:
        if key not in ("name", "args"):
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(("name", "args"))

    def __len__(self) -> int:
        return 2


def component(kind: str) -> Rule:
    """A ``{name, args}`` spec of a component of ``kind``, or just its name, held as a :class:`ComponentSpec`."""
    article = "an" if kind[0] in "aeiou" else "a"

    def convert(value: Any, key: str) -> ComponentSpec:
        return ComponentSpec(name=value) if isinstance(value, str) else validated(ComponentSpec, value, key)

    return Rule(
        f"a {{name, args}} spec of {article} {kind}",
        f"{{name, args}} specs of {kind}s",
        lambda v: isinstance(v, str | Mapping),
        convert,
    )


@dataclass
class SchedulingConfig:
    """The ``scheduling`` block of a training config: the scheduler and when Lightning steps it."""

    scheduler: ComponentSpec = spec("scheduler")
    scheduler_interval: str = setting(one_of(*SCHEDULER_INTERVALS), "step")
    scheduler_frequency: int = setting(POSITIVE_INT, 1)
    monitor_metric: str | None = setting(nullable(STRING), None)


#: ``scheduling``: null (or an empty mapping: no scheduler) or a :class:`SchedulingConfig`.
SCHEDULING = Rule(
    "null or a mapping of scheduler, scheduler_interval, scheduler_frequency and monitor_metric",
    "scheduling blocks",
    lambda v: v is None or isinstance(v, Mapping),
    lambda v, key: validated(SchedulingConfig, v, key) if v else None,
)

#: ``EmbeddingMetrics``' arguments that the pipelines set themselves.
_METRIC_ARGS_SET_BY_PIPELINE = ("dataset", "postprocessor", "registry")
#: ``metric_args`` whose values are lists of fractions.
_FRACTION_METRIC_ARGS = ("fmr_vals", "pcf_variance")
#: ``metric_args`` of ``EmbeddingMetricsDDP`` only (ignored on one process, which holds every embedding anyway).
_DDP_METRIC_ARGS = {"shard_gallery": BOOL}
TOP_K = list_of(POSITIVE_INT)
FRACTIONS = list_of(FRACTION)


def _metric_args(value: Mapping[str, Any] | None, key: str) -> dict[str, Any]:
    """``metric_args`` checked: every ``<metric>_top_k`` a list of positive ints, ``fmr_vals`` and
    ``pcf_variance`` lists of numbers in ``[0, 1]``, ``shard_gallery`` a bool, the other keys
    ``EmbeddingMetrics``' arguments of the types of its annotations."""
    from oml_core.metrics import EmbeddingMetrics

    parameters = inspect.signature(EmbeddingMetrics).parameters
    known = [
        name
        for name, p in parameters.items()
        if p.kind is not p.VAR_KEYWORD and name not in _METRIC_ARGS_SET_BY_PIPELINE
    ] + list(_DDP_METRIC_ARGS)
    args = dict(value or {})
    for name, item in args.items():
        if str(name).endswith(TOP_K_SUFFIX) and name != TOP_K_SUFFIX:
            TOP_K.check(item, f"{key}.{name}")
            continue
        check_keys({name: item}, known, key)
        if name in _FRACTION_METRIC_ARGS:
            FRACTIONS.check(item, f"{key}.{name}")
        elif name in _DDP_METRIC_ARGS:
            _DDP_METRIC_ARGS[name].check(item, f"{key}.{name}")
        else:
            check_argument_types(EmbeddingMetrics, {name: item}, f"{key}.")
    return args


#: ``metric_args``: the arguments of :class:`~oml_core.metrics.EmbeddingMetrics` (null: none).
METRIC_ARGS = Rule(
    "a mapping of EmbeddingMetrics' arguments",
    "mappings",
    lambda v: v is None or isinstance(v, Mapping),
    _metric_args,
)


# ---------------------------------------------------------------------------------------------- schemas
@dataclass
class ConfigSchema:
    """A typed config: a field per top-level key (see the module), built by :func:`validate_config`.

    A schema is a subclass naming what it configures in ``pipeline`` (a pipeline, or ``index_build``);
    :func:`validate_config` gives an instance of it whose fields hold checked values (specs as
    :class:`ComponentSpec`, paths as strings).
    """

    pipeline: ClassVar[str] = ""
    #: Whether a top-level key the schema does not know may be a variable of the user's (OML's pipeline configs
    #: have them, see :func:`without_user_variables`); else it is refused.
    user_variables: ClassVar[bool] = True

    def check_combination(self) -> None:
        """Raise a ``ConfigError`` when values that are right one by one do not go together (none here)."""

    def check_components(self, registry: Registry) -> None:
        """Raise a ``RegistryError`` when components that are right one by one do not go together in ``registry``
        (none here); :func:`check_component_arguments` calls it after checking each."""

    def as_mapping(self) -> dict[str, Any]:
        """Every key of the config and its checked value (the values themselves, not copies)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class PipelineConfig(ConfigSchema):
    """The keys every pipeline has: the run's name, seed and engine, where it writes, its data loading."""

    postfix: str = setting(NAME, "")
    seed: int = setting(SEED, 42)
    precision: int | str = setting(PRECISION, 32)
    accelerator: str | None = setting(nullable(STRING), None)
    devices: Any = setting(DEVICES, 1)  # null, an int or a list of ints (an omegaconf field cannot say so)
    num_nodes: int = setting(POSITIVE_INT, 1)
    # the kind of data (oml_register_datasets), built from the data keys below; null: images (OML's dataframes)
    dataset: ComponentSpec | None = spec("dataset", optional=True)
    dataset_root: str | None = setting(nullable(PATH), None)
    # the text encoding of the csv dataframe_name (pandas' default, as OML reads it); latin-1, cp1252, ... else
    dataframe_encoding: str = setting(ENCODING, DEFAULT_ENCODING)
    logs_root: str = setting(PATH, "logs")
    logs_folder: str | None = setting(nullable(PATH), None)
    num_workers: int = setting(NON_NEGATIVE_INT, 0)
    lightning_trainer_extra_args: dict[str, Any] | None = setting(nullable(MAPPING), None)

    def check_combination(self) -> None:
        """Raise a ``ConfigError`` when the run's folder (``logs_folder``, or the default
        ``<date>_<time>_<postfix>``) would not lie inside ``logs_root``
        (:func:`~oml_core.lightning.pipelines.shared.engine.run_dir_path`: no absolute path, no ``..``, no symbolic
        link leading out)."""
        run_dir_path(self.logs_root, self.postfix, self.logs_folder)


@dataclass
class ExtractorValidationConfig(PipelineConfig):
    """The config of ``extractor_validation_pipeline``."""

    pipeline: ClassVar[str] = "extractor_validation_pipeline"

    postfix: str = setting(NAME, "validation")
    dataframe_name: str = setting(PATH)
    cache_size: int = setting(NON_NEGATIVE_INT, 0)
    transforms_val: ComponentSpec | None = spec("transforms", optional=True)
    bs_val: int = setting(POSITIVE_INT)
    metric_args: dict[str, Any] = setting(METRIC_ARGS, {})
    postprocessor: ComponentSpec | None = spec("postprocessor", optional=True)
    log_images: bool = setting(BOOL, False)
    extractor: ComponentSpec = spec("extractor")
    logger: ComponentSpec | None = spec("logger", optional=True)
    tags: list[Any] = setting(TAGS, [])


@dataclass
class PostprocessorValidationConfig(ExtractorValidationConfig):
    """The config of ``postprocessor_validation_pipeline``: that of the extractor's validation, a pairwise
    ``postprocessor`` required, and the embeddings' cache."""

    pipeline: ClassVar[str] = "postprocessor_validation_pipeline"

    postfix: str = setting(NAME, "postprocessor_validation")
    postprocessor: ComponentSpec = spec("postprocessor")
    embeddings_cache_dir: str | None = setting(nullable(PATH), None)


@dataclass
class ExtractorPredictionConfig(PipelineConfig):
    """The config of ``extractor_prediction_pipeline``."""

    pipeline: ClassVar[str] = "extractor_prediction_pipeline"

    postfix: str = setting(NAME, "prediction")
    data_dir: str | None = setting(nullable(PATH), None)
    dataframe_name: str | None = setting(nullable(PATH), None)
    save_dir: str | None = setting(nullable(PATH), None)
    bs: int = setting(POSITIVE_INT)
    transforms_predict: ComponentSpec | None = spec("transforms", optional=True)
    extractor: ComponentSpec = spec("extractor")


@dataclass
class TrainingConfig(PipelineConfig):
    """The keys of both training pipelines (extractor and post-processor)."""

    seed: int = setting(SEED)
    dataframe_name: str = setting(PATH)
    cache_size: int = setting(NON_NEGATIVE_INT, 0)
    show_dataset_warnings: bool = setting(BOOL, True)
    transforms_train: ComponentSpec | None = spec("transforms", optional=True)
    sampler: ComponentSpec | None = spec("sampler", optional=True)
    bs_train: int | None = setting(nullable(POSITIVE_INT), None)
    max_epochs: int = setting(POSITIVE_INT)
    valid_period: int = setting(POSITIVE_INT, 1)
    metric_args: dict[str, Any] = setting(METRIC_ARGS, {})
    log_images: bool = setting(BOOL, False)
    metric_for_checkpointing: str = setting(STRING)
    mode_for_checkpointing: str = setting(one_of("min", "max"), "max")
    checkpoint_every_n_steps: int | None = setting(nullable(POSITIVE_INT), None)
    # last.ckpt once that many seconds passed since the last write (and at the end, on an interrupt); 0: every epoch
    checkpoint_every_seconds: float = setting(number(0, math.inf), 60.0)
    # a NaN or infinite loss: stop the run there, or skip_batch that batch (its optimizer step); skip_batch stops
    # the run too once skipping cannot help: a weight or the batch's embeddings not finite, MAX_SKIPPED_IN_A_ROW
    # (5) such batches in a row, or every batch of an epoch (oml_core.lightning.modules.optimization's
    # finite_loss_or_none)
    nan_policy: str = setting(one_of(*NAN_POLICIES), "stop")
    optimizer: ComponentSpec = spec("optimizer")
    scheduling: SchedulingConfig | None = setting(SCHEDULING, None)
    freeze_n_epochs: int = setting(NON_NEGATIVE_INT, 0)
    logger: ComponentSpec | None = spec("logger", optional=True)
    tags: list[Any] = setting(TAGS, [])
    # a run's checkpoint (<run>/checkpoints/last.ckpt) to go on from, in its run folder, with the same run keys
    resume: str | None = setting(nullable(PATH), None)
    # what a resumed run may change of its run: a new seed, a new dataset (earlier metrics then not carried over)
    resume_allow_changes: list[str] = setting(list_of(one_of(*RESUME_ALLOWED_CHANGES)), [])
    # the Lightning callbacks of plugins (oml_register_callbacks) added to the run, in this order: {name, args} specs
    callbacks: list[ComponentSpec] = specs("callback")
    # the every-run callbacks of plugins (added to every run unless named in callbacks) that this run goes without
    callbacks_disabled: list[str] = setting(list_of(STRING), [])

    def check_components(self, registry: Registry) -> None:
        """Raise when the plugins' callbacks of the run do not go together: see
        :func:`~oml_core.lightning.pipelines.shared.plugin_callbacks.plugin_callback_specs`."""
        plugin_callback_specs(registry, self.callbacks, self.callbacks_disabled)

    def check_combination(self) -> None:
        """Raise a ``ConfigError`` for ``sampler`` null without ``bs_train`` (the batch size of plain batches),
        then :meth:`PipelineConfig.check_combination`'s."""
        if self.sampler is None and self.bs_train is None:
            raise ConfigError(f"{self.pipeline}: with sampler null the config needs bs_train")
        super().check_combination()


@dataclass
class ExtractorTrainingConfig(TrainingConfig):
    """The config of ``extractor_training_pipeline``."""

    pipeline: ClassVar[str] = "extractor_training_pipeline"

    devices: Any = setting(DEVICES, None)
    find_unused_parameters: bool = setting(BOOL, False)
    transforms_val: ComponentSpec | None = spec("transforms", optional=True)
    bs_val: int = setting(POSITIVE_INT)
    check_images: bool = setting(BOOL, True)
    validate_before_training: bool = setting(BOOL, True)
    extractor: ComponentSpec = spec("extractor")
    criterion: ComponentSpec = spec("loss")


@dataclass
class PostprocessorTrainingConfig(TrainingConfig):
    """The config of ``postprocessor_training_pipeline``."""

    pipeline: ClassVar[str] = "postprocessor_training_pipeline"

    find_unused_parameters: bool = setting(
        BOOL, False
    )  # OML's configs have it; the pipeline runs on one device

    embeddings_cache_dir: str | None = setting(nullable(PATH), None)
    extractor: ComponentSpec = spec("extractor")
    transforms_extraction: ComponentSpec = spec("transforms")
    batch_size_inference: int = setting(POSITIVE_INT)
    pairwise_model: ComponentSpec = spec("pairwise_model")
    hard_pairs_mining: bool = setting(BOOL, True)
    pairs_miner: ComponentSpec | None = spec("pairs_miner", optional=True)
    postprocessor: ComponentSpec = spec("postprocessor")


#: Which rows of the dataframe ``oml index build`` puts in the gallery (``GalleryIndex.add_dataset``'s ``rows``,
#: :data:`oml_core.index.gallery.GALLERY_ROWS`; a test keeps them equal). Held here, as the schema imports no index.
GALLERY_ROWS_OPTIONS = ("all", "gallery")
#: ``calibration``: null, or the arguments of ``GalleryIndex.calibrate`` (``oml_core.index.build`` checks them).
CALIBRATION = must_be(nullable(MAPPING), "null or a mapping of target, value, top_n")


@dataclass
class IndexBuildConfig(ConfigSchema):
    """The config of ``oml index build`` (:func:`oml_core.index.build.build_gallery_index`; its default config
    ``index_build.yaml`` says what each key does). Every key is required but ``dataset`` and ``check_images``
    (configs written before they existed lack them); a key it does not know is refused, and its messages read
    ``bs must be an integer >= 1, got 0``."""

    pipeline: ClassVar[str] = "index_build"
    user_variables: ClassVar[bool] = False

    seed: int = setting(must_be(NON_NEGATIVE_INT, "an integer >= 0"))
    dataset: ComponentSpec | None = spec("dataset", optional=True)
    dataset_root: str | None = setting(nullable(PATH))
    dataframe_name: str | None = setting(nullable(PATH))
    data_dir: str | None = setting(nullable(PATH))
    check_images: bool = setting(must_be(BOOL, "true or false"), True)
    gallery_rows: str = setting(
        must_be(one_of(*GALLERY_ROWS_OPTIONS), f"one of {list(GALLERY_ROWS_OPTIONS)}")
    )
    index_dir: str | None = setting(nullable(PATH))
    logs_root: str = setting(PATH)
    bs: int = setting(must_be(POSITIVE_INT, "an integer >= 1"))
    num_workers: int = setting(must_be(NON_NEGATIVE_INT, "an integer >= 0"))
    transforms: ComponentSpec | None = spec("transforms", optional=True, required=True)
    extractor: ComponentSpec = spec("extractor")
    distance: str = setting(STRING)
    knn_backend: ComponentSpec = spec("knn_backend")
    calibration: dict[str, Any] | None = setting(CALIBRATION)

    def check_combination(self) -> None:
        """Raise a ``ConfigError`` when both ``data_dir`` and ``dataset_root`` are given."""
        if self.data_dir is not None and self.dataset_root is not None:
            raise ConfigError(
                "give either data_dir (a folder of images) or dataset_root (with dataframe_name), not both"
            )


#: The schema of every pipeline and of ``oml index build`` (``index_build``), by the pipeline's name.
SCHEMAS: Mapping[str, type[ConfigSchema]] = MappingProxyType(
    {
        schema.pipeline: schema
        for schema in (
            ExtractorTrainingConfig,
            ExtractorValidationConfig,
            ExtractorPredictionConfig,
            PostprocessorTrainingConfig,
            PostprocessorValidationConfig,
            IndexBuildConfig,
        )
    }
)


# ------------------------------------------------------------------------------------------------ checks
def schema_of(pipeline: str) -> type[ConfigSchema]:
    """The schema of ``pipeline`` (see :data:`SCHEMAS`).

    Raises:
        ValueError: no pipeline has that name.
    """
    try:
        return SCHEMAS[pipeline]
    except KeyError:
        raise ValueError(f"no pipeline {pipeline!r}; the pipelines are {', '.join(SCHEMAS)}") from None


def required_keys(pipeline: str) -> tuple[str, ...]:
    """The keys a config of ``pipeline`` must have, in the schema's order."""
    return tuple(f.name for f in fields(schema_of(pipeline)) if _is_required(f))


def optional_defaults(pipeline: str) -> dict[str, Any]:
    """``{key: default}`` of the optional keys of ``pipeline`` (fresh copies of mutable defaults)."""
    return {f.name: _default(f) for f in fields(schema_of(pipeline)) if not _is_required(f)}


def validate_config(cfg: Mapping[str, Any] | ConfigSchema | Any, pipeline: str) -> ConfigSchema:
    """Check a config of ``pipeline`` against its schema, before anything is built: the door through which a
    run's config enters, once.

    ``cfg`` is a dict, a ``DictConfig`` (its interpolations resolved, hydra's section left out) or a typed config
    (a :class:`ConfigSchema`, e.g. this function's result), whose values are checked again like a dict's (an
    object built by hand is checked too). In order: every top-level key is one the pipeline knows (or, where the
    schema allows them, a variable of the user's, see :func:`without_user_variables`), every required key is
    there (the messages of :func:`~oml_core.lightning.pipelines.shared.common.check_keys` and
    :func:`~oml_core.lightning.pipelines.shared.common.require`), every value fits its field's rule (in the
    schema's order; inside a mapping value, its keys likewise), then the rules across keys
    (``check_combination``; for a pipeline, that the run's folder lies inside ``logs_root``). Component arguments
    are :func:`check_component_arguments`'s business.

    Returns:
        An instance of the pipeline's schema: every key, the defaults filling the optional ones the config leaves
        out; specs as :class:`ComponentSpec`, paths as strings.

    Raises:
        ConfigError: the first problem, in one line naming the key, the value and what is expected
            (``max_epochs: expected a positive int, got 'abc'``).
        ValueError: no pipeline is called ``pipeline``.
    """
    schema = schema_of(pipeline)
    if isinstance(cfg, ConfigSchema):
        cfg = _unstructured(cfg)
    if schema.user_variables:
        values = without_user_variables(cfg, [f.name for f in fields(schema)], pipeline)
    else:
        values = as_config(cfg)
    config = validated(schema, values)
    config.check_combination()
    return config


def _unstructured(value: Any) -> Any:
    """``value`` (a typed config, or one of its values) as a config file gives it: dataclasses (a
    :class:`ComponentSpec` too) and mappings as dicts, tuples as lists, every other value as it is."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _unstructured(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {key: _unstructured(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_unstructured(item) for item in value]
    return value


#: How alike (difflib's ratio) an unknown top-level key and a known one must be for the unknown key to be taken
#: for a misspelling of the known one (``max_epoch``, ``valid_perod``, ``scheduler``: errors) rather than a
#: variable of the user's (``hydra_dir``, ``extractor_weights`` in OML's configs: ignored).
MISSPELLING_CUTOFF = 0.7
#: A hydra defaults list, applied only when hydra composes the config.
DEFAULTS_KEY = "defaults"
_INTERPOLATION = re.compile(r"\$\{\s*([A-Za-z_][\w-]*)")


def without_user_variables(
    cfg: Mapping[str, Any] | Any, known: Sequence[str], pipeline: str
) -> dict[str, Any]:
    """The config as a plain dict (interpolations resolved) of the keys that are ``pipeline``'s own, after
    the checks of the keys that are not.

    OML's pipelines read the keys they know and ignore the others, and OML's configs use that: ``hydra_dir``
    (used by the ``hydra:`` section), ``extractor_weights`` (interpolated into two specs). So a top-level key
    that the pipeline does not know is:

    - an error (one line, ``did you mean``) when it looks like a misspelling of a known key (difflib's ratio at
      least :data:`MISSPELLING_CUTOFF`: ``max_epoch``, ``valid_perod``) and no interpolation refers to it;
    - ignored without a word when it is hydra's (:data:`HYDRA_KEYS`) or an interpolation of the config refers to
      it (``${extractor_weights}``): a variable of the user's;
    - ignored with a warning naming it otherwise; a ``defaults`` list with a warning that only hydra's
      composition applies it (``oml COMMAND --config-path DIR --config-name NAME``).

    Raises:
        ConfigError: a misspelt key; the config is not a mapping.
    """
    from omegaconf import DictConfig, OmegaConf

    # a ListConfig is no mapping: as_config rejects it below
    is_omegaconf = isinstance(cfg, DictConfig)
    unresolved: Mapping[Any, Any]
    if is_omegaconf:
        # a DictConfig's container is a dict
        unresolved = cast(dict[Any, Any], OmegaConf.to_container(cfg, resolve=False))
    elif isinstance(cfg, Mapping):
        unresolved = dict(cfg)
    else:
        unresolved = as_config(cfg)  # not a mapping: as_config names what it is
    own = {key: value for key, value in unresolved.items() if key not in HYDRA_KEYS}
    unknown = [str(key) for key in own if key not in known]
    if unknown:
        referenced = _interpolated_keys(unresolved)  # the hydra section's references too (hydra_dir)
        for key in unknown:
            if key in referenced:
                continue
            if key == DEFAULTS_KEY:
                warnings.warn(
                    f"{pipeline}: the config's defaults list is ignored: only hydra's composition applies it "
                    "(oml COMMAND --config-path DIR --config-name NAME)",
                    stacklevel=4,
                )
                continue
            close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=MISSPELLING_CUTOFF)
            if close:
                check_keys({key: None}, known, pipeline)
            warnings.warn(
                f"{pipeline}: the config key {key!r} is not one of the pipeline's; it is ignored",
                stacklevel=4,
            )
    if not is_omegaconf:
        return {key: value for key, value in as_config(own).items() if key in known}
    full = OmegaConf.create(
        own
    )  # the user's variables stay for the interpolations, but only known keys resolve
    return {key: _resolved(full, key) for key in full if isinstance(key, str) and key in known}


def _resolved(cfg: Any, key: str) -> Any:
    """The value of ``cfg[key]`` with its interpolations resolved, as plain containers.

    Raises:
        ConfigError: an interpolation does not resolve (``seed: ${nope}``): one line naming the key and the
            reference (:func:`~oml_core.compose.unresolvable_config_error`).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        value = cfg[key]
        return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    except OmegaConfBaseException as e:
        raise unresolvable_config_error(e) from None


def _interpolated_keys(cfg: Any) -> set[str]:
    """The top-level keys that interpolations (``${key}``, ``${key.sub}``) anywhere in ``cfg`` refer to (a
    ``DictConfig`` is read without resolving)."""
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(cfg, resolve=False) if OmegaConf.is_config(cfg) else cfg
    found: set[str] = set()
    stack = [plain]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, str):
            found.update(_INTERPOLATION.findall(item))
    return found


def validated(schema: type[T], values: Mapping[str, Any], key: str = "") -> T:
    """An instance of the dataclass ``schema`` of ``values`` (the value of the config key ``key``; ``""``: the
    whole config), each value checked by its field's rule.

    Raises:
        ConfigError: an unknown key, a missing required key (a value ``???``, omegaconf's missing value, is
            missing too) or a value its rule refuses; the message names the key under ``key``.
    """
    where = key or getattr(schema, "pipeline", "") or schema.__name__
    schema_fields = fields(schema)  # type: ignore[arg-type]
    check_keys(values, [f.name for f in schema_fields], where)
    given = {k: v for k, v in values.items() if not (isinstance(v, str) and v == MISSING)}
    require(given, *(f.name for f in schema_fields if _is_required(f)), pipeline=where)
    prefix = f"{key}." if key else ""
    checked = {
        f.name: f.metadata[_RULE].check(given[f.name], f"{prefix}{f.name}")
        for f in schema_fields
        if f.name in given
    }
    return schema(**checked)


def check_component_arguments(config: Any, registry: Registry, key: str = "") -> None:
    """Check the argument types of every component of a checked ``config`` (:func:`validate_config`'s result),
    nested specs included, against the annotations of their factories in ``registry``, before any is built; then
    the components together (:meth:`ConfigSchema.check_components`: a training run's plugin callbacks).

    Raises:
        ConfigError: ``<key>.args.<argument>: expected <annotation>, got <value>``
            (``criterion.args.margin: expected float, got 'abc'``); see
            :func:`~oml_core.registry.registry.check_spec_argument_types`.
        RegistryError: an unknown component name (the registry's message).
    """
    for f in fields(config):
        value = getattr(config, f.name)
        if value is None:
            continue
        if _KIND in f.metadata and isinstance(value, list):  # a list of specs (specs())
            for i, item in enumerate(value):
                check_spec_argument_types(registry, f.metadata[_KIND], item, f"{key}{f.name}[{i}]")
        elif _KIND in f.metadata:
            check_spec_argument_types(registry, f.metadata[_KIND], value, f"{key}{f.name}")
        elif is_dataclass(value) and not isinstance(value, ComponentSpec):
            check_component_arguments(value, registry, f"{key}{f.name}.")
    if isinstance(config, ConfigSchema):
        config.check_components(registry)


def store_schemas() -> None:
    """Store every pipeline's schema in hydra's ``ConfigStore``: group :data:`SCHEMA_GROUP`, the pipeline's name
    (e.g. a primary config may start from ``defaults: [oml_schema/extractor_training_pipeline, _self_]``)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for name, schema in SCHEMAS.items():
        store.store(group=SCHEMA_GROUP, name=name, node=schema)


def _is_required(f: Any) -> bool:
    return isinstance(f.default, str) and f.default == MISSING


def _default(f: Any) -> Any:
    return f.default_factory() if callable(f.default_factory) else copy.deepcopy(f.default)


store_schemas()

__all__ = [
    "ARGS",
    "BOOL",
    "DEVICES",
    "ENCODING",
    "FRACTION",
    "FRACTIONS",
    "MAPPING",
    "NAME",
    "METRIC_ARGS",
    "NON_NEGATIVE_INT",
    "NULL",
    "PATH",
    "POSITIVE_INT",
    "PRECISION",
    "PRECISION_OPTIONS",
    "RESUME_ALLOWED_CHANGES",
    "SCHEDULING",
    "SCHEMAS",
    "SCHEMA_GROUP",
    "SEED",
    "SEED_RANGE",
    "STRING",
    "TAGS",
    "TOP_K",
    "CALIBRATION",
    "EXPECTED",
    "GALLERY_ROWS_OPTIONS",
    "MUST_BE",
    "ComponentSpec",
    "ConfigSchema",
    "ExtractorPredictionConfig",
    "ExtractorTrainingConfig",
    "ExtractorValidationConfig",
    "IndexBuildConfig",
    "PipelineConfig",
    "PostprocessorTrainingConfig",
    "PostprocessorValidationConfig",
    "Rule",
    "SchedulingConfig",
    "check_component_arguments",
    "component",
    "either",
    "integer",
    "list_of",
    "must_be",
    "number",
    "nullable",
    "one_of",
    "optional_defaults",
    "required_keys",
    "schema_of",
    "setting",
    "spec",
    "specs",
    "store_schemas",
    "validate_config",
    "validated",
]
