"""A folder of embeddings shards (what ``oml embed`` of the oml-ray plugin writes): Parquet embeddings files
(:mod:`oml_core.io.embeddings_files`), one per range of item positions, ``shard-<start>-<end>.parquet``, and the
manifest :data:`SHARDS_MANIFEST` that names them::

    {"format": "oml-embeddings-shards", "version": 1, "n_items": 1000, "shard_rows": 256,
     "provenance": {"extractor": ..., "weights_sha256": ..., "transforms": ...},
     "probe": {"query": "probe.png", "embedding": [...]} | null}

The manifest is written before any shard, so that a run started again in the same folder knows the shards of the
run that it continues (the same items, model and shard size) and embeds only those whose file is missing; each
shard file appears whole (:class:`~oml_core.io.embeddings_files.EmbeddingsWriter` publishes it under its name
once written), so that a run killed at any moment leaves whole shards only and every item is in exactly one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oml_core.io.embeddings_data import EmbeddingsFile, EmbeddingsFileError
from oml_core.io.embeddings_files import read_embeddings_file
from oml_core.io.provenance import EmbeddingsProvenance, check_provenance
from oml_core.utils.atomic import atomic_write_bytes

#: The manifest of a folder of shards.
SHARDS_MANIFEST = "embeddings.json"
#: Its format tag and version.
SHARDS_FORMAT = "oml-embeddings-shards"
SHARDS_VERSION = 1


@dataclass(frozen=True)
class ShardsManifest:
    """The manifest of a folder of shards (see the module).

    Attributes:
        n_items: How many items the shards hold together.
        shard_rows: Items per shard (the last holds the rest).
        provenance: What made the embeddings (each shard's file records it too).
        probe: ``{"query": file name in the folder, "embedding": [...]}``, the dataset component's probe query
            and its embedding by the model; None: the component writes none.
    """

    n_items: int
    shard_rows: int
    provenance: EmbeddingsProvenance
    probe: dict[str, Any] | None

    def shards(self) -> list[tuple[int, int]]:
        """The ``[start, end)`` ranges of item positions of the shards, in order."""
        return [(s, min(s + self.shard_rows, self.n_items)) for s in range(0, self.n_items, self.shard_rows)]

    def to_json(self) -> dict[str, Any]:
        """The manifest as JSON values."""
        return {
            "format": SHARDS_FORMAT,
            "version": SHARDS_VERSION,
            "n_items": self.n_items,
            "shard_rows": self.shard_rows,
            "provenance": self.provenance.to_json(),
            "probe": self.probe,
        }


def shard_name(start: int, end: int) -> str:
    """The file name of the shard of the item positions ``[start, end)``."""
    return f"shard-{start:012d}-{end:012d}.parquet"


def is_shards_folder(path: Path) -> bool:
    """Whether ``path`` is a folder holding a shards manifest."""
    return (path / SHARDS_MANIFEST).is_file()


def write_shards_manifest(folder: Path, manifest: ShardsManifest) -> None:
    """Write ``manifest`` into ``folder`` (atomically: whole or not at all)."""
    text = json.dumps(manifest.to_json(), indent=1, sort_keys=True, allow_nan=False)
    atomic_write_bytes(folder / SHARDS_MANIFEST, text.encode("utf-8"))


def read_shards_manifest(folder: Path) -> ShardsManifest:
    """The manifest of the folder of shards ``folder``.

    Raises:
        EmbeddingsFileError: no manifest, or one that is not a shards manifest (one line naming the file).
    """
    path = folder / SHARDS_MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EmbeddingsFileError(
            f"{folder}: no {SHARDS_MANIFEST}: not a folder of embeddings shards"
        ) from None
    except (OSError, ValueError) as e:
        raise EmbeddingsFileError(f"{path}: cannot be read as JSON ({e})") from e
    try:
        if data.get("format") != SHARDS_FORMAT or data.get("version") != SHARDS_VERSION:
            raise ValueError(f"not a {SHARDS_FORMAT} manifest of version {SHARDS_VERSION}")
        n_items, shard_rows, probe = data["n_items"], data["shard_rows"], data["probe"]
        if not (
            isinstance(n_items, int) and n_items >= 0 and isinstance(shard_rows, int) and shard_rows >= 1
        ):
            raise ValueError("n_items must be an integer >= 0 and shard_rows an integer >= 1")
        if probe is not None and not isinstance(probe, dict):
            raise ValueError("probe must be a mapping or null")
        return ShardsManifest(n_items, shard_rows, EmbeddingsProvenance.from_json(data["provenance"]), probe)
    except (AttributeError, KeyError, ValueError) as e:
        raise EmbeddingsFileError(f"{path}: not a manifest of embeddings shards ({e})") from e


def read_shards(folder: Path) -> Iterator[EmbeddingsFile]:
    """The shards of ``folder`` in order, each read (:func:`read_embeddings_file`) only when its turn comes.
    Every shard of the manifest must be there, whole, and of the manifest's provenance.

    Raises:
        EmbeddingsFileError: a bad manifest; a shard missing (the run that writes them did not finish; naming the
            first missing and how many are), a bad shard, a shard of another count of items.
        EmbeddingsMismatchError: a shard of another provenance than the manifest's.
    """
    manifest = read_shards_manifest(folder)
    shards = manifest.shards()
    missing = [shard_name(*r) for r in shards if not (folder / shard_name(*r)).is_file()]
    if missing:
        raise EmbeddingsFileError(
            f"{folder / missing[0]}: no such shard ({len(missing)} of {len(shards)} missing): the run that "
            f"writes them did not finish; run it again to embed the missing shards"
        )
    for start, end in shards:
        found = read_embeddings_file(folder / shard_name(start, end))
        if len(found) != end - start:
            raise EmbeddingsFileError(f"{found.path}: holds {len(found)} items, its range {end - start}")
        check_provenance(found.provenance, manifest.provenance, str(found.path))
        yield found


__all__ = [
    "SHARDS_FORMAT",
    "SHARDS_MANIFEST",
    "SHARDS_VERSION",
    "ShardsManifest",
    "is_shards_folder",
    "read_shards",
    "read_shards_manifest",
    "shard_name",
    "write_shards_manifest",
]
