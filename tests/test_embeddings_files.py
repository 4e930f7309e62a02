"""Embeddings files (``oml_core.io``): each format written batch by batch and read back bit for bit, Parquet in
several row groups, OML's JSON byte for byte, the digest of weights against a naive one, and the one-line
errors of bad files and of files that must not be written."""

from __future__ import annotations

import hashlib
import json
import re
import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from oml_core.config.options import PREDICTIONS_FORMATS
from oml_core.io import (
    FORMATS,
    EmbeddingsFileError,
    EmbeddingsMismatchError,
    EmbeddingsProvenance,
    EmbeddingsWriter,
    check_provenance,
    check_writable,
    read_embeddings_file,
    state_dict_sha256,
)

PROVENANCE = EmbeddingsProvenance(
    extractor={"name": "resnet", "args": {"weights": None, "arch": "resnet18"}},
    weights_sha256="ab" * 32,
    transforms={"name": "norm_resize", "args": {"im_size": 32}},
)
#: Seven items written in two batches: ids, paths, labels (some unknown) and vectors.
IDS = [10, 11, 12, 13, 1, 2, 3]
PATHS = ["a.png", "b.png", None, "d.png", "e.png", "f.png", "g.png"]
LABELS = [1, None, 2, 3, None, 0, 0]
VECTORS = np.random.default_rng(0).standard_normal((7, 3)).astype(np.float32)


def write(path, paths=PATHS, **writer_args):
    with EmbeddingsWriter(path, PROVENANCE, **writer_args) as writer:
        writer.write(VECTORS[:4], ids=IDS[:4], paths=paths[:4], labels=LABELS[:4])
        writer.write(torch.from_numpy(VECTORS[4:]), ids=IDS[4:], paths=paths[4:], labels=LABELS[4:])
    return path


@pytest.mark.parametrize("suffix", [".parquet", ".npy"])
def test_a_file_reads_back_its_items_vectors_bit_for_bit_and_provenance(tmp_path, suffix):
    found = read_embeddings_file(write(tmp_path / f"e{suffix}", row_group_size=3))
    assert found.ids == IDS and found.paths == PATHS and found.labels == LABELS
    assert found.embeddings.dtype == np.float32 and found.dim == 3
    assert np.array_equal(found.embeddings.view(np.uint32), VECTORS.view(np.uint32))
    assert found.provenance == PROVENANCE
    assert sorted(p.name for p in tmp_path.iterdir()) == (
        ["e.parquet"] if suffix == ".parquet" else ["e.npy", "e.npy.meta.json"]
    )


def test_npy_is_a_plain_matrix_read_back_memory_mapped(tmp_path):
    path = write(tmp_path / "e.npy")
    assert np.array_equal(np.load(path), VECTORS)
    assert isinstance(read_embeddings_file(path).embeddings, np.memmap)


def test_parquet_is_written_in_row_groups_with_its_metadata(tmp_path):
    path = write(tmp_path / "e.parquet", row_group_size=3)
    parquet = pq.ParquetFile(path)
    assert [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)] == [3, 3, 1]
    schema = parquet.schema_arrow
    assert schema.names == ["id", "path", "label", "embedding"]
    assert schema.field("embedding").type == pa.list_(pa.float32(), 3)
    assert schema.metadata[b"oml.dim"] == b"3"
    assert json.loads(schema.metadata[b"oml.provenance"]) == PROVENANCE.to_json()


def test_json_is_omls_predictions_byte_for_byte_with_a_sidecar(tmp_path):
    paths = [f"{i}.png" for i in range(7)]
    path = write(tmp_path / "predictions.json", paths=paths)
    assert path.read_text() == json.dumps(dict(zip(paths, VECTORS.tolist())))
    found = read_embeddings_file(path)
    assert found.ids == IDS and found.labels == LABELS and found.provenance == PROVENANCE
    assert np.array_equal(found.embeddings, VECTORS)
    (tmp_path / "predictions.json.meta.json").unlink()  # OML's own file: positions, no labels, no provenance
    oml = read_embeddings_file(path)
    assert oml.ids == list(range(7)) and oml.paths == paths and oml.labels == [None] * 7
    assert oml.provenance is None


def test_an_empty_file_reads_back_empty(tmp_path):
    for suffix in (".parquet", ".npy", ".json"):
        with EmbeddingsWriter(tmp_path / f"e{suffix}", PROVENANCE):
            pass
        found = read_embeddings_file(tmp_path / f"e{suffix}")
        assert len(found) == 0 and found.embeddings.shape[0] == 0


def test_the_digest_of_weights_is_that_of_names_dtypes_shapes_and_bytes():
    state = {"b": torch.tensor([1.0, 2.0]), "a": torch.tensor([3], dtype=torch.int64)}
    naive = hashlib.sha256()
    naive.update(b'["a", "torch.int64", [1]]' + struct.pack("<q", 3))
    naive.update(b'["b", "torch.float32", [2]]' + struct.pack("<2f", 1.0, 2.0))
    assert state_dict_sha256(state) == naive.hexdigest()
    assert state_dict_sha256({"a": state["a"], "b": torch.tensor([1.0, 2.5])}) != naive.hexdigest()


def test_another_model_is_one_line_naming_both_digests():
    other = EmbeddingsProvenance(PROVENANCE.extractor, "cd" * 32, PROVENANCE.transforms)
    check_provenance(PROVENANCE, PROVENANCE, "f.npy")
    with pytest.raises(
        EmbeddingsMismatchError, match=f"f.npy: .*weights_sha256 {'ab' * 32}, .* is {'cd' * 32}"
    ):
        check_provenance(PROVENANCE, other, "f.npy")
    with pytest.raises(EmbeddingsMismatchError, match="f.npy: records no provenance"):
        check_provenance(None, PROVENANCE, "f.npy")


# ------------------------------------------------------------------------------------------------ errors
def _parquet(path, columns):
    pq.write_table(pa.table(columns), path)
    return path


BAD_PARQUET = {
    "no label": (
        {"id": [0], "path": ["a"], "embedding": [[1.0]]},
        "has no column 'label' (its columns: id, path, embedding)",
    ),
    "ragged": (
        {
            "id": [0, 1, 2],
            "path": ["a", "b", "c"],
            "label": [0, 0, 0],
            "embedding": [[1.0, 2.0]] * 2 + [[1.0]],
        },
        "ragged vectors: row 2 has 1 values, row 0 has 2",
    ),
    "nan": (
        {"id": [0, 1], "path": ["a", "b"], "label": [0, 0], "embedding": [[1.0], [float("nan")]]},
        "row 1 (b) holds NaN or infinite values",
    ),
    "null vector": (
        {"id": [0, 1], "path": ["a", "b"], "label": [0, 0], "embedding": [[1.0], None]},
        "row 1 has no vector (null)",
    ),
    "strings": (
        {"id": [0], "path": ["a"], "label": [0], "embedding": ["x"]},
        "its column 'embedding' is string, not lists of floats",
    ),
    "repeated id": (
        {"id": [4, 4], "path": ["a", "b"], "label": [0, 0], "embedding": [[1.0], [2.0]]},
        "id 4 is given to two items",
    ),
}


@pytest.mark.parametrize("case", BAD_PARQUET)
def test_a_bad_parquet_file_is_one_line_naming_it_and_the_fault(tmp_path, case):
    columns, message = BAD_PARQUET[case]
    path = _parquet(tmp_path / "bad.parquet", columns)
    with pytest.raises(EmbeddingsFileError, match=re.escape(f"{path}: {message}")):
        read_embeddings_file(path)


def test_bad_npy_and_json_files_are_one_line_naming_them(tmp_path):
    npy = write(tmp_path / "e.npy")
    sidecar = tmp_path / "e.npy.meta.json"
    data = json.loads(sidecar.read_text())
    for key in ("ids", "paths", "labels"):
        data[key] = data[key][:6]
    sidecar.write_text(json.dumps({**data, "n_items": 6}))
    with pytest.raises(
        EmbeddingsFileError, match=re.escape(f"{npy}: its matrix has 7 rows of dimension 3, its sidecar")
    ):
        read_embeddings_file(npy)
    sidecar.unlink()
    with pytest.raises(EmbeddingsFileError, match=re.escape(f"{npy}: its sidecar e.npy.meta.json (ids")):
        read_embeddings_file(npy)
    ragged, nan = tmp_path / "ragged.json", tmp_path / "nan.json"
    ragged.write_text('{"a": [1.0, 2.0], "b": [1.0]}')
    nan.write_text('{"a": [1.0], "b": [NaN]}')
    with pytest.raises(
        EmbeddingsFileError, match=re.escape(f"{ragged}: ragged vectors: row 1 (b) has 1 values")
    ):
        read_embeddings_file(ragged)
    with pytest.raises(EmbeddingsFileError, match=re.escape(f"{nan}: row 1 (b) holds NaN")):
        read_embeddings_file(nan)
    with pytest.raises(EmbeddingsFileError, match="not an embeddings file by its name; the suffixes are"):
        read_embeddings_file(tmp_path / "e.csv")


def test_nothing_is_overwritten_and_a_failed_write_leaves_nothing(tmp_path):
    (tmp_path / "kept.npy.meta.json").write_text("kept")
    with pytest.raises(
        EmbeddingsFileError, match=re.escape(f"{tmp_path / 'kept.npy.meta.json'}: exists and is never")
    ):
        EmbeddingsWriter(tmp_path / "kept.npy")
    with pytest.raises(EmbeddingsFileError, match="a parquet embeddings file must end with .parquet"):
        check_writable(tmp_path / "e.npy", "parquet")
    bad = VECTORS.copy()
    bad[5, 1] = np.inf
    with pytest.raises(EmbeddingsFileError, match=re.escape("the embedding of item 5 (f.png) holds NaN")):
        with EmbeddingsWriter(tmp_path / "e.parquet", row_group_size=2) as writer:
            writer.write(bad, ids=IDS, paths=PATHS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.npy.meta.json"]
    writer = EmbeddingsWriter(tmp_path / "late.npy")
    writer.write(VECTORS, ids=IDS)
    (tmp_path / "late.npy").write_text("another's")  # appears while the writer writes
    with pytest.raises(
        EmbeddingsFileError, match=re.escape(f"{tmp_path / 'late.npy'}: appeared while it was")
    ):
        writer.close()
    assert (tmp_path / "late.npy").read_text() == "another's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.npy.meta.json", "late.npy"]


def test_the_configs_formats_are_those_of_the_files():
    assert PREDICTIONS_FORMATS == FORMATS


@pytest.mark.parametrize("suffix", [".parquet", ".npy", ".json"])
def test_a_full_disk_raises_and_leaves_the_files_already_there_as_they_were(small_tmpfs, suffix):
    """A real 1 MiB tmpfs: a file of ~2.4 MB of vectors fails with ENOSPC in its writes (or its close); its
    temporaries are removed, nothing of it is published, and a file written there before reads back unchanged."""
    kept = write(small_tmpfs / f"kept{suffix}", paths=[f"{i}.png" for i in IDS])
    before = sorted(p.name for p in small_tmpfs.iterdir())
    vectors = np.random.default_rng(1).standard_normal((2_000, 300)).astype(np.float32)  # incompressible
    with pytest.raises(OSError, match="No space left on device"):
        with EmbeddingsWriter(small_tmpfs / f"big{suffix}", PROVENANCE, row_group_size=500) as writer:
            for start in range(0, len(vectors), 500):
                ids = range(start, start + 500)
                writer.write(vectors[start : start + 500], ids=list(ids), paths=[f"{i}.png" for i in ids])
    assert sorted(p.name for p in small_tmpfs.iterdir()) == before
    read = read_embeddings_file(kept)
    assert read.ids == IDS and np.array_equal(read.embeddings, VECTORS)
    del read  # an .npy file is read memory-mapped: the tmpfs is unmounted after the test
