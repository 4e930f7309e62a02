"""GeneratedDataset (oml_core/datasets/generated.py): the manifest, completeness, materialisation and OML's
``(df_train, df_val)`` of the datasets generated in code, on a tiny dataset written here."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from oml_core.datasets.generated import MANIFEST_NAME, GeneratedDataset

CSV = "label,path,split,is_query,is_gallery\n0,items/a.txt,train,,\n1,items/b.txt,validation,True,True\n"


def _write(root: Path, seed: int) -> list[str]:
    (root / "items").mkdir(exist_ok=True)
    (root / "items" / "a.txt").write_text(f"a{seed}")
    (root / "items" / "b.txt").write_text(f"b{seed}")
    (root / "df.csv").write_text(CSV)
    return ["df.csv", "items/a.txt", "items/b.txt"]


TINY = GeneratedDataset(
    name="tiny", version=3, tables=("df.csv",), write=_write, description="the tiny dataset"
)


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def test_generate_writes_the_files_then_a_manifest_of_their_md5(tmp_path: Path) -> None:
    TINY.generate(tmp_path / "d", seed=7)
    manifest = json.loads((tmp_path / "d" / MANIFEST_NAME).read_text())
    assert manifest == {
        "name": "tiny",
        "version": 3,
        "seed": 7,
        "files": {
            "df.csv": _md5(tmp_path / "d" / "df.csv"),
            "items/a.txt": hashlib.md5(b"a7").hexdigest(),
            "items/b.txt": hashlib.md5(b"b7").hexdigest(),
        },
    }
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["df.csv", "items", MANIFEST_NAME]


def test_a_changed_byte_a_missing_file_another_seed_or_version_is_incomplete(tmp_path: Path) -> None:
    root = TINY.materialise(tmp_path / "d", seed=1)
    assert TINY.is_complete(root, 1, check_md5=True) and TINY.is_complete(root, None, check_md5=True)
    assert not TINY.is_complete(root, 2, check_md5=False)
    other_version = GeneratedDataset("tiny", 4, ("df.csv",), _write, "the tiny dataset")
    assert not other_version.is_complete(root, 1, check_md5=False)
    (root / "items" / "a.txt").write_text("x1")  # same size, other bytes
    assert TINY.is_complete(root, 1, check_md5=False) and not TINY.is_complete(root, 1, check_md5=True)
    TINY.materialise(root, seed=1, check_md5=True)  # regenerated over the changed file
    assert (root / "items" / "a.txt").read_text() == "a1" and TINY.is_complete(root, 1, check_md5=True)
    (root / "items" / "b.txt").unlink()
    assert not TINY.is_complete(root, 1, check_md5=False)


def test_materialise_into_a_folder_with_other_content_replaces_the_dataset_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    root = tmp_path / "d"
    (root / "items").mkdir(parents=True)
    (root / "items" / "stale.txt").write_text("old")
    (root / "notes.txt").write_text("mine")
    TINY.materialise(root, seed=5)
    assert sorted(p.name for p in (root / "items").iterdir()) == ["a.txt", "b.txt"]
    assert (root / "notes.txt").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["d"]  # no temporary or stale folder left
    assert TINY.is_complete(root, 5, check_md5=True)


def test_load_splits_returns_omls_frames_and_refuses_an_unknown_table_before_writing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown df_name 'x.csv'; the tiny dataset has \['df.csv'\]"):
        TINY.load_splits(tmp_path / "d", df_name="x.csv")
    assert not (tmp_path / "d").exists()
    df_train, df_val = TINY.load_splits(tmp_path / "d", seed=0, global_paths=True)
    assert df_train["path"].tolist() == [str(tmp_path / "d" / "items" / "a.txt")]
    pd.testing.assert_series_equal(df_val["is_query"], pd.Series([True], name="is_query"))
    assert df_val["is_gallery"].dtype == bool and df_val.index.tolist() == [0]


def test_a_folder_that_cannot_be_written_names_it(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError, match=r"cannot write the tiny dataset to '.*file/d': "):
        TINY.materialise(tmp_path / "file" / "d")
