"""The schema of every pipeline's config and of ``oml index build``'s: a dataclass per pipeline (hydra's
structured configs, stored in hydra's ``ConfigStore`` as ``oml_schema/<pipeline name>``) with a field per
top-level key. A required key has no default (``MISSING``), an optional key the default the pipeline uses; every
field carries its :class:`~oml_core.config.rules.Rule` and the one text that documents the key.

A run's config enters once: the pipeline converts its argument (a dict, a ``DictConfig`` or the schema's object
itself) with :func:`~oml_core.config.typed.validate_config` at its door and from there reads only the typed
config (``config.bs_val``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, ClassVar

from oml_core.config.bounds import MAX_BATCH_SIZE, MAX_EPOCHS
from oml_core.config.callbacks import plugin_callback_specs
from oml_core.config.options import NAN_POLICIES, PREDICTIONS_FORMATS, SCHEDULER_INTERVALS
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
    count,
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
from oml_core.engine import ONE_DEVICE_ACCELERATORS, run_dir_path
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
#: A batch size (:data:`~oml_core.config.bounds.MAX_BATCH_SIZE` at most).
BATCH_SIZE = count(1, MAX_BATCH_SIZE)
#: A number of epochs (:data:`~oml_core.config.bounds.MAX_EPOCHS` at most).
EPOCHS = count(1, MAX_EPOCHS)


@dataclass
class SchedulingConfig:
    """The ``scheduling`` block of a training config: the scheduler and when Lightning steps it."""

    scheduler: ComponentSpec = spec(
        "scheduler",
        doc="The learning-rate scheduler (`oml registry scheduler`), e.g. `{name: step, args: {step_size: 10}}`.",
    )
    scheduler_interval: str = setting(
        one_of(*SCHEDULER_INTERVALS),
        "step",
        doc="When Lightning steps the scheduler: after every optimizer `step`, or every `epoch`.",
    )
    scheduler_frequency: int = setting(
        POSITIVE_INT, 1, doc="Step the scheduler every that many intervals (`scheduler_interval`)."
    )
    monitor_metric: str | None = setting(
        nullable(STRING),
        None,
        doc="The metric that a scheduler which watches one (e.g. `reduce_on_plateau`) is given, e.g. "
        "`OVERALL/cmc/1`; null: none.",
    )


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


# ------------------------------------------------------------------------------------------ shared docs
# The docs of the keys that schemas which do not inherit from each other have alike (each declares its field).
_DATASET_DOC = (
    "The kind of data: a registered dataset component (`oml registry dataset`), built from the data keys "
    "(`dataset_root`, `dataframe_name`, `data_dir`, the transforms, ...) that its factory takes; null: images "
    "(OML's dataframes)."
)
_DATASET_ROOT_DOC = (
    "The folder of the dataframe `dataframe_name`, which its relative image paths are joined to; null: the "
    "built-in mock dataset, generated on first use under the oml cache dir."
)
_EXTRACTOR_DOC = (
    "The extractor (`oml registry extractor`). Its `args.weights`: a checkpoint path (e.g. the `best.ckpt` of "
    "`oml train`), a zoo key, or null (random weights, seeded by `seed`)."
)
_CACHE_SIZE_DOC = "How many decoded images the datasets keep in an LRU cache; 0: none."
_TRANSFORMS_VAL_DOC = (
    "The transforms of the validation images (`oml registry transforms`); with a pairwise post-processor, also "
    "those of the images it compares. Null: the images are only normalised and cast to a tensor."
)
_BS_VAL_DOC = f"The batch size of the validation (at most {MAX_BATCH_SIZE:,})."
_METRIC_ARGS_DOC = (
    "The arguments of `EmbeddingMetrics`: `cmc_top_k`, `precision_top_k`, `map_top_k` (lists of positive ints), "
    "`fmr_vals`, `pcf_variance` (lists of numbers in [0, 1]), `return_only_overall_category`, `knn_backend` "
    "(null: exact search; or a registered backend, e.g. `knn_backend@metric_args.knn_backend=exact`), ...; "
    "`shard_gallery` (with DDP). Null or `{}`: `EmbeddingMetrics`' defaults."
)
_LOG_IMAGES_DOC = (
    "True: PNG figures of the worst queries of every per-query metric (after re-ranking, with a post-processor) "
    "in `<run dir>/figures/` (in a training: `figures/epoch_<n>/`), and in the logger."
)
_LOGGER_DOC = (
    "The pipeline's logger (`oml registry logger`), given the run's config; null: TensorBoard, in the run's "
    "folder."
)
_TAGS_DOC = "Tags logged with the config: a list, one tag, or null (none)."
_FIND_UNUSED_PARAMETERS_DOC = (
    "DDP's `find_unused_parameters` (with more than one process only): true when some parameters of the model get "
    "no gradient."
)
_EMBEDDINGS_CACHE_DIR_DOC = (
    "A folder of the extractor's embeddings, a file per split, keyed by the extractor (its weights' content), "
    "the transforms, the dataframe, `precision` and `seed`: `oml train-postprocessor` and `oml "
    "validate-postprocessor` reuse each other's files for the same ones. Null: computed on every run."
)
_DATA_DIR_DOC = (
    "A folder of images (.jpg, .jpeg, .png, any case, searched recursively) instead of the dataframe (no "
    "labels); null: the dataframe."
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
        (none here); :func:`~oml_core.config.typed.check_component_arguments` calls it after checking each."""

    def as_mapping(self) -> dict[str, Any]:
        """Every key of the config and its checked value (the values themselves, not copies)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class PipelineConfig(ConfigSchema):
    """The keys every pipeline has: the run's name, seed and engine, where it writes, its data loading."""

    postfix: str = setting(
        NAME,
        "",
        doc="The end of the name of the run's folder, `<date>_<time>_<postfix>` (when `logs_folder` is null).",
    )
    seed: int = setting(
        SEED,
        42,
        doc="The seed of everything: Python's, numpy's and torch's generators, the sampler's, and random weights.",
    )
    precision: int | str = setting(
        PRECISION,
        32,
        doc="Lightning's precision (`Fabric`'s): e.g. 32, `16-mixed` or `bf16-mixed` (mixed precision on a GPU).",
    )
    accelerator: str | None = setting(
        nullable(STRING),
        None,
        doc="Lightning's accelerator (`cpu`, `gpu`, ...); null: `gpu` when CUDA is available, else `cpu`.",
    )
    devices: Any = setting(  # null, an int or a list of ints (an omegaconf field cannot say so)
        DEVICES,
        1,
        doc="The devices of each machine: a number of devices, or a list of device indices (`[0, 1]`); null: "
        "every GPU (1 on the CPU). More than one process runs DDP: every batch is split among the processes. The "
        "post-processor pipelines run on one device (1 or `[i]`).",
    )
    num_nodes: int = setting(
        POSITIVE_INT,
        1,
        doc="Machines, each running `devices` processes (multi-node under torchrun or SLURM: see the README).",
    )
    dataset: ComponentSpec | None = spec("dataset", optional=True, doc=_DATASET_DOC)
    dataset_root: str | None = setting(nullable(PATH), None, doc=_DATASET_ROOT_DOC)
    dataframe_encoding: str = setting(
        ENCODING,
        DEFAULT_ENCODING,
        doc="The text encoding of the csv `dataframe_name`: utf-8 (pandas' default, as OML reads it), or e.g. "
        "latin-1, cp1252 (files saved by Excel).",
    )
    logs_root: str = setting(PATH, "logs", doc="The folder of the runs' folders.")
    logs_folder: str | None = setting(
        nullable(PATH),
        None,
        doc="The run's own new folder under `logs_root` (inside it: no absolute path, no `..`); null: "
        "`<date>_<time>_<postfix>`. `_1`, `_2`, ... is appended to a name that is taken: nothing is overwritten.",
    )
    num_workers: int = setting(
        NON_NEGATIVE_INT, 0, doc="The data loaders' worker processes; 0: loading in the main process."
    )
    lightning_trainer_extra_args: dict[str, Any] | None = setting(
        nullable(MAPPING),
        None,
        doc="More `pl.Trainer` arguments, which win over the pipeline's (`num_sanity_val_steps=0`, "
        "`deterministic=True`, `log_every_n_steps=1`, `enable_model_summary=False`); null: none. Its "
        "`enable_progress_bar` null or absent: progress bars only on a terminal (stdout and stderr; in logs "
        "written to a file or CI none, and a training prints a line per epoch instead); true or false: always or "
        "never a bar.",
    )

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
    dataframe_name: str = setting(
        PATH,
        doc="The csv in OML's dataframe format (or Parquet: a `.parquet` file or a folder of them) under "
        "`dataset_root`, whose `split` validation rows are validated.",
    )
    cache_size: int = setting(NON_NEGATIVE_INT, 0, doc=_CACHE_SIZE_DOC)
    transforms_val: ComponentSpec | None = spec("transforms", optional=True, doc=_TRANSFORMS_VAL_DOC)
    bs_val: int = setting(BATCH_SIZE, doc=_BS_VAL_DOC)
    metric_args: dict[str, Any] = setting(METRIC_ARGS, {}, doc=_METRIC_ARGS_DOC)
    postprocessor: ComponentSpec | None = spec(
        "postprocessor",
        optional=True,
        doc="A registered post-processor applied to the retrieval results before the metrics, e.g. "
        "`{name: constant_thresholding, args: {th: 0.5}}`; null: none.",
    )
    log_images: bool = setting(BOOL, False, doc=_LOG_IMAGES_DOC)
    extractor: ComponentSpec = spec("extractor", doc=_EXTRACTOR_DOC)
    logger: ComponentSpec | None = spec("logger", optional=True, doc=_LOGGER_DOC)
    tags: list[Any] = setting(TAGS, [], doc=_TAGS_DOC)


@dataclass
class PostprocessorValidationConfig(ExtractorValidationConfig):
    """The config of ``postprocessor_validation_pipeline``: that of the extractor's validation, a pairwise
    ``postprocessor`` required, and the embeddings' cache."""

    pipeline: ClassVar[str] = "postprocessor_validation_pipeline"

    postfix: str = setting(NAME, "postprocessor_validation")
    postprocessor: ComponentSpec = spec(
        "postprocessor",
        doc="The pairwise post-processor that re-ranks the top results of every query, e.g. `{name: "
        "pairwise_reranker, args: {top_n: 5, pairwise_model: {name: concat_siamese, args: {weights: <the "
        "best.ckpt of oml train-postprocessor>}}}}`; its pairwise model runs on the configured device.",
    )
    embeddings_cache_dir: str | None = setting(nullable(PATH), None, doc=_EMBEDDINGS_CACHE_DIR_DOC)


@dataclass
class ExtractorPredictionConfig(PipelineConfig):
    """The config of ``extractor_prediction_pipeline``."""

    pipeline: ClassVar[str] = "extractor_prediction_pipeline"

    postfix: str = setting(NAME, "prediction")
    data_dir: str | None = setting(
        nullable(PATH),
        None,
        doc="A folder whose images (.jpg, .jpeg, .png, any case, searched recursively) are predicted, in the "
        "sorted order of their paths; null: those of `dataframe_name`. Give at most one of them; with neither, "
        "the images of the built-in mock dataset are predicted.",
    )
    dataframe_name: str | None = setting(
        nullable(PATH),
        None,
        doc="A csv (or Parquet: a `.parquet` file or a folder of them) under `dataset_root` whose `path` column "
        "(and bounding boxes `x_1, x_2, y_1, y_2`, if any) "
        "gives the images, all its rows, in its order; null: the images of `data_dir`.",
    )
    save_dir: str | None = setting(
        nullable(PATH),
        None,
        doc="The folder of `predictions.json` (`{image path: [feature, ...]}`, OML's format; or of the file of "
        "`predictions_format`), created if needed; an existing predictions file is never overwritten. Null: a new "
        "run folder under `logs_root`.",
    )
    predictions_format: str = setting(
        one_of(*PREDICTIONS_FORMATS),
        "json",
        doc="The format of the features: `json`, OML's `predictions.json` (with its sidecar "
        "`predictions.json.meta.json`: ids, labels and provenance); `parquet`, `predictions.parquet` (columns `id, "
        "path, label, embedding`: float32 vectors, in row groups); "
        "`npy`, `predictions.npy` (a float32 matrix) and its sidecar `predictions.npy.meta.json`. Parquet and npy "
        "are written batch by batch; every format records the extractor spec, the sha256 of its weights and the "
        "transforms, so that `oml index build embeddings=<file>` builds an index from them without embedding "
        "again.",
    )
    bs: int = setting(BATCH_SIZE, doc=f"The batch size of the prediction (at most {MAX_BATCH_SIZE:,}).")
    transforms_predict: ComponentSpec | None = spec(
        "transforms",
        optional=True,
        doc="The transforms of the images (`oml registry transforms`); null: the images are only normalised and "
        "cast to a tensor.",
    )
    extractor: ComponentSpec = spec("extractor", doc=_EXTRACTOR_DOC)


@dataclass
class TrainingConfig(PipelineConfig):
    """The keys of both training pipelines (extractor and post-processor)."""

    seed: int = setting(SEED)
    dataframe_name: str = setting(
        PATH,
        doc="The csv in OML's dataframe format (or Parquet: a `.parquet` file or a folder of them) under "
        "`dataset_root`: its `split` train rows train, its "
        "validation rows validate.",
    )
    cache_size: int = setting(NON_NEGATIVE_INT, 0, doc=_CACHE_SIZE_DOC)
    show_dataset_warnings: bool = setting(
        BOOL,
        True,
        doc=(
            "Warn about doubtful rows of the dataframe (duplicated items, labels in both splits, paths that climb "
            "out of the dataset folder with .., train labels of one row)."
        ),
    )
    transforms_train: ComponentSpec | None = spec(
        "transforms",
        optional=True,
        doc="The transforms (augmentations) of the training images (`oml registry transforms`); null: the images "
        "are only normalised and cast to a tensor.",
    )
    sampler: ComponentSpec | None = spec(
        "sampler",
        optional=True,
        doc="The batch sampler (`oml registry sampler`), e.g. `{name: balance, args: {n_labels: 4, n_instances: "
        "4}}`: every batch holds positive pairs; null: shuffled batches of `bs_train`, the last incomplete one "
        "dropped.",
    )
    bs_train: int | None = setting(
        nullable(BATCH_SIZE),
        None,
        doc="The batch size when `sampler` is null (required then); with DDP the global batch, split among the "
        f"processes (at most {MAX_BATCH_SIZE:,}).",
    )
    max_epochs: int = setting(
        EPOCHS,
        doc="The number of epochs to train (a resumed run goes on up to that many epochs in all; at most "
        f"{MAX_EPOCHS:,}).",
    )
    valid_period: int = setting(
        EPOCHS,
        1,
        doc="Validate every that many epochs, and always after the last one (so that `best.ckpt` exists; at most "
        f"{MAX_EPOCHS:,}).",
    )
    metric_args: dict[str, Any] = setting(METRIC_ARGS, {}, doc=_METRIC_ARGS_DOC)
    log_images: bool = setting(BOOL, False, doc=_LOG_IMAGES_DOC)
    metric_for_checkpointing: str = setting(
        STRING,
        doc="The validation metric that picks `checkpoints/best.ckpt`, e.g. `OVERALL/cmc/1`.",
    )
    mode_for_checkpointing: str = setting(
        one_of("min", "max"),
        "max",
        doc="`max`: the highest `metric_for_checkpointing` is the best; `min`: for the metrics where lower is "
        "better.",
    )
    checkpoint_every_n_steps: int | None = setting(
        nullable(POSITIVE_INT),
        None,
        doc="Also save `checkpoints/last.ckpt` every that many steps within an epoch (long epochs); null: never "
        "within an epoch.",
    )
    checkpoint_every_seconds: float = setting(
        number(0, math.inf),
        60.0,
        doc="Save `checkpoints/last.ckpt` after an epoch once that many seconds passed since its last save (and "
        "at the end of training, and on Ctrl-C/SIGTERM); 0: after every epoch. `best.ckpt` is saved whenever "
        "the validation improves, `last.ckpt` after it. Every checkpoint is written atomically and carries the "
        "run's record (its config, the sha256 of its dataframe, the epochs done).",
    )
    nan_policy: str = setting(
        one_of(*NAN_POLICIES),
        "stop",
        doc="A NaN or infinite loss: `stop` the run at that step (the last good checkpoint kept), or `skip_batch` "
        "(skip that batch's optimizer step). `skip_batch` stops the run too once skipping cannot help: a weight "
        "or the batch's embeddings not finite, 5 such batches in a row, or every batch of an epoch (the learning "
        "rate is then at fault).",
    )
    optimizer: ComponentSpec = spec(
        "optimizer", doc="The optimizer (`oml registry optimizer`), e.g. `{name: adam, args: {lr: 0.001}}`."
    )
    scheduling: SchedulingConfig | None = setting(
        SCHEDULING,
        None,
        doc="The learning-rate scheduler and when Lightning steps it, e.g. `{scheduler: {name: step, args: "
        "{step_size: 10}}, scheduler_interval: epoch, scheduler_frequency: 1, monitor_metric: null}`; null (or "
        "`{}`): none.",
    )
    freeze_n_epochs: int = setting(
        count(0, MAX_EPOCHS),
        0,
        doc="Keep an `IFreezable` extractor frozen for the first that many epochs (the post-processor's training: "
        f"train only the pairwise model's head, which e.g. `concat_siamese` has; at most {MAX_EPOCHS:,}).",
    )
    logger: ComponentSpec | None = spec("logger", optional=True, doc=_LOGGER_DOC)
    tags: list[Any] = setting(TAGS, [], doc=_TAGS_DOC)
    resume: str | None = setting(
        nullable(PATH),
        None,
        doc="A run's checkpoint (`<run>/checkpoints/last.ckpt`) to go on from, in that run's own folder "
        "(`logs_root`/`logs_folder` not used): weights, optimizer, scheduler, epoch, best checkpoint, validation "
        "history, random state and the position within an epoch; it ends as the uninterrupted run would. Refused "
        "before any work: a run that already trained `max_epochs` epochs, and a config whose run keys (the "
        "models, loss, optimizer, scheduling, sampler, `bs_train`, transforms, `freeze_n_epochs`, the "
        "checkpointing metric, `seed`, and the dataset: its dataframe's path and bytes) differ from the run's; "
        "the other keys (`max_epochs`, logs, `devices`, `num_workers`, `precision`, `logger`, `valid_period`, "
        "the checkpoint cadence) may change. Null: a new run.",
    )
    resume_allow_changes: list[str] = setting(
        list_of(one_of(*RESUME_ALLOWED_CHANGES)),
        [],
        doc="What a resumed run may change of its run: `[seed]` (its random state starts from the new seed) "
        "and/or `[dataset]` (new data; the earlier epochs' metrics and best checkpoint are not carried over).",
    )
    callbacks: list[ComponentSpec] = specs(
        "callback",
        doc="The Lightning callbacks of plugins (`oml_register_callbacks`; `oml plugins` lists them) added to the "
        "run, in this order: `[{name: ..., args: {...}}, ...]`.",
    )
    callbacks_disabled: list[str] = setting(
        list_of(STRING),
        [],
        doc="The every-run callbacks of plugins (registered `every_run=True`: added to every training run with "
        "their default arguments unless `callbacks` names them) that this run goes without, by name.",
    )

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
    find_unused_parameters: bool = setting(BOOL, False, doc=_FIND_UNUSED_PARAMETERS_DOC)
    gather_across_devices: bool = setting(
        BOOL,
        False,
        doc="Cross-device negatives (with more than one process only): the criterion and its miner get the "
        "embeddings and labels of every process's batch, so that N processes train as one on the global batch "
        "(each process's gradients flow back to its own embeddings); false: each process's loss sees its own share "
        "(OML's behaviour). Memory: every process holds N batches' embeddings, and a miner's distance matrix is "
        "N*B x N*B for batches of B per process.",
    )
    transforms_val: ComponentSpec | None = spec("transforms", optional=True, doc=_TRANSFORMS_VAL_DOC)
    bs_val: int = setting(BATCH_SIZE, doc=_BS_VAL_DOC)
    check_images: bool = setting(
        BOOL,
        True,
        doc="Read every image (and check its box) before training; false (`--skip-image-check`) for huge sets.",
    )
    validate_before_training: bool = setting(
        BOOL,
        True,
        doc="Validate the initial weights first, as epoch 0, so that the report shows what training changed.",
    )
    extractor: ComponentSpec = spec("extractor", doc=_EXTRACTOR_DOC)
    criterion: ComponentSpec = spec(
        "loss",
        doc="The loss (`oml registry loss`), e.g. `{name: triplet_with_miner, args: {margin: 0.2, miner: {name: "
        "all_triplets}}}`.",
    )


@dataclass
class PostprocessorTrainingConfig(TrainingConfig):
    """The config of ``postprocessor_training_pipeline``."""

    pipeline: ClassVar[str] = "postprocessor_training_pipeline"

    find_unused_parameters: bool = setting(
        BOOL,
        False,
        doc=f"{_FIND_UNUSED_PARAMETERS_DOC} OML's configs have it; this pipeline runs on one device.",
    )
    embeddings_cache_dir: str | None = setting(nullable(PATH), None, doc=_EMBEDDINGS_CACHE_DIR_DOC)
    extractor: ComponentSpec = spec(
        "extractor",
        doc="The trained extractor whose top results are re-ranked. Its `args.weights`: a checkpoint path (e.g. "
        "the `best.ckpt` of `oml train`), a zoo key, or null (random weights, seeded by `seed`).",
    )
    transforms_extraction: ComponentSpec = spec(
        "transforms",
        doc="The transforms of the extraction, and of the images of the validation's re-ranking.",
    )
    batch_size_inference: int = setting(
        BATCH_SIZE,
        doc=f"The batch size of the extraction and of the validation batches (at most {MAX_BATCH_SIZE:,}).",
    )
    pairwise_model: ComponentSpec = spec(
        "pairwise_model",
        doc="The model to train (`oml registry pairwise_model`), e.g. `trivial_distance_siamese` or "
        "`concat_siamese`, whose extractor may start from the extractor's weights "
        "(`${extractor.args.weights}`); its `weights`: a checkpoint of the whole model, or null.",
    )
    hard_pairs_mining: bool = setting(
        BOOL,
        True,
        doc="The pairs of the hardest triplets of every batch (else of all its triplets); used when "
        "`pairs_miner` is null.",
    )
    pairs_miner: ComponentSpec | None = spec(
        "pairs_miner",
        optional=True,
        doc="A registered pair miner's spec (`hard_pairs_mining` is then not used); null: OML's `PairsMiner` "
        "(`pairs` of the `oml_losses` plugin) with `hard_pairs_mining`.",
    )
    postprocessor: ComponentSpec = spec(
        "postprocessor",
        doc="The post-processor that validates the model by re-ranking, e.g. `pairwise_reranker` with `top_n`. "
        "It re-ranks with the model being trained: its `args.pairwise_model` is left out or equals "
        "`pairwise_model` (`${pairwise_model}`).",
    )


#: Which rows of the dataframe ``oml index build`` puts in the gallery (``GalleryIndex.add_dataset``'s ``rows``,
#: :data:`oml_core.index.gallery.GALLERY_ROWS`; a test keeps them equal). Held here, as the schema imports no index.
GALLERY_ROWS_OPTIONS = ("all", "gallery")
#: ``calibration``: null, or the arguments of ``GalleryIndex.calibrate`` (``oml_core.index.build`` checks them).
CALIBRATION = must_be(nullable(MAPPING), "null or a mapping of target, value, top_n")


@dataclass
class IndexBuildConfig(ConfigSchema):
    """The config of ``oml index build`` (:func:`oml_core.index.build.build_gallery_index`). Every key is required
    but ``dataset``, ``check_images``, ``accelerator`` and ``devices`` (configs written before they existed lack
    them); a key it does not know is refused, and its messages read ``bs must be an integer >= 1, got 0``."""

    pipeline: ClassVar[str] = "index_build"
    user_variables: ClassVar[bool] = False

    seed: int = setting(
        must_be(NON_NEGATIVE_INT, "an integer >= 0"),
        doc="Seeds the extractor's random weights (the same ones again at `oml search`).",
    )
    dataset: ComponentSpec | None = spec("dataset", optional=True, doc=_DATASET_DOC)
    dataset_root: str | None = setting(nullable(PATH), doc=_DATASET_ROOT_DOC)
    dataframe_name: str | None = setting(
        nullable(PATH),
        doc="The csv in OML's dataframe format (or Parquet: a `.parquet` file or a folder of them) under "
        "`dataset_root`: its rows (see `gallery_rows`) are the "
        "gallery, its `split` validation rows calibrate the threshold.",
    )
    data_dir: str | None = setting(nullable(PATH), doc=_DATA_DIR_DOC)
    check_images: bool = setting(
        must_be(BOOL, "true or false"), True, doc="Read every image (and its box) once before any model runs."
    )
    gallery_rows: str = setting(
        must_be(one_of(*GALLERY_ROWS_OPTIONS), f"one of {list(GALLERY_ROWS_OPTIONS)}"),
        doc="`all`: every row of the dataframe is in the gallery; `gallery`: only its rows with `is_gallery` true.",
    )
    index_dir: str | None = setting(
        nullable(PATH),
        doc="The new folder of the index (never written over: it must not exist, or be empty); null: "
        "`<logs_root>/<date>_<time>_index`.",
    )
    logs_root: str = setting(PATH, doc="The folder of the new index folder when `index_dir` is null.")
    bs: int = setting(
        must_be(BATCH_SIZE, "an integer >= 1"),
        doc=f"The batch size of the embedding (at most {MAX_BATCH_SIZE:,}).",
    )
    num_workers: int = setting(
        must_be(NON_NEGATIVE_INT, "an integer >= 0"),
        doc="The data loader's worker processes; 0: loading in the main process.",
    )
    accelerator: str | None = setting(
        must_be(
            nullable(one_of(*ONE_DEVICE_ACCELERATORS)), f"null or one of {list(ONE_DEVICE_ACCELERATORS)}"
        ),
        None,
        doc="Where the extractor embeds, as the pipelines' `accelerator`: `cpu`, or `gpu` (`cuda`); null: `gpu` "
        "when CUDA is available, else `cpu`. The index is the same whatever device embeds: its embeddings are "
        "float32 on the CPU (a GPU computes its convolutions in float32, not TF32), nothing of the device is saved.",
    )
    devices: Any = setting(
        must_be(DEVICES, "null, a positive integer or a non-empty list of device indices"),
        1,
        doc="The one device that embeds, as the pipelines' `devices`: 1 (on `gpu`: the first GPU), or a list of "
        "one device index (`[i]`: the GPU `cuda:i`); null: every GPU (1 on the CPU), which must be one. More "
        "than one device is refused: the index is built on one.",
    )
    transforms: ComponentSpec | None = spec(
        "transforms",
        optional=True,
        required=True,
        doc="The transforms of the items, offered to the dataset component as `transforms_predict` and "
        "`transforms_val`; null: none.",
    )
    extractor: ComponentSpec = spec("extractor", doc=_EXTRACTOR_DOC)
    distance: str = setting(
        STRING, doc="`l2` or `cosine` (`knn_backend.args.distance`, if given, must be the same)."
    )
    knn_backend: ComponentSpec = spec(
        "knn_backend",
        doc="The knn backend that searches the gallery: any registered one (`oml registry knn_backend`), e.g. "
        "`knn_backend@knn_backend=exact`.",
    )
    embeddings: str | None = setting(
        nullable(PATH),
        None,
        doc="An embeddings file of the gallery (`.parquet`, `.npy` or `.json`, written by `oml predict` or by "
        "`oml index build embeddings_out=...`), or a folder of Parquet shards and their `embeddings.json` "
        "(written by `oml embed` of the oml-ray plugin; every shard must be there): the index is built from its "
        "items, labels and vectors without embedding them again; its provenance must be the config's "
        "`extractor` (spec and weights) and `transforms`, else the build is refused naming both; of a folder, "
        "the `extractor` must first embed the probe query of `embeddings.json` as recorded there (within an index's "
        "probe tolerance), else the build is refused naming the distance. The index is not calibrated (the file "
        "holds no validation split). Null: the items of the dataset are embedded.",
    )
    predictions_format: str = setting(
        must_be(one_of(*PREDICTIONS_FORMATS), f"one of {list(PREDICTIONS_FORMATS)}"),
        "json",
        doc="The format of `embeddings_out`: `json` (OML's, with a sidecar), `parquet` or `npy` (with a "
        "sidecar).",
    )
    embeddings_out: str | None = setting(
        nullable(PATH),
        None,
        doc="A new file (its suffix that of `predictions_format`: `.json`, `.parquet`, `.npy`) to which the "
        "gallery's ids, paths, labels and embeddings are also written, with their provenance (never written "
        "over); null: none.",
    )
    calibration: dict[str, Any] | None = setting(
        CALIBRATION,
        doc="The match threshold, calibrated on the dataframe's `split` validation rows (their queries against "
        "their gallery items, OML's self and sequence exclusion): `target` precision (`value` in (0, 1]; null: "
        "0.9), f1 (the highest F1, `value` null) or fmr (`value` in [0, 1]; null: 0.01); `top_n`: the items "
        "retrieved per query (the FMR counts the irrelevant ones). Null: no calibration (`oml search` answers "
        "with distances only).",
    )

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
    "BATCH_SIZE",
    "CALIBRATION",
    "ConfigSchema",
    "DEVICES",
    "ENCODING",
    "EPOCHS",
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
