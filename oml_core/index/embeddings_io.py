"""A gallery index and embeddings files (:mod:`oml_core.io.embeddings_files`): an index built from a file of
``oml predict`` or of ``oml index build`` without embedding its items again (its provenance checked against the
index's extractor, weights and transforms), and the gallery of an index written as such a file. Both go a chunk
of rows at a time."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from oml_core.index.errors import GalleryIndexError
from oml_core.index.gallery import GalleryIndex
from oml_core.index.integrity import PROBE_TOLERANCE, probe_distance
from oml_core.io import (
    EmbeddingsMismatchError,
    EmbeddingsProvenance,
    EmbeddingsWriter,
    check_provenance,
    read_embeddings_file,
)
from oml_core.io.embeddings_data import EmbeddingsFile
from oml_core.io.shards import SHARDS_MANIFEST, is_shards_folder, read_shards, read_shards_manifest

#: Rows added to an index, or written to a file, at a time.
CHUNK_ROWS = 65536


def index_provenance(index: GalleryIndex) -> EmbeddingsProvenance:
    """The provenance of the embeddings ``index``'s model gives: its extractor spec, the digest of the
    extractor's weights (the extractor is built if it was not yet) and its transforms spec.

    Raises:
        GalleryIndexError: the index's extractor is an object, not a spec (its embeddings have no provenance);
            see :attr:`GalleryIndex.extractor`.
    """
    config = index.config
    if config["extractor"] is None:
        raise GalleryIndexError(
            "the index's extractor is an object, not a spec: its embeddings have no provenance"
        )
    return EmbeddingsProvenance.of_model(
        config["extractor"], index.extractor.state_dict(), config["transforms"]
    )


def add_embeddings_file(index: GalleryIndex, path: str | Path, chunk_rows: int = CHUNK_ROWS) -> int:
    """Add the items of the embeddings file ``path`` (their ids, paths, labels and vectors), or of every shard of
    the folder of shards ``path`` (:mod:`oml_core.io.shards`, ``oml embed``), to ``index``, whose model must be the
    one that made them (:func:`~oml_core.io.provenance.check_provenance` of each file's provenance against
    :func:`index_provenance`), ``chunk_rows`` rows at a time.

    Returns:
        The number of items added.

    Raises:
        EmbeddingsFileError: a bad file (see :func:`~oml_core.io.embeddings_files.read_embeddings_file`), a bad
            folder of shards or one whose shards are not all there (see :func:`~oml_core.io.shards.read_shards`).
        EmbeddingsMismatchError: the file records no provenance, or another model's (naming both values); the
            index's model does not embed a folder's probe as its manifest records (:func:`check_shards_probe`).
        ConfigError: a folder's probe query that the dataset component cannot read.
        ValueError: ids already in the index, vectors of another dimension than the index's.
    """
    path = Path(path)
    if is_shards_folder(path):
        check_shards_probe(index, path)
    files = read_shards(path) if is_shards_folder(path) else iter([read_embeddings_file(path)])
    expected = index_provenance(index)
    return sum(_add_file(index, found, expected, chunk_rows) for found in files)


def embed_probe(index: GalleryIndex, query: Path) -> Tensor:
    """The embedding of the probe query file ``query`` (as ``index``'s dataset component reads a query) by
    ``index``'s extractor and transforms.

    Raises:
        ConfigError: the dataset component cannot read ``query``.
    """
    return index.embed(index.data.query_dataset([str(query)]))[0]


def check_shards_probe(index: GalleryIndex, folder: Path) -> None:
    """Check that ``index``'s extractor and transforms embed the probe query of the folder of shards ``folder``
    as its manifest records (the model that embedded the shards did), within the tolerance of an index's probe
    (:func:`~oml_core.index.integrity.probe_distance` <= :data:`~oml_core.index.integrity.PROBE_TOLERANCE`): that
    catches what the provenance cannot (another version of the extractor's code, of the transforms or of reading).
    A manifest without a probe is not checked.

    Raises:
        EmbeddingsFileError: a bad manifest.
        EmbeddingsMismatchError: further away, naming the manifest, the extractor and the distance.
        ConfigError: the dataset component cannot read the probe query.
    """
    manifest = read_shards_manifest(folder)
    if manifest.probe is None:
        return
    query = folder / str(manifest.probe["query"])
    recorded = torch.tensor(manifest.probe["embedding"], dtype=torch.float32)
    distance = probe_distance(recorded, embed_probe(index, query))
    if not distance <= PROBE_TOLERANCE:
        extractor = json.dumps(index.config["extractor"], sort_keys=True, default=str)
        raise EmbeddingsMismatchError(
            f"{folder / SHARDS_MANIFEST}: the configured extractor {extractor} embeds its probe {query.name} "
            f"{distance:.3g} away (relative L2, tolerance {PROBE_TOLERANCE:g}) from the embedding recorded when the "
            f"shards were embedded: they are another model's embeddings; configure the extractor, weights, seed and "
            f"transforms that made them"
        )


def _add_file(
    index: GalleryIndex, found: EmbeddingsFile, expected: EmbeddingsProvenance, chunk_rows: int
) -> int:
    check_provenance(found.provenance, expected, str(found.path))
    for start in range(0, len(found), chunk_rows):
        end = start + chunk_rows
        index.add(
            torch.from_numpy(np.array(found.embeddings[start:end], dtype=np.float32)),
            labels=found.labels[start:end],
            ids=found.ids[start:end],
            paths=found.paths[start:end],
        )
    return len(found)


def write_index_embeddings(index: GalleryIndex, path: str | Path, chunk_rows: int = CHUNK_ROWS) -> Path:
    """Write the gallery of ``index`` (ids, paths, labels, embeddings, with :func:`index_provenance`) to the new
    embeddings file ``path`` (its format by its suffix), ``chunk_rows`` rows at a time.

    Returns:
        ``path``.

    Raises:
        EmbeddingsFileError: ``path`` exists, has an unknown suffix, or needs pyarrow, which is missing.
    """
    ids, paths, labels, embeddings = index.ids, index.paths, index.labels, index.embeddings
    with EmbeddingsWriter(path, index_provenance(index)) as writer:
        for start in range(0, len(ids), chunk_rows):
            end = start + chunk_rows
            writer.write(embeddings[start:end], ids[start:end], paths[start:end], labels[start:end])
    return writer.path


__all__ = [
    "CHUNK_ROWS",
    "add_embeddings_file",
    "check_shards_probe",
    "embed_probe",
    "index_provenance",
    "write_index_embeddings",
]
