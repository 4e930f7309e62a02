"""Saved gallery indexes turned into what older versions of oml wrote, for the tests that older indexes load:
version 4 kept a generation's items as JSON lists in ``items.json`` and its embeddings as the tensor of
``embeddings.pt`` (version 5: ``items.arrow`` and ``embeddings.npy``, read memory-mapped)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch

from oml_core.index.manifest import file_digest
from oml_core.utils.digest import sealed_digest


def as_whole_files(generation: Path) -> None:
    """Rewrite the version-5 items and embeddings of the generation folder ``generation`` as version 4 wrote
    them: ``items.json`` (ids, paths, labels, keys, uid) and the embeddings tensor inside ``embeddings.pt``."""
    with pa.ipc.open_file(pa.memory_map(str(generation / "items.arrow"))) as reader:
        table = reader.read_all()
    uid = table.schema.metadata[b"uid"].decode()
    columns = {
        name: table.column(column).to_pylist()
        for name, column in [("ids", "id"), ("paths", "path"), ("labels", "label"), ("keys", "key")]
    }
    (generation / "items.json").write_text(json.dumps({**columns, "uid": uid}))
    stored = torch.load(generation / "embeddings.pt", weights_only=True)
    rows = generation / "embeddings.npy"
    assert stored.pop("embeddings_sha256") == sealed_digest(rows)
    embeddings = torch.from_numpy(np.load(rows).copy())
    torch.save({**stored, "version": 4, "embeddings": embeddings}, generation / "embeddings.pt")
    (generation / "items.arrow").unlink()
    rows.unlink()


def as_version_4(folder: Path) -> None:
    """Turn the saved index ``folder`` into what version 4 wrote: its base generation's files
    (:func:`as_whole_files`) and ``index.json``'s version and manifest."""
    meta = json.loads((folder / "index.json").read_text())
    base = f"gen-{meta.get('base', meta['generation'])}"
    as_whole_files(folder / base)
    files = meta["manifest"]["files"]
    for name in ("items.arrow", "embeddings.npy"):
        del files[f"{base}/{name}"]
    for name in ("items.json", "embeddings.pt"):
        files[f"{base}/{name}"] = file_digest(folder / base / name)
    meta["version"] = 4
    (folder / "index.json").write_text(json.dumps(meta))
