"""``embed_corpus``: the gallery items of a config's dataset component (``oml index build``'s config: its
``dataset``, data keys, ``extractor``, ``transforms``, ``gallery_rows``) embedded by Ray actors into a folder of
Parquet shards (:mod:`oml_core.io.shards`).

The driver reads the items (their ids, names and labels: what ``oml index build`` would give them), writes the
manifest (the model's provenance, the probe query and its embedding) before any shard, then streams the shards
not yet written through a Ray Data ``map_batches`` over a pool of actors, each of which builds the model once (one
per ``num_gpus`` GPUs, or per ``num_cpus`` CPUs) and writes each shard it embeds as one whole file. Started again in
the same folder, a run embeds only the shards whose file is missing.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from oml_core.config.components import spec_of
from oml_core.config.data import DEFAULT_DATASET, check_datasets, dataset_entry
from oml_core.config.schemas import IndexBuildConfig
from oml_core.config.typed import check_component_arguments, validate_config
from oml_core.index import GalleryIndex
from oml_core.index.build import INDEX_BUILD, index_of_config
from oml_core.index.embeddings_io import embed_probe, index_provenance
from oml_core.index.gallery import item_ids, item_names
from oml_core.index.items import SomeItems, size_of
from oml_core.interfaces.datasets import IBaseDataset, ILabeledDataset
from oml_core.io import EmbeddingsFileError, EmbeddingsWriter
from oml_core.io.provenance import EmbeddingsProvenance, check_provenance
from oml_core.io.shards import (
    SHARDS_MANIFEST,
    ShardsManifest,
    read_shards_manifest,
    shard_name,
    write_shards_manifest,
)
from oml_core.registry import ConfigError, Registry, default_registry

#: Items per shard by default.
SHARD_ROWS = 4096
#: How long ``--address`` is given to answer before Ray is started.
CONNECT_TIMEOUT_S = 5.0
#: The scheme of a Ray client address, and its port when the address gives none (Ray's default).
RAY_CLIENT_PREFIX = "ray://"
RAY_CLIENT_PORT = 10001


@dataclass(frozen=True)
class EmbedSettings:
    """How ``oml embed`` runs.

    Attributes:
        out_dir: The folder of shards: new, empty, or that of a run to continue.
        shard_rows: Items per shard (a run continued must give the same).
        workers: Actors; None: one per ``num_gpus`` GPUs of the cluster, or per ``num_cpus`` CPUs.
        num_gpus: GPUs per actor (0: the actors embed on CPUs).
        num_cpus: CPUs per actor.
        address: The Ray cluster (``ray.init(address)``); None: ``RAY_ADDRESS``, else a new local one. A Ray
            already started in this process is used as it is.
    """

    out_dir: Path
    shard_rows: int = SHARD_ROWS
    workers: int | None = None
    num_gpus: float = 0.0
    num_cpus: float = 1.0
    address: str | None = None


@dataclass(frozen=True)
class EmbedResult:
    """What ``embed_corpus`` did: ``embedded`` items in ``shards`` new shards of ``out_dir``; ``skipped`` shards
    were there already (of a run continued)."""

    out_dir: Path
    n_items: int
    embedded: int
    shards: int
    skipped: int

    def as_text(self) -> str:
        """The line ``oml embed`` prints."""
        kept = f", {self.skipped} already there" if self.skipped else ""
        return (
            f"embedded {self.embedded} of {self.n_items} items into {self.shards} new shards of {self.out_dir}"
            f"{kept}; oml index build embeddings={self.out_dir} builds an index of them"
        )


def embed_corpus(
    cfg: Mapping[str, Any] | IndexBuildConfig | Any, settings: EmbedSettings, registry: Registry | None = None
) -> EmbedResult:
    """Embed the gallery items of ``cfg`` (``oml index build``'s config; see the module) into the folder of shards
    ``settings.out_dir`` on Ray actors.

    Raises:
        ConfigError: a bad config (as ``oml index build`` names it), an item that cannot be read (the dataset
            component's checks, as ``oml index build`` runs them, before anything is written or Ray starts), a
            ``shard_rows`` below 1, an ``out_dir`` that
            holds other files, or the shards of another run (other items, model or shard size: naming what
            differs); nothing that answers at ``address`` (checked first, within :data:`CONNECT_TIMEOUT_S` seconds),
            or a Ray cluster that does not; a cluster with fewer GPUs or CPUs than the actors need (checked before
            anything is written).
        RegistryError: an unknown component name.
    """
    if settings.shard_rows < 1:
        raise ConfigError(f"shard_rows must be an integer >= 1, got {settings.shard_rows}")
    _check_address(settings.address)
    config = cast(IndexBuildConfig, validate_config(cfg, INDEX_BUILD))
    registry = registry or default_registry()
    check_component_arguments(config, registry)
    out_dir = settings.out_dir.expanduser().resolve()
    index = index_of_config(config, registry, torch.device("cpu"))
    gallery = _gallery(index, config.gallery_rows)
    entry = dataset_entry(registry, spec_of(config.dataset or DEFAULT_DATASET))
    check_datasets(index.data, [gallery], config.num_workers, None, entry)
    index.data.check_extractor(index.extractor)
    items = _items(index, gallery)
    _connect(settings.address)  # before anything is written
    _check_resources(settings)
    manifest = _manifest(index, out_dir, size_of(gallery), settings.shard_rows)
    pending = [r for r in manifest.shards() if not (out_dir / shard_name(*r)).is_file()]
    embedded = _run(config, settings, out_dir, manifest, items, pending) if pending else 0
    return EmbedResult(
        out_dir, manifest.n_items, embedded, len(pending), len(manifest.shards()) - len(pending)
    )


def _gallery(index: GalleryIndex, rows: str) -> IBaseDataset:
    """The gallery dataset of ``index``'s dataset component, its items checked readable as the index does."""
    try:
        return index.data.gallery_dataset(rows)
    except NotImplementedError as e:
        raise ConfigError(f"{e}: its items cannot be embedded") from e


def _items(index: GalleryIndex, gallery: IBaseDataset) -> dict[str, list[Any]]:
    """The ids (the component's, else the positions), names and labels of the gallery's items."""
    n = size_of(gallery)
    ids = item_ids(index.data, gallery)
    labels = gallery.get_labels().tolist() if isinstance(gallery, ILabeledDataset) else [None] * n
    return {
        "ids": list(range(n)) if ids is None else ids,
        "paths": item_names(index.data, gallery),
        "labels": [None if v is None else int(v) for v in labels],
    }


def _manifest(index: GalleryIndex, out_dir: Path, n_items: int, shard_rows: int) -> ShardsManifest:
    """The manifest of ``out_dir``: that of the run it holds, checked to be of the same items, model and shard
    size; else a new one written there, with the probe query, before any shard.

    Raises:
        ConfigError: ``out_dir`` holds other files, or the shards of another run (naming what differs).
    """
    provenance = index_provenance(index)
    if (out_dir / SHARDS_MANIFEST).is_file():
        found = read_shards_manifest(out_dir)
        mine = {"n_items": n_items, "shard_rows": shard_rows, "provenance": provenance.to_json()}
        theirs = {
            "n_items": found.n_items,
            "shard_rows": found.shard_rows,
            "provenance": found.provenance.to_json(),
        }
        for key, value in mine.items():
            if json.dumps(value, sort_keys=True) != json.dumps(theirs[key], sort_keys=True):
                raise ConfigError(
                    f"{out_dir} holds the shards of another run (its {key} differs: "
                    f"{_shown(theirs[key])}, this run's {_shown(value)}); choose a new folder"
                )
        return found
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ConfigError(
            f"{out_dir} exists and is neither empty nor a folder of shards ({SHARDS_MANIFEST}): choose a new folder"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = ShardsManifest(n_items, shard_rows, provenance, _probe(index, out_dir))
    write_shards_manifest(out_dir, manifest)
    return manifest


def _probe(index: GalleryIndex, out_dir: Path) -> dict[str, Any] | None:
    """The dataset component's probe query written into ``out_dir`` and its embedding; None when it writes
    none."""
    data = index.data
    try:
        name = data.probe_query(out_dir)
    except NotImplementedError:
        return None
    embedding = embed_probe(index, out_dir / name)
    return {"query": name, "embedding": [float(v) for v in embedding.tolist()]}


def _shown(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def _run(
    config: IndexBuildConfig,
    settings: EmbedSettings,
    out_dir: Path,
    manifest: ShardsManifest,
    items: dict[str, list[Any]],
    pending: list[tuple[int, int]],
) -> int:
    """Embed the shards ``pending`` on a pool of Ray actors; the number of items embedded."""
    import ray

    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    rows = [
        {"start": start, "end": end, "items": json.dumps({k: v[start:end] for k, v in items.items()})}
        for start, end in pending
    ]
    embedded = ray.data.from_items(rows).map_batches(
        ShardEmbedder,
        fn_constructor_kwargs={
            "config": config,
            "out_dir": str(out_dir),
            "provenance": manifest.provenance.to_json(),
            "on_gpu": settings.num_gpus > 0,
        },
        batch_size=1,
        compute=ray.data.ActorPoolStrategy(size=min(len(pending), settings.workers or _workers(settings))),
        num_cpus=settings.num_cpus,
        num_gpus=settings.num_gpus,
    )
    return sum(int(row["n"]) for row in embedded.iter_rows())


def _connect(address: str | None) -> None:
    """Connect to the Ray cluster at ``address`` (None: ``RAY_ADDRESS``, else a new local one), unless Ray is
    started in this process already.

    Raises:
        ConfigError: no cluster answers at ``address``.
    """
    import ray

    if ray.is_initialized():
        return
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    except ConnectionError as e:
        raise ConfigError(f"{_address_named(address)}: no Ray cluster answers there ({e})") from e


def _address_named(address: str | None) -> str:
    """How a message names the cluster of ``address`` (None: ``RAY_ADDRESS``, else a new local Ray)."""
    if address:
        return f"--address {address}"
    given = os.environ.get("RAY_ADDRESS")
    return f"RAY_ADDRESS={given}" if given else "the local Ray"


def _check_address(address: str | None) -> None:
    """Check that something answers at the host and port of ``address`` (None: ``RAY_ADDRESS``'s): ``host:port``
    (Ray's GCS) or ``ray://host[:port]`` (a Ray client server), within :data:`CONNECT_TIMEOUT_S` seconds, where
    Ray itself would wait minutes. Other addresses (none, ``auto``, ``local``: Ray finds or starts the cluster)
    are left to Ray.

    Raises:
        ConfigError: nothing answers there, naming the address.
    """
    target = _host_port(address or os.environ.get("RAY_ADDRESS") or "")
    if target is None:
        return
    try:
        socket.create_connection(target, timeout=CONNECT_TIMEOUT_S).close()
    except OSError as e:
        why = (
            f"no answer within {CONNECT_TIMEOUT_S:g} s"
            if isinstance(e, TimeoutError)
            else e.strerror or str(e)
        )
        raise ConfigError(
            f"{_address_named(address)}: no Ray cluster answers there ({why}); start one (ray start --head) or give "
            f"the address of a running one"
        ) from e


def _host_port(address: str) -> tuple[str, int] | None:
    """The host and port of a ``host:port`` or ``ray://host[:port]`` address; None: another kind of address."""
    client = address.startswith(RAY_CLIENT_PREFIX)
    rest = address.removeprefix(RAY_CLIENT_PREFIX)
    if "://" in rest:  # another scheme: Ray's to judge
        return None
    host, colon, port = rest.rpartition(":")
    if not colon or "]" in port:  # no port (an IPv6 host's colons are within its brackets)
        host, port = rest, str(RAY_CLIENT_PORT) if client else ""
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def _check_resources(settings: EmbedSettings) -> None:
    """Check that the cluster has the GPUs and CPUs of the actors asked for (``--workers`` of them, else one),
    where Ray would wait for them without end.

    Raises:
        ConfigError: the cluster has fewer, naming the option, what the actors need and what the cluster has.
    """
    import ray

    resources = ray.cluster_resources()
    actors = settings.workers or 1
    asked = f" --workers {actors}" if settings.workers else ""
    for option, kind, per_actor, hint in (
        ("--num-gpus", "GPU", settings.num_gpus, "--num-gpus 0 embeds on CPUs"),
        ("--num-cpus", "CPU", settings.num_cpus, "ask for fewer"),
    ):
        have = float(resources.get(kind, 0.0))
        if per_actor * actors > have:
            raise ConfigError(
                f"{option} {per_actor:g}{asked}: {actors} Ray actor(s) need {per_actor * actors:g} {kind}s, "
                f"{_address_named(settings.address)} has {have:g}; {hint}, or run on a cluster that has them"
            )


def _workers(settings: EmbedSettings) -> int:
    """One actor per ``num_gpus`` GPUs of the cluster, else per ``num_cpus`` CPUs (at least one)."""
    import ray

    resources = ray.cluster_resources()
    if settings.num_gpus > 0:
        return max(1, int(resources.get("GPU", 0) // settings.num_gpus))
    return max(1, int(resources.get("CPU", 1) // settings.num_cpus))


class ShardEmbedder:
    """A Ray actor's callable: builds the model once (the config's, on the actor's GPU or CPUs), then embeds each
    shard of a batch and writes it whole (a shard already written, by an earlier attempt, is kept).

    Args:
        config: The run's typed config.
        out_dir: The folder of shards.
        provenance: The manifest's; the actor's model must give it.
        on_gpu: Embed on the actor's GPU.

    Raises:
        EmbeddingsMismatchError: the actor's model is not the manifest's (e.g. weights that changed meanwhile).
    """

    def __init__(
        self, config: IndexBuildConfig, out_dir: str, provenance: dict[str, Any], on_gpu: bool
    ) -> None:
        typed = cast(IndexBuildConfig, validate_config(config, INDEX_BUILD))
        device = torch.device("cuda") if on_gpu else torch.device("cpu")
        self.index = index_of_config(typed, default_registry(), device)
        self.gallery = _gallery(self.index, typed.gallery_rows)
        self.out_dir = Path(out_dir)
        self.provenance = EmbeddingsProvenance.from_json(provenance)
        check_provenance(index_provenance(self.index), self.provenance, f"the Ray actor's model ({out_dir})")

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        counts = [
            self._shard(int(start), int(end), json.loads(str(items)))
            for start, end, items in zip(batch["start"], batch["end"], batch["items"])
        ]
        return {"n": np.array(counts, dtype=np.int64)}

    def _shard(self, start: int, end: int, items: dict[str, list[Any]]) -> int:
        path = self.out_dir / shard_name(start, end)
        if path.is_file():
            return 0
        embeddings = self.index.embed(SomeItems(self.gallery, range(start, end)))
        try:
            with EmbeddingsWriter(path, self.provenance) as writer:
                writer.write(embeddings, items["ids"], items["paths"], items["labels"])
        except EmbeddingsFileError:
            if path.is_file():  # written meanwhile, whole, by an actor of a run killed a moment ago
                return 0
            raise
        return end - start


__all__ = ["SHARD_ROWS", "EmbedResult", "EmbedSettings", "ShardEmbedder", "embed_corpus"]
