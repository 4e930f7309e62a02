"""``postprocessor_training_pipeline``: train a pairwise post-processor (STIR-style re-ranker) on top of a
trained extractor, from an OML-style config.

Also the extraction stage that the post-processing pipelines share: the extractor's embeddings computed once
and cached (:class:`CachedEmbeddings`), the pairwise post-processor built around a given model, and the
metrics before and after post-processing.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from oml_core.interfaces.models import IFreezable
from oml_core.lightning.callbacks.metric import MetricValCallback
from oml_core.lightning.modules.extractor import ExtractorModule
from oml_core.lightning.modules.pairwise_postprocessing import PairwiseModule
from oml_core.lightning.pipelines.common import (
    as_config,
    build_logger,
    check_components,
    check_keys,
    format_metrics_table,
    is_ddp_devices,
    make_run_dir,
    parse_engine_params,
    read_dataframe,
    require,
    resolve_dataset_root,
    split_dataframe,
)
from oml_core.lightning.pipelines.inference import TRAINER_DEFAULTS as INFERENCE_TRAINER_DEFAULTS
from oml_core.lightning.pipelines.inference import build_extractor
from oml_core.lightning.pipelines.predict import _in_dataset_order
from oml_core.lightning.pipelines.train import (
    SCHEDULING_KEYS,
    _checkpoint_callbacks,
    _scheduler_args,
    _train_loader,
    _trainer_args,
)
from oml_core.registry import ConfigError, Registry, RegistryError, default_registry, to_plain

PIPELINE = "postprocessor_training_pipeline"
REQUIRED_KEYS = (
    "postfix",
    "seed",
    "dataframe_name",
    "logs_root",
    "extractor",
    "transforms_extraction",
    "transforms_train",
    "pairwise_model",
    "optimizer",
    "max_epochs",
    "batch_size_inference",
    "postprocessor",
    "metric_for_checkpointing",
)
DEFAULTS: dict[str, Any] = {
    "precision": 32,
    "accelerator": None,
    "devices": 1,
    "dataset_root": None,
    "logs_folder": None,
    "num_workers": 0,
    "cache_size": 0,
    "embeddings_cache_dir": None,
    "hard_pairs_mining": True,
    "sampler": None,
    "bs_train": None,
    "valid_period": 1,
    "metric_args": {},
    "log_images": False,
    "mode_for_checkpointing": "max",
    "scheduling": None,
    "freeze_n_epochs": 0,
    "logger": None,
    "lightning_trainer_extra_args": None,
    "tags": [],
}
COMPONENT_KINDS = {
    "extractor": "extractor",
    "pairwise_model": "pairwise_model",
    "postprocessor": "postprocessor",
    "optimizer": "optimizer",
    "sampler": "sampler",
    "transforms_extraction": "transforms",
    "transforms_train": "transforms",
    "logger": "logger",
}
#: The key of the cached embeddings in the items of the training dataset and in the validation batches.
EMBEDDINGS_KEY = "embeddings"
#: Bump when the cache files' content changes meaning, so that old files are never read.
CACHE_FORMAT = 1
#: Prefix of the metrics before post-processing in the logger (the metrics after have OML's plain keys).
BEFORE_PREFIX = "before_postprocessing/"
BEFORE_TITLE = "Metrics before post-processing (the extractor's embeddings only)"
AFTER_TITLE = "Metrics after post-processing"
FIGURES_FOLDER = "figures"
CHECKPOINTS_FOLDER = "checkpoints"


@dataclass
class EmbeddingsSource:
    """Where the embeddings of one split came from.

    Attributes:
        split: ``train`` or ``validation``.
        cache_file: The cache file (``None`` when ``embeddings_cache_dir`` is null).
        from_cache: ``True`` when they were read from ``cache_file`` (the extractor did not run).
    """

    split: str
    cache_file: Path | None
    from_cache: bool


@dataclass
class PostprocessorTrainingResult:
    """What a post-processor training run produced.

    Attributes:
        metrics: The last validation metrics after post-processing, flat (``{"OVERALL/cmc/1": 0.75, ...}``).
        metrics_before: The validation metrics of the extractor's embeddings alone.
        run_dir: The run's own directory under ``logs_root``.
        log_dir: Where the logger wrote.
        best_checkpoint: The checkpoint of the pairwise model with the best ``metric_for_checkpointing``.
        last_checkpoint: The checkpoint of the last epoch.
        embeddings: Where the embeddings of every split came from.
    """

    metrics: dict[str, float]
    metrics_before: dict[str, float]
    run_dir: Path
    log_dir: Path | None
    best_checkpoint: Path | None
    last_checkpoint: Path | None
    embeddings: list[EmbeddingsSource]


def postprocessor_training_pipeline(
    cfg: Mapping[str, Any] | Any, registry: Registry | None = None
) -> PostprocessorTrainingResult:
    """Train and validate a pairwise postprocessor which fixes mistakes of a feature extractor in retrieval
    setup (OML's STIR recipe).

    The config (a dict or ``DictConfig``) has OML's keys; components are ``{name, args}`` specs built by
    ``registry`` (the default registry when None). Required:

    - ``postfix, seed, dataframe_name, logs_root``: as in the extractor's training pipeline.
    - ``extractor``: the trained extractor (``args.weights``: a checkpoint such as the ``best.ckpt`` of
      ``oml train``, a zoo key, or null for random weights); ``transforms_extraction``: its transforms;
      ``batch_size_inference``: the batch size of the extraction and of the validation batches.
    - ``pairwise_model``: the model to train (e.g. ``concat_siamese``, whose extractor may start from the same
      weights); ``transforms_train``: the transforms of its training images; ``optimizer``.
    - ``postprocessor``: the post-processor that validates the model by re-ranking (e.g. ``pairwise_reranker``
      with ``top_n``). It re-ranks with the model being trained: its ``args.pairwise_model`` is left out or
      equals ``pairwise_model`` (OML's configs interpolate it, ``${pairwise_model}``).
    - ``max_epochs, metric_for_checkpointing``.

    Optional, with their defaults: ``precision`` (32), ``accelerator`` (null: gpu when CUDA is available),
    ``devices`` (1: this pipeline runs on one device), ``dataset_root`` (null: the mock dataset),
    ``logs_folder`` (null), ``num_workers`` (0), ``cache_size`` (0), ``embeddings_cache_dir`` (null: no
    cache; see :class:`CachedEmbeddings` for the key), ``hard_pairs_mining`` (true), ``sampler`` (null:
    shuffled batches of ``bs_train``; OML's configs use ``balance``, which makes every batch hold positive
    pairs), ``bs_train`` (null), ``valid_period`` (1), ``metric_args`` ({}), ``log_images`` (false),
    ``mode_for_checkpointing`` (max), ``scheduling`` (null), ``freeze_n_epochs`` (0), ``logger`` (null:
    TensorBoard), ``lightning_trainer_extra_args`` (null), ``tags`` ([]).

    Steps: (a) the embeddings of the train and validation splits by the extractor (``transforms_extraction``),
    read from ``embeddings_cache_dir`` when cached there; (b) training of :class:`PairwiseModule`: in every
    batch (images with ``transforms_train`` and their cached embeddings) ``PairsMiner(hard_mining=
    hard_pairs_mining)`` mines pairs on the embeddings, the pairwise model gets their images and learns
    ``is_negative`` with ``BCEWithLogitsLoss``; (c) validation every ``valid_period`` epochs: the retrieval
    results of the validation embeddings re-ranked by the post-processor, which holds the model as trained so
    far, its images read with ``transforms_extraction``. The metrics of the embeddings alone (before) are
    computed once. ``checkpoints/best.ckpt`` and ``checkpoints/last.ckpt`` hold the pairwise model (its
    ``weights`` argument loads them). Both metric tables and the paths are printed.

    ``PairsMiner`` comes from the ``oml_losses`` plugin (imported when the pipeline runs).

    Returns:
        A :class:`PostprocessorTrainingResult`.

    Raises:
        ConfigError: an unknown, missing or malformed key, bad weights, more than one device (one line naming
            the key); RegistryError: an unknown component name or argument.
    """
    cfg = as_config(cfg)
    _check_config(cfg)
    cfg = {**DEFAULTS, **cfg}
    registry = registry or default_registry()
    check_components(cfg, registry, COMPONENT_KINDS)
    if cfg["scheduling"]:
        check_components(cfg["scheduling"], registry, {"scheduler": "scheduler"})
    engine = parse_engine_params(cfg)
    if is_ddp_devices(engine["devices"]):
        raise ConfigError(
            f"{PIPELINE}: devices={cfg['devices']!r}, but this pipeline runs on one device: set devices to 1 "
            f"or to a list of one device index, e.g. [0]"
        )
    trainer_args = _trainer_args(cfg, engine)
    pl.seed_everything(cfg["seed"], workers=True, verbose=False)

    module = _pairwise_module(cfg, registry)
    postprocessor = _postprocessor(cfg, registry, module.model)
    extraction = CachedEmbeddings(
        registry,
        cfg,
        transforms_spec=cfg["transforms_extraction"],
        dataframe_path=resolve_dataset_root(cfg) / cfg["dataframe_name"],
        trainer_args=extraction_trainer_args(engine, cfg),
        batch_size=cfg["batch_size_inference"],
        pipeline=PIPELINE,
    )
    train_dataset, val_dataset, emb_val = _datasets_with_embeddings(cfg, registry, extraction)
    train_loader, _ = _train_loader(cfg, registry, train_dataset)
    val_loader = DataLoader(EmbeddingsDataset(emb_val), batch_size=cfg["batch_size_inference"])
    metrics_before = metrics_of_embeddings(
        embedding_metrics(val_dataset, cfg["metric_args"], registry, None, PIPELINE), emb_val
    )
    metric = embedding_metrics(val_dataset, cfg["metric_args"], registry, postprocessor, PIPELINE)

    run_dir = make_run_dir(cfg["logs_root"], cfg["postfix"], cfg["logs_folder"])
    logger = build_logger(registry, cfg["logger"], run_dir)
    logger.log_pipeline_info(cfg)
    logger.log_metrics({f"{BEFORE_PREFIX}{k}": v for k, v in metrics_before.items()}, step=0)
    metric_callback = MetricValCallback(
        metric=metric, log_images=bool(cfg["log_images"]), figures_dir=run_dir / FIGURES_FOLDER
    )
    best, last = _checkpoint_callbacks(cfg, run_dir / CHECKPOINTS_FOLDER)
    trainer = pl.Trainer(
        **trainer_args, logger=logger, callbacks=[metric_callback, best, last], default_root_dir=str(run_dir)
    )
    # the training's randomness (dropout, augmentations) must not depend on whether the extractor ran
    pl.seed_everything(cfg["seed"], workers=True, verbose=False)
    trainer.fit(module, train_dataloaders=train_loader, val_dataloaders=val_loader)

    result = PostprocessorTrainingResult(
        metrics=dict(metric_callback.last_metrics),
        metrics_before=metrics_before,
        run_dir=run_dir,
        log_dir=Path(logger.log_dir) if getattr(logger, "log_dir", None) else None,
        best_checkpoint=Path(best.best_model_path) if best.best_model_path else None,
        last_checkpoint=Path(last.last_model_path) if last.last_model_path else None,
        embeddings=extraction.sources,
    )
    report_metrics(result.metrics_before, result.metrics, cfg["postprocessor"])
    print(f"Run directory:    {result.run_dir}")
    print(f"Logs:             {result.log_dir}")
    print(f"Best checkpoint:  {result.best_checkpoint}")
    print(f"Last checkpoint:  {result.last_checkpoint}")
    return result


def _check_config(cfg: Mapping[str, Any]) -> None:
    """Fail at once, with one line naming the key, on an unknown, missing or malformed config key."""
    check_keys(cfg, (*REQUIRED_KEYS, *DEFAULTS), PIPELINE)
    require(cfg, *REQUIRED_KEYS, pipeline=PIPELINE)
    if cfg.get("mode_for_checkpointing", "max") not in ("min", "max"):
        raise ConfigError(
            f"mode_for_checkpointing must be 'min' or 'max', got {cfg['mode_for_checkpointing']!r}"
        )
    freeze = cfg.get("freeze_n_epochs", 0)
    if isinstance(freeze, bool) or not isinstance(freeze, int) or freeze < 0:
        raise ConfigError(f"freeze_n_epochs must be a non-negative integer, got {freeze!r}")
    if not isinstance(cfg.get("hard_pairs_mining", True), bool):
        raise ConfigError(f"hard_pairs_mining must be true or false, got {cfg['hard_pairs_mining']!r}")
    if cfg.get("sampler") is None and cfg.get("bs_train") is None:
        raise ConfigError(f"{PIPELINE}: with sampler null the config needs bs_train")
    scheduling = cfg.get("scheduling")
    if scheduling:
        if not isinstance(scheduling, Mapping):
            raise ConfigError(f"scheduling must be null or a mapping, got {scheduling!r}")
        check_keys(scheduling, SCHEDULING_KEYS, f"{PIPELINE}: scheduling")
        require(scheduling, "scheduler", pipeline=f"{PIPELINE}: scheduling")
        if scheduling.get("scheduler_interval", "step") not in ("step", "epoch"):
            raise ConfigError(
                f"scheduling.scheduler_interval must be 'step' or 'epoch', got {scheduling['scheduler_interval']!r}"
            )


def _datasets_with_embeddings(
    cfg: Mapping[str, Any], registry: Registry, extraction: CachedEmbeddings
) -> tuple[Any, Any, Tensor]:
    """The training dataset (images with ``transforms_train`` and the cached embeddings under
    :data:`EMBEDDINGS_KEY`), the validation dataset (images with ``transforms_extraction``, which the
    post-processor re-ranks) and its embeddings."""
    from oml_core.datasets import ImageLabeledDataset, ImageQueryGalleryLabeledDataset

    dataset_root = resolve_dataset_root(cfg)
    df_train, df_val = split_dataframe(read_dataframe(dataset_root, cfg["dataframe_name"]))
    if len(df_train) == 0 or len(df_val) == 0:
        raise ConfigError(
            f"{dataset_root / cfg['dataframe_name']}: needs rows with split=train and split=validation "
            f"(found {len(df_train)} and {len(df_val)})"
        )
    common = {"dataset_root": dataset_root, "cache_size": cfg["cache_size"]}
    transforms_extraction = registry.build("transforms", cfg["transforms_extraction"])
    val_dataset = ImageQueryGalleryLabeledDataset(df_val, transform=transforms_extraction, **common)
    emb_train = extraction(ImageLabeledDataset(df_train, transform=transforms_extraction, **common), "train")
    emb_val = extraction(val_dataset, "validation")
    train_dataset = ImageLabeledDataset(
        df_train,
        transform=registry.build("transforms", cfg["transforms_train"]),
        extra_data={EMBEDDINGS_KEY: emb_train},
        **common,
    )
    return train_dataset, val_dataset, emb_val


def _pairwise_module(cfg: Mapping[str, Any], registry: Registry) -> PairwiseModule:
    """The pairwise model of ``pairwise_model`` in a :class:`PairwiseModule` with ``PairsMiner``, BCE, the
    optimizer, scheduling and freezing of the config."""
    pairwise_model = build_component(
        registry, "pairwise_model", cfg["pairwise_model"], "pairwise_model", PIPELINE
    )
    if cfg["freeze_n_epochs"] > 0 and not isinstance(pairwise_model, IFreezable):
        raise ConfigError(
            f"freeze_n_epochs={cfg['freeze_n_epochs']} needs an IFreezable pairwise model, but "
            f"{spec_of(cfg['pairwise_model'])['name']!r} ({type(pairwise_model).__name__}) cannot be frozen"
        )
    optimizer = registry.build("optimizer", cfg["optimizer"], params=pairwise_model.parameters())
    return PairwiseModule(
        pairwise_model=pairwise_model,
        pairs_miner=_pairs_miner(cfg["hard_pairs_mining"]),
        criterion=torch.nn.BCEWithLogitsLoss(),
        optimizer=optimizer,
        embeddings_key=EMBEDDINGS_KEY,
        freeze_n_epochs=cfg["freeze_n_epochs"],
        **_scheduler_args(cfg["scheduling"], registry, optimizer),
    )


def _pairs_miner(hard_mining: bool) -> Any:
    """OML's ``PairsMiner`` of the ``oml_losses`` plugin (it is no triplet miner, so it is not registered)."""
    try:
        from oml_losses import PairsMiner
    except ImportError as e:
        raise ConfigError(
            f"{PIPELINE} mines pairs with PairsMiner of the plugin oml-losses, which is not installed: "
            f"pip install oml-losses"
        ) from e
    return PairsMiner(hard_mining=hard_mining)


def _postprocessor(cfg: Mapping[str, Any], registry: Registry, pairwise_model: Any) -> Any:
    """The post-processor of ``postprocessor`` around the model being trained."""
    given = (spec_of(cfg["postprocessor"]).get("args") or {}).get("pairwise_model")
    if given is not None and spec_of(given) != spec_of(cfg["pairwise_model"]):
        raise ConfigError(
            f"{PIPELINE}: postprocessor.args.pairwise_model differs from pairwise_model, but the post-processor "
            f"re-ranks with the model being trained: leave it out or set it to ${{pairwise_model}}"
        )
    return build_pairwise_postprocessor(registry, cfg["postprocessor"], pairwise_model, PIPELINE)


# ------------------------------------------------------------------------------- shared by the pipelines
def spec_of(value: Any) -> dict[str, Any]:
    """A component spec as a plain ``{name, args}`` dict (a bare name becomes ``{name: value}``)."""
    spec = to_plain(value)
    return {"name": spec} if isinstance(spec, str) else dict(spec)


def build_component(registry: Registry, kind: str, spec: Any, key: str, pipeline: str, **runtime: Any) -> Any:
    """Build the component of the config key ``key``.

    Raises:
        RegistryError: an unknown name or argument (the registry's message).
        ConfigError: the component refuses its arguments: a weights file that does not exist or does not fit,
            zoo weights that cannot be downloaded, a bad argument value; one line naming ``key`` and the cause.
    """
    from oml_core.utils.checkpoints import CheckpointError
    from oml_core.zoo.store import PretrainedDownloadError

    try:
        return registry.build(kind, spec, **runtime)
    except RegistryError:
        raise
    except (FileNotFoundError, CheckpointError, PretrainedDownloadError, ValueError) as e:
        message = " ".join(str(e).split())
        raise ConfigError(f"{pipeline}: config key {key!r} ({spec_of(spec)['name']!r}): {message}") from e


def build_pairwise_postprocessor(registry: Registry, spec: Any, pairwise_model: Any, pipeline: str) -> Any:
    """Build the post-processor of ``spec`` (the config key ``postprocessor``) with ``pairwise_model`` as its
    argument ``pairwise_model``, replacing the spec's own ``args.pairwise_model``.

    The pipelines build the model themselves, so that it is the model they train or move to the device.

    Raises:
        ConfigError: the post-processor takes no argument ``pairwise_model``.
    """
    spec = spec_of(spec)
    factory = registry.get("postprocessor", spec["name"]).load()
    if "pairwise_model" not in inspect.signature(factory).parameters:
        raise ConfigError(
            f"{pipeline}: config key 'postprocessor' must name a pairwise post-processor (one with the argument "
            f"pairwise_model, e.g. pairwise_reranker), but {spec['name']!r} has none"
        )
    args = {k: v for k, v in (spec.get("args") or {}).items() if k != "pairwise_model"}
    return build_component(
        registry,
        "postprocessor",
        {"name": spec["name"], "args": args},
        "postprocessor",
        pipeline,
        pairwise_model=pairwise_model,
    )


def extraction_trainer_args(engine: Mapping[str, Any], cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The ``pl.Trainer`` arguments of the extraction: the engine, ``precision`` and the progress bar of
    ``lightning_trainer_extra_args`` (its other arguments are the training's)."""
    extra = cfg["lightning_trainer_extra_args"] or {}
    return {
        **INFERENCE_TRAINER_DEFAULTS,
        **engine,
        "precision": cfg["precision"],
        "enable_progress_bar": extra.get("enable_progress_bar", True),
    }


class CachedEmbeddings:
    """The embeddings an extractor gives to the images of a dataset, computed once and kept in a cache folder.

    Calling it with a dataset and its split name returns the ``[len(dataset), dim]`` float embeddings, in
    dataset order: read from ``<embeddings_cache_dir>/embeddings_<split>_<key>.pt`` when that file exists
    and was written for the same key, else computed (the extractor is built on first use, right after seeding
    with ``seed``, so that random weights depend on the seed alone) and written there (atomically: a killed
    run leaves no partial file).

    The key is the first 16 hex digits of the SHA-256 of a JSON text, which the file also stores and which
    must match in full for the file to be read. It holds everything the embeddings depend on:

    - the ``extractor`` spec, every argument that names an existing file (its ``weights`` checkpoint, also in
      nested specs) replaced by the SHA-256 of the file's content (a checkpoint rewritten in place is noticed,
      the same checkpoint under another path is not a new key), and the distribution and version that
      provides the extractor, and oml-core's version;
    - the transforms spec, the dataframe's path and the SHA-256 of its content, the split;
    - ``precision`` and ``seed`` (random weights depend on it), and :data:`CACHE_FORMAT`.

    Not in the key: the content of the image files themselves (replacing images under the same paths needs a
    new cache dir, or deleting the files), and the batch size and device (the embeddings do not depend on
    them beyond rounding). An unreadable file, or one written for another key, is computed again (a warning
    says so).

    Args:
        registry: Builds the extractor.
        cfg: The pipeline config: its keys ``extractor``, ``seed``, ``precision``, ``num_workers`` and
            ``embeddings_cache_dir`` (null: nothing is cached).
        transforms_spec: The spec of the transforms of the datasets given.
        dataframe_path: The dataframe the datasets come from.
        trainer_args: The ``pl.Trainer`` arguments of the extraction (no logger is used).
        batch_size: The batch size of the extraction.
        pipeline: The pipeline's name, for error messages.
    """

    def __init__(
        self,
        registry: Registry,
        cfg: Mapping[str, Any],
        transforms_spec: Any,
        dataframe_path: Path,
        trainer_args: Mapping[str, Any],
        batch_size: int,
        pipeline: str,
    ) -> None:
        self.registry = registry
        self.extractor_spec = spec_of(cfg["extractor"])
        self.seed = cfg["seed"]
        self.precision = cfg["precision"]
        self.num_workers = cfg["num_workers"]
        cache_dir = cfg["embeddings_cache_dir"]
        self.cache_dir = None if cache_dir is None else Path(cache_dir).expanduser().resolve()
        self.transforms_spec = to_plain(transforms_spec)
        self.dataframe_path = Path(dataframe_path).resolve()
        self.trainer_args = dict(trainer_args)
        self.batch_size = batch_size
        self.pipeline = pipeline
        self.sources: list[EmbeddingsSource] = []
        self._extractor: Any = None

    @cached_property
    def _key_of_every_split(self) -> dict[str, Any]:
        """What the key holds but the split (computed once: it hashes the checkpoint files)."""
        from oml_core import __version__

        entry = self.registry.get("extractor", self.extractor_spec["name"])
        return {
            "format": CACHE_FORMAT,
            "extractor": _with_file_digests(self.extractor_spec),
            "extractor_provider": [entry.plugin.distribution, entry.plugin.version],
            "oml_core": __version__,
            "transforms": self.transforms_spec,
            "dataframe": [str(self.dataframe_path), file_sha256(self.dataframe_path)],
            "precision": str(self.precision),
            "seed": self.seed,
        }

    def key_text(self, split: str) -> str:
        """The JSON text that the cache key of ``split`` is the hash of (see the class docstring)."""
        return json.dumps({**self._key_of_every_split, "split": split}, sort_keys=True, default=str)

    def __call__(self, dataset: Any, split: str) -> Tensor:
        what = f"Embeddings of the {split} split ({len(dataset)} items)"
        if self.cache_dir is None:
            embeddings = self._extract(dataset)
            print(f"{what} computed (embeddings_cache_dir: null)")
            self.sources.append(EmbeddingsSource(split, None, from_cache=False))
            return embeddings
        key_text = self.key_text(split)
        key = hashlib.sha256(key_text.encode("utf-8")).hexdigest()[:16]
        path = self.cache_dir / f"embeddings_{split}_{key}.pt"
        embeddings = _read_cache(path, key_text, len(dataset)) if path.is_file() else None
        if embeddings is not None:
            print(f"{what} loaded from the cache {path}")
            self.sources.append(EmbeddingsSource(split, path, from_cache=True))
            return embeddings
        embeddings = self._extract(dataset)
        _write_cache(path, key_text, embeddings)
        print(f"{what} computed and cached to {path}")
        self.sources.append(EmbeddingsSource(split, path, from_cache=False))
        return embeddings

    def _extract(self, dataset: Any) -> Tensor:
        if self._extractor is None:
            pl.seed_everything(self.seed, workers=True, verbose=False)
            self._extractor = build_extractor(self.registry, self.extractor_spec, self.pipeline)
        trainer = pl.Trainer(**self.trainer_args, logger=False)
        loader = DataLoader(dataset, batch_size=self.batch_size, num_workers=self.num_workers, shuffle=False)
        outputs = trainer.predict(
            ExtractorModule(extractor=self._extractor), dataloaders=loader, return_predictions=True
        )
        return _in_dataset_order(outputs)


def file_sha256(path: Path) -> str:
    """The SHA-256 hex digest of the content of the file ``path``."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _with_file_digests(value: Any) -> Any:
    """``value`` (a spec) with every string that names an existing file replaced by ``{"sha256": digest}``."""
    if isinstance(value, Mapping):
        return {key: _with_file_digests(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_with_file_digests(item) for item in value]
    if isinstance(value, str) and value and Path(value).expanduser().is_file():
        return {"sha256": file_sha256(Path(value).expanduser())}
    return value


def _read_cache(path: Path, key_text: str, n_items: int) -> Tensor | None:
    """The embeddings of the cache file, or ``None`` (with a warning) when it is unreadable or not for
    ``key_text`` and ``n_items``."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or foreign file: computed again
        warnings.warn(
            f"{path}: unreadable embeddings cache ({type(e).__name__}: {e}); computing again", stacklevel=3
        )
        return None
    if not isinstance(payload, dict):
        payload = {}
    embeddings = payload.get("embeddings")
    if payload.get("key") != key_text or not isinstance(embeddings, Tensor) or len(embeddings) != n_items:
        warnings.warn(
            f"{path}: the embeddings cache was written for another key; computing again", stacklevel=3
        )
        return None
    return embeddings


def _write_cache(path: Path, key_text: str, embeddings: Tensor) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    torch.save({"key": key_text, "embeddings": embeddings.contiguous()}, partial)
    os.replace(partial, path)


class EmbeddingsDataset(Dataset):
    """Items ``{"embeddings": embeddings[i], "idx": i}``: the validation batches of the post-processing
    pipelines, which need no image (the post-processor reads the images it re-ranks itself)."""

    def __init__(self, embeddings: Tensor) -> None:
        self.embeddings = embeddings

    def __len__(self) -> int:
        return len(self.embeddings)

    def __getitem__(self, item: int) -> dict[str, Any]:
        return {EMBEDDINGS_KEY: self.embeddings[item], "idx": item}


def embedding_metrics(
    dataset: Any, metric_args: Mapping[str, Any] | None, registry: Registry, postprocessor: Any, pipeline: str
) -> Any:
    """``EmbeddingMetrics`` of ``metric_args`` over ``dataset``; a bad argument is a ``ConfigError`` naming
    ``metric_args``."""
    from oml_core.metrics import EmbeddingMetrics

    args = {"verbose": False, **(metric_args or {})}  # the pipelines print their own tables
    try:
        return EmbeddingMetrics(dataset=dataset, postprocessor=postprocessor, registry=registry, **args)
    except RegistryError:
        raise
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{pipeline}: config key 'metric_args': {e}") from e


def metrics_of_embeddings(metric: Any, embeddings: Tensor) -> dict[str, float]:
    """The flat metrics of ``metric`` over ``embeddings`` (row ``i``: item ``i`` of the metric's dataset)."""
    from oml_core.metrics import flatten_metrics

    metric.setup(num_samples=len(embeddings))
    metric.update(embeddings=embeddings, indices=torch.arange(len(embeddings)))
    return {key: float(value) for key, value in flatten_metrics(metric.compute_metrics()).items()}


def report_metrics(before: Mapping[str, float], after: Mapping[str, float], postprocessor: Any) -> None:
    """Print the metrics before and after post-processing as two tables."""
    print()
    print(format_metrics_table(before, BEFORE_TITLE))
    print()
    print(format_metrics_table(after, f"{AFTER_TITLE} ({spec_of(postprocessor)['name']})"))


__all__ = [
    "AFTER_TITLE",
    "BEFORE_TITLE",
    "CachedEmbeddings",
    "EmbeddingsDataset",
    "EmbeddingsSource",
    "PostprocessorTrainingResult",
    "build_component",
    "build_pairwise_postprocessor",
    "embedding_metrics",
    "metrics_of_embeddings",
    "postprocessor_training_pipeline",
    "report_metrics",
]
