"""Embeddings as OML's JSON, ``{path: [feature, ...]}`` (``predictions.json``), written entry by entry with the
bytes of ``json.dump(dict)`` (the same separators and float texts), and a sidecar ``<file>.meta.json``
(:mod:`oml_core.io.sidecar`) with the items' ids, labels and the provenance. A JSON file without a sidecar (OML's
own) reads as items ``0, 1, ...`` without labels or provenance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from oml_core.io.embeddings_data import EmbeddingsFile, EmbeddingsFileError, ItemsBatch, is_finite_number
from oml_core.io.provenance import EmbeddingsProvenance
from oml_core.io.sidecar import SidecarFileWriter, read_sidecar, sidecar_of


class JsonEmbeddingsWriter(SidecarFileWriter):
    """Writes ``path`` (OML's JSON) and its sidecar through temporary files beside them (published by the
    caller). Every item needs a path, its key, distinct from the others'.

    Args:
        path: The ``.json`` file.
        provenance: What made the embeddings (None: not recorded).
    """

    def __init__(self, path: Path, provenance: EmbeddingsProvenance | None) -> None:
        super().__init__(path, provenance)
        self._file.write(b"{")
        self._dim: int | None = None
        self._keys: set[str] = set()

    def write(self, batch: ItemsBatch) -> None:
        """Append ``batch``'s entries ``"path": [feature, ...]``.

        Raises:
            EmbeddingsFileError: an item without a path or with the path of another item (a key of the JSON).
        """
        for path, vector in zip(batch.paths, batch.vectors.tolist()):
            if path is None or path in self._keys:
                problem = "has no path" if path is None else f"has the path {path!r} of another item"
                raise EmbeddingsFileError(f"{self.path}: an item {problem}; OML's JSON is keyed by paths")
            self._keys.add(path)
            separator = b", " if len(self._keys) > 1 else b""  # json.dump's item separator
            self._file.write(separator + f"{json.dumps(path)}: {json.dumps(vector)}".encode())
        self._dim = batch.vectors.shape[1] if self._dim is None else self._dim
        self._keep_items(batch)

    def finish(self) -> list[tuple[Path, Path]]:
        """Close the JSON object and write the sidecar, flushed to disk.

        Returns:
            ``(temporary, final)`` pairs in the order to publish them: the sidecar first.
        """
        self._file.write(b"}")
        return self._finish_with_sidecar(self._dim or 0)


def read_json_embeddings(path: Path) -> EmbeddingsFile:
    """The JSON embeddings file ``path`` (``{path: [feature, ...]}``), with its sidecar's ids, labels and
    provenance when it has one.

    Raises:
        EmbeddingsFileError: not JSON, not an object of lists of numbers, ragged vectors, a vector with NaN or
            infinity (naming its row and key), a sidecar that disagrees in count, paths or dimension.
    """
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise EmbeddingsFileError(f"{path}: not a readable JSON file ({type(e).__name__}: {e})") from e
    if not isinstance(data, dict):
        raise EmbeddingsFileError(
            f"{path}: holds a {type(data).__name__}, not an object {{path: [feature, ...]}}"
        )
    keys = list(data)
    dim = len(data[keys[0]]) if keys and isinstance(data[keys[0]], list) else 0
    for row, (key, vector) in enumerate(data.items()):
        if not isinstance(vector, list):
            raise EmbeddingsFileError(
                f"{path}: row {row} ({key}) is a {type(vector).__name__}, not a list of numbers"
            )
        if len(vector) != dim:
            raise EmbeddingsFileError(
                f"{path}: ragged vectors: row {row} ({key}) has {len(vector)} values, row 0 has {dim}"
            )
        if not all(is_finite_number(value) for value in vector):
            raise EmbeddingsFileError(f"{path}: row {row} ({key}) holds NaN, infinite or non-numeric values")
    embeddings = np.array(list(data.values()), dtype=np.float32).reshape(len(keys), dim)
    sidecar_path = sidecar_of(path)
    if not sidecar_path.exists():
        return EmbeddingsFile(
            path, "json", list(range(len(keys))), list(keys), [None] * len(keys), embeddings, None
        )
    sidecar = read_sidecar(sidecar_path, path)
    if sidecar.paths != keys or (keys and sidecar.dim != dim):
        raise EmbeddingsFileError(
            f"{path}: its sidecar {sidecar_path.name} lists {len(sidecar.ids)} items of dimension {sidecar.dim}, "
            f"the file has {len(keys)} of dimension {dim}"
            + ("" if len(sidecar.ids) != len(keys) else " (their paths differ)")
        )
    return EmbeddingsFile(
        path, "json", sidecar.ids, sidecar.paths, sidecar.labels, embeddings, sidecar.provenance
    )


__all__ = ["JsonEmbeddingsWriter", "read_json_embeddings"]
