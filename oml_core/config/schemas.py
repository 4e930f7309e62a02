"""The schema of every pipeline's config and of ``oml index build``'s: a dataclass per pipeline (hydra's
structured configs, stored in hydra's ``ConfigStore`` as ``oml_schema/<pipeline name>``) with a field per
top-level key. A required key has no default (``MISSING``), an optional key the default the pipeline uses; every
field carries its :class:`~oml_core.config.rules.Rule` and the one text that documents the key.

A run's config enters once: the pipeline converts its argument (a dict, a ``DictConfig`` or the schema's object
itself) with :func:`~oml_core.config.validate.validate_config` at its door and from there reads only the typed
config (``config.bs_val``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, ClassVar

from oml_core.config.callbacks import plugin_callback_specs
from oml_core.config.options import NAN_POLICIES, SCHEDULER_INTERVALS
from oml_core.config.rules import (
    BOOL,
    FRACTION,
    MAPPING,
    NAME,
    NON_NEGATIVE_INT,
    PATH,
    POSITIVE_INT,
    STRING,
    TAGS,
    ComponentSpec,
    Rule,
    check_keys,
    default_of,
    integer,
    is_required,
    list_of,
    must_be,
    nullable,
    number,
    one_of,
    setting,
    spec,
    specs,
    validated,
)
from oml_core.const import TOP_K_SUFFIX
from oml_core.datasets.dataframe_format import DEFAULT_ENCODING
from oml_core.engine import run_dir_path
from oml_core.registry import ConfigError, Registry
from oml_core.registry.arg_types import check_argument_types
from oml_core.utils.text import is_text_encoding

#: The ``ConfigStore`` group of the schemas (``oml_schema/extractor_training_pipeline``, ...).
SCHEMA_GROUP = "oml_schema"


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
        (none here); :func:`~oml_core.config.validate.check_component_arguments` calls it after checking each."""

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
        (:func:`~oml_core.engine.run_dir_path`: no absolute path, no ``..``, no symbolic
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
        :func:`~oml_core.config.callbacks.plugin_callback_specs`."""
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
    return tuple(f.name for f in fields(schema_of(pipeline)) if is_required(f))


def optional_defaults(pipeline: str) -> dict[str, Any]:
    """``{key: default}`` of the optional keys of ``pipeline`` (fresh copies of mutable defaults)."""
    return {f.name: default_of(f) for f in fields(schema_of(pipeline)) if not is_required(f)}


def store_schemas() -> None:
    """Store every pipeline's schema in hydra's ``ConfigStore``: group :data:`SCHEMA_GROUP`, the pipeline's name
    (e.g. a primary config may start from ``defaults: [oml_schema/extractor_training_pipeline, _self_]``)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for name, schema in SCHEMAS.items():
        store.store(group=SCHEMA_GROUP, name=name, node=schema)


store_schemas()

__all__ = [
    "CALIBRATION",
    "ConfigSchema",
    "DEVICES",
    "ENCODING",
    "ExtractorPredictionConfig",
    "ExtractorTrainingConfig",
    "ExtractorValidationConfig",
    "FRACTIONS",
    "GALLERY_ROWS_OPTIONS",
    "IndexBuildConfig",
    "METRIC_ARGS",
    "PRECISION",
    "PRECISION_OPTIONS",
    "PipelineConfig",
    "PostprocessorTrainingConfig",
    "PostprocessorValidationConfig",
    "RESUME_ALLOWED_CHANGES",
    "SCHEDULING",
    "SCHEMAS",
    "SCHEMA_GROUP",
    "SEED",
    "SEED_RANGE",
    "SchedulingConfig",
    "TOP_K",
    "TrainingConfig",
    "optional_defaults",
    "required_keys",
    "schema_of",
    "store_schemas",
]
