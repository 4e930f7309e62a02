"""A gallery index larger than the memory a process may take opens and answers ``oml search`` (issue 38, 4).

The limit is real: ``RLIMIT_DATA`` (``ulimit -d``) of a subprocess (``tests/scripts/limited_search.py``), set once
a search of a small index has imported and built everything, to its data memory plus 48 MiB: less than half the
100 MiB of embeddings of the 200k items. An index of version 5 (items in ``items.arrow``, embeddings in
``embeddings.npy``, both mapped read-only, and the exact backend's own mapped save) answers as the test process's
load of it does; the same index in version 4's files (``items.json`` and the tensor of ``embeddings.pt``, read
whole) is refused by the limit, so the limit is below what a whole load takes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import torch

from oml_core.index import GalleryIndex, GalleryIndexError
from oml_core.index.item_table import ItemTable, RowsById
from tests.scripts.old_indexes import as_version_4

SCRIPT = Path(__file__).parent / "scripts" / "limited_search.py"
#: 200k x 128 float32: 100 MiB of embeddings (and 100 MiB more in the exact backend's save).
N_ITEMS, DIM = 200_000, 128
#: What the search may allocate beyond what a search of a small index left: less than half its embeddings.
HEADROOM = 48 * 2**20
TOP_K = 5


def saved_index(folder: Path, n_items: int) -> Path:
    """An index of ``n_items`` random embeddings with names and labels, and an extractor (``tiny_conv``, of the
    example plugin, random weights) that embeds the queries of ``oml search``."""
    index = GalleryIndex(
        extractor={"name": "tiny_conv", "args": {"feat_dim": DIM}},
        transforms={"name": "norm_resize", "args": {"im_size": 32}},
    )
    embeddings = torch.randn(n_items, DIM, generator=torch.Generator().manual_seed(n_items))
    index.add(
        embeddings,
        labels=[i % 1000 for i in range(n_items)],
        paths=[f"images/{i}.jpg" for i in range(n_items)],
    )
    return index.save(folder)


def search_under_limit(small: Path, index: Path, query: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "1"}
    command = [sys.executable, str(SCRIPT), str(HEADROOM), str(small), str(index), str(query), str(TOP_K)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="RLIMIT_DATA counts mappings so on Linux only"
)
def test_oml_search_answers_from_an_index_larger_than_the_memory_limit(tmp_path):
    small, index = saved_index(tmp_path / "small", 10), saved_index(tmp_path / "index", N_ITEMS)
    query = index / "probe.png"  # a picture the extractor embeds
    expected = GalleryIndex.load(index).search([query], top_k=TOP_K)[0]

    mapped = search_under_limit(small, index, query)
    assert mapped.returncode == 0, mapped.stdout + mapped.stderr
    hits = json.loads(mapped.stdout)["queries"][0]["results"]
    assert [(hit["id"], hit["path"], hit["label"]) for hit in hits] == [
        (h.id, h.path, h.label) for h in expected
    ]
    assert [hit["distance"] for hit in hits] == pytest.approx([h.distance for h in expected], abs=1e-5)

    as_version_4(index)  # the same index, its items and embeddings read whole
    whole = search_under_limit(small, index, query)
    assert whole.returncode == 1 and "MemoryError" in whole.stdout + whole.stderr, whole.stdout + whole.stderr


def items_file(path: Path, ids: list[int], keys: list[int], metadata: dict[str, str] | None = None) -> Path:
    """An ``items.arrow`` of ``ids`` and ``keys`` (names and labels none), with ``metadata`` (None: the
    format's, of uid ``u``)."""
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "path": pa.array([None] * len(ids), pa.large_string()),
            "label": pa.array([None] * len(ids), pa.int64()),
            "key": pa.array(keys, pa.int64()),
        }
    )
    table = table.replace_schema_metadata(
        metadata or {"format": "oml-gallery-items", "version": "5", "uid": "u"}
    )
    with pa.ipc.new_file(str(path), table.schema) as writer:
        writer.write_table(table)
    return path


def test_items_are_read_mapped_and_a_file_that_is_not_valid_items_is_named(tmp_path):
    items = ItemTable.of([7, 3, 5], ["a.jpg", None, "c.jpg"], [1, None, 0], torch.tensor([0, 2, 4]))
    items.write(tmp_path / "items.arrow", "0" * 32, 5)
    read, uid = ItemTable.read(tmp_path / "items.arrow", 3)
    assert (read.ids, read.paths, read.labels, read.keys.tolist(), uid) == (
        [7, 3, 5],
        ["a.jpg", None, "c.jpg"],
        [1, None, 0],
        [0, 2, 4],
        "0" * 32,
    )
    assert read.rows([2, 0]) == [(5, "c.jpg", 0), (7, "a.jpg", 1)]
    rows = RowsById(read.id_array)
    assert (rows.get(3), rows.get(4), 5 in rows, rows[7]) == (1, None, True, 0)

    garbage = tmp_path / "garbage.arrow"
    garbage.write_text("not arrow")
    cases = {
        items_file(
            tmp_path / "twice.arrow", [1, 1], [0, 1]
        ): "not valid gallery items (ids must be distinct)",
        items_file(tmp_path / "keys.arrow", [1, 2], [1, 1]): "keys must be increasing integers",
        items_file(
            tmp_path / "other.arrow", [1, 2], [0, 1], {"format": "x"}
        ): "not gallery items (format 'x')",
        items_file(tmp_path / "three.arrow", [1, 2, 3], [0, 1, 2]): "holds 3 items, the index has 2",
        garbage: "not a readable Arrow file of gallery items",
        tmp_path / "missing.arrow": "no such file; the index's items are missing",
    }
    for path, message in cases.items():
        with pytest.raises(GalleryIndexError, match=re.escape(message)) as raised:
            ItemTable.read(path, 2)
        assert str(raised.value).startswith(f"{path}: ")
