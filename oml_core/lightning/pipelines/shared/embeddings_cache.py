"""The extractor's embeddings of the post-processing pipelines: computed once and cached by a key of
everything they depend on (:class:`CachedEmbeddings`, in the cache files of :mod:`oml_core.caches.embeddings`),
where they came from (:class:`EmbeddingsSource`), and the dataset that serves them as validation batches
(:class:`EmbeddingsDataset`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytorch_lightning as pl
from torch import Tensor
from torch.utils.data import Dataset

from oml_core.caches.digests import file_sha256, with_file_digests
from oml_core.caches.embeddings import CACHE_FORMAT, cached_embeddings
from oml_core.config.components import build_component, spec_of
from oml_core.inference.batches import evaluation_loader
from oml_core.lightning.pipelines.shared.inference import extract_embeddings
from oml_core.lightning.progress import progress_bar_callbacks
from oml_core.registry import Registry, to_plain
from oml_core.utils.logs import get_logger

if TYPE_CHECKING:
    from oml_core.config.schemas import PostprocessorTrainingConfig, PostprocessorValidationConfig

log = get_logger(__name__)

#: The key of the cached embeddings in the items of the training dataset and in the validation batches.
EMBEDDINGS_KEY = "embeddings"


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
    - ``precision`` and ``seed`` (random weights depend on it), and the format of the cache files
      (:data:`~oml_core.caches.embeddings.CACHE_FORMAT`).

    Not in the key: the content of the image files themselves (replacing images under the same paths needs a
    new cache dir, or deleting the files), and the batch size and device (the embeddings do not depend on
    them beyond rounding). An unreadable file, or one written for another key, is computed again (a warning
    says so) and replaced atomically.

    Args:
        registry: Builds the extractor.
        config: The typed config of a post-processing pipeline: its keys ``extractor``, ``seed``,
            ``precision``, ``num_workers`` and ``embeddings_cache_dir`` (null: nothing is cached).
        transforms_spec: The spec of the transforms of the datasets given.
        dataframe_path: The dataframe the datasets come from.
        trainer_args: The ``pl.Trainer`` arguments of the extraction (no logger is used).
        batch_size: The batch size of the extraction.
        pipeline: The pipeline's name, for error messages.
    """

    def __init__(
        self,
        registry: Registry,
        config: PostprocessorTrainingConfig | PostprocessorValidationConfig,
        transforms_spec: Any,
        dataframe_path: Path,
        trainer_args: Mapping[str, Any],
        batch_size: int,
        pipeline: str,
    ) -> None:
        self.registry = registry
        self.extractor_spec = spec_of(config.extractor)
        self.seed = config.seed
        self.precision = config.precision
        self.num_workers = config.num_workers
        cache_dir = config.embeddings_cache_dir
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
            "extractor": with_file_digests(self.extractor_spec),
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
            log.info(f"{what} computed (embeddings_cache_dir: null)")
            self.sources.append(EmbeddingsSource(split, None, from_cache=False))
            return embeddings
        key_text = self.key_text(split)
        key = hashlib.sha256(key_text.encode("utf-8")).hexdigest()[:16]
        path = self.cache_dir / f"embeddings_{split}_{key}.pt"
        computed: list[bool] = []

        def compute() -> Tensor:
            computed.append(True)
            return self._extract(dataset)

        # the file names in the cache folder are oml's: a file there that is not a cache is a damaged one
        embeddings = cached_embeddings(path, key_text, len(dataset), compute, replace_foreign=True)
        from_cache = not computed
        log.info(f"{what} {'loaded from the cache' if from_cache else 'computed and cached to'} {path}")
        self.sources.append(EmbeddingsSource(split, path, from_cache=from_cache))
        return embeddings

    def _extract(self, dataset: Any) -> Tensor:
        if self._extractor is None:
            pl.seed_everything(self.seed, workers=True, verbose=False)
            self._extractor = build_component(
                self.registry, "extractor", self.extractor_spec, "extractor", self.pipeline
            )
        trainer = pl.Trainer(
            **self.trainer_args, logger=False, callbacks=progress_bar_callbacks(self.trainer_args)
        )
        loader = evaluation_loader(dataset, self.batch_size, self.num_workers)
        return extract_embeddings(trainer, self._extractor, loader)


class EmbeddingsDataset(Dataset):
    """Items ``{"embeddings": embeddings[i], "idx": i}``: the validation batches of the post-processing
    pipelines, which need no image (the post-processor reads the images it re-ranks itself)."""

    def __init__(self, embeddings: Tensor) -> None:
        self.embeddings = embeddings

    def __len__(self) -> int:
        return len(self.embeddings)

    def __getitem__(self, item: int) -> dict[str, Any]:
        return {EMBEDDINGS_KEY: self.embeddings[item], "idx": item}


__all__ = ["EMBEDDINGS_KEY", "CachedEmbeddings", "EmbeddingsDataset", "EmbeddingsSource"]
