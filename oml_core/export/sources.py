"""What ``oml export SOURCE`` exports: the extractor of a checkpoint of ``oml train``, of a gallery index, or of a
zoo key, with what its source knows of the data (transforms, dataset component) and the digest of its weights.

- A checkpoint file: the extractor spec, transforms (``transforms_val``, else ``transforms_predict``) and dataset
  component of the config given (``--config``, a yaml file of the pipeline's keys) or of the run recorded in the
  checkpoint (``oml train`` records its config); the spec is built with every ``weights`` null but its own, the
  checkpoint (as ``oml validate extractor.args.weights=CKPT`` builds it). Its digest: the file's sha256.
- An index folder (``index.json`` in it): the index's extractor with the weights saved in it (checked against
  their sha256, :attr:`GalleryIndex.extractor <oml_core.index.GalleryIndex.extractor>`), its transforms and
  dataset component; its digest: the index's ``weights_sha256``.
- Any other name: a key of the pretrained zoo (``oml registry pretrained``), its extractor built with
  ``weights: <key>`` (from the weights cache; a download only as the zoo does it), its entry's transforms; its
  digest: the sha256 of its checkpoint in the weights cache (of the zoo's model folder, for a text model).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from oml_core.caches.digests import cached_file_digests, file_sha256
from oml_core.caches.folder import weights_cache_dir
from oml_core.export.errors import ExportError
from oml_core.index import GalleryIndex
from oml_core.index.integrity import rebuilt_spec
from oml_core.index.storage import INDEX_FILE, read_json
from oml_core.lightning.callbacks.run_record import RUN_RECORD_KEY
from oml_core.registry import Registry
from oml_core.utils.checkpoints import CheckpointError
from oml_core.zoo.store import get_pretrained
from oml_core.zoo.weights import looks_like_path

#: The keys of a pipeline's config that hold the transforms of its evaluation, in order of preference.
TRANSFORMS_KEYS = ("transforms_val", "transforms_predict", "transforms")
#: A full sha256 hex digest (a zoo entry may keep only its first characters, as torchvision's file names do).
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: The seed of the building of an extractor (its random parts are all overwritten by its weights).
BUILD_SEED = 0


@dataclass(frozen=True)
class ExportSource:
    """The model to export and what its source knows of it.

    Attributes:
        kind: ``checkpoint``, ``index`` or ``zoo``.
        name: The checkpoint's or index's path (absolute), or the zoo key.
        extractor: The extractor, built with its weights, on the CPU.
        extractor_spec: Its ``{name, args}`` spec, as the source gives it.
        transforms_spec: The spec of its image transforms (None: none).
        dataset_spec: The spec of its dataset component (None: images).
        weights_sha256: The sha256 of the weights it came from (None: unknown).
    """

    kind: str
    name: str
    extractor: nn.Module
    extractor_spec: dict[str, Any]
    transforms_spec: dict[str, Any] | None
    dataset_spec: dict[str, Any] | None
    weights_sha256: str | None

    def transforms(self, registry: Registry) -> Any:
        """The transforms built from :attr:`transforms_spec` (None without one)."""
        return (
            registry.build("transforms", self.transforms_spec) if self.transforms_spec is not None else None
        )


def resolve_source(source: str | Path, config: Path | None, registry: Registry) -> ExportSource:
    """The :class:`ExportSource` of ``source`` (see the module), ``config`` the yaml config of a checkpoint.

    Raises:
        ExportError: a folder that is no index; a path that does not exist; a checkpoint that records no config
            and no ``config`` given; a config without an ``extractor``; ``config`` with an index or zoo key.
        GalleryIndexError: a broken index (naming its file).
        UnknownNameError: a name that is neither a file nor a zoo key (close keys listed).
    """
    path = Path(source).expanduser()
    if config is not None and not path.is_file():
        raise ExportError(
            f"--config goes with a checkpoint file; {source} is not one (an index or a zoo key)"
        )
    if path.is_dir():
        return _index_source(path.resolve(), registry)
    if path.is_file():
        return _checkpoint_source(path.resolve(), config, registry)
    if looks_like_path(str(source)):
        raise ExportError(f"{source}: no such checkpoint file or index folder")
    return _zoo_source(str(source), registry)


def _index_source(folder: Path, registry: Registry) -> ExportSource:
    if not (folder / INDEX_FILE).is_file():
        raise ExportError(f"{folder}: a folder without {INDEX_FILE} is not a gallery index (oml index build)")
    index = GalleryIndex.load(folder, registry=registry)
    config = index.config
    if config["extractor"] is None:
        raise ExportError(
            f"{folder}: the index was built without an extractor spec; it has no model to export"
        )
    sha256 = _index_weights_sha256(folder)
    return ExportSource(
        "index",
        str(folder),
        index.extractor.cpu(),
        config["extractor"],
        config["transforms"],
        config["dataset"],
        sha256,
    )


def _index_weights_sha256(folder: Path) -> str | None:
    """The ``weights_sha256`` of the index's ``index.json`` (read and checked by ``GalleryIndex.load``)."""
    value = read_json(folder / INDEX_FILE).get("weights_sha256")
    return value if isinstance(value, str) else None


def _checkpoint_source(checkpoint: Path, config_file: Path | None, registry: Registry) -> ExportSource:
    config = _config_file(config_file) if config_file is not None else _recorded_config(checkpoint)
    spec = config.get("extractor")
    where = str(config_file) if config_file is not None else f"the run recorded in {checkpoint}"
    if not (isinstance(spec, Mapping) and isinstance(spec.get("name"), str)):
        raise ExportError(
            f"{where}: has no extractor spec ({{name, args}}) to build the checkpoint's model with"
        )
    built = rebuilt_spec(dict(spec))
    built.setdefault("args", {})
    built["args"] = {**(built["args"] or {}), "weights": str(checkpoint)}
    transforms = next((config[key] for key in TRANSFORMS_KEYS if config.get(key) is not None), None)
    return ExportSource(
        "checkpoint",
        str(checkpoint),
        _build(registry, built),
        built,
        _spec_or_none(transforms),
        _spec_or_none(config.get("dataset")),
        file_sha256(checkpoint),
    )


def _recorded_config(checkpoint: Path) -> Mapping[str, Any]:
    """The config of the run recorded in ``checkpoint`` (``oml train``'s), read with ``weights_only=True``."""
    try:
        loaded = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # torch's unpickler raises many types for a file that is not a checkpoint
        raise CheckpointError(f"{checkpoint}: not a readable checkpoint ({type(e).__name__}: {e})") from e
    record = loaded.get(RUN_RECORD_KEY) if isinstance(loaded, dict) else None
    config = record.get("config") if isinstance(record, Mapping) else None
    if not isinstance(config, Mapping):
        raise ExportError(
            f"{checkpoint}: records no config of its run (it was not written by oml train); give the config it "
            f"was trained with: oml export {checkpoint} --config CONFIG.yaml --output DIR"
        )
    return config


def _config_file(path: Path) -> Mapping[str, Any]:
    """The keys of the yaml config ``path``, interpolations resolved."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not path.is_file():
        raise ExportError(f"--config {path}: no such file")
    try:
        loaded = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except (OmegaConfBaseException, ValueError, OSError) as e:
        raise ExportError(f"--config {path}: not a readable yaml config ({type(e).__name__}: {e})") from e
    if not isinstance(loaded, dict):
        raise ExportError(f"--config {path}: not a mapping of config keys")
    return {str(key): value for key, value in loaded.items()}


def _zoo_source(key: str, registry: Registry) -> ExportSource:
    entry = get_pretrained(key, registry)
    spec = {"name": entry.extractor, "args": {**dict(entry.init_args), "weights": key}}
    extractor = _build(
        registry, spec
    )  # reads the checkpoint from the weights cache (checked), or the model folder
    cached = weights_cache_dir() / entry.filename
    if cached.is_file():
        sha256: str | None = cached_file_digests(cached)["sha256"]
    else:  # a model read from its own folder (a text model), checked against the zoo's full digest
        sha256 = entry.sha256 if entry.sha256 is not None and _SHA256.fullmatch(entry.sha256) else None
    return ExportSource("zoo", key, extractor, spec, _spec_or_none(entry.transforms), None, sha256)


def _build(registry: Registry, spec: dict[str, Any]) -> nn.Module:
    """The extractor of ``spec``, built on the CPU with :data:`BUILD_SEED` (the global generator left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(BUILD_SEED)
        return registry.build("extractor", spec).cpu()


def _spec_or_none(value: Any) -> dict[str, Any] | None:
    return (
        {"name": value["name"], "args": dict(value.get("args") or {})} if isinstance(value, Mapping) else None
    )


__all__ = ["BUILD_SEED", "TRANSFORMS_KEYS", "ExportSource", "resolve_source"]
