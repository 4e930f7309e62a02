"""``oml check-dataframe CSV [--dataset-root DIR] [--sep SEP]``."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from oml_core.datasets import generate_mock_dataset

RunOml = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def mock_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cli_check") / "figures"
    generate_mock_dataset(root, seed=0)
    return root


def test_a_good_csv_prints_the_summary(run_oml: RunOml, mock_root: Path) -> None:
    csv = mock_root / "df_with_bboxes.csv"
    result = run_oml("check-dataframe", str(csv))  # the dataset root defaults to the csv's folder
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"'{csv}': OK, in OML's retrieval format\n"
        "  train:      128 rows, 16 labels\n"
        "  validation: 64 rows, 8 labels, 64 queries, 64 gallery items\n"
        "  optional:   bounding boxes (192 rows with a box)\n"
    )
    assert result.stderr == ""


def test_dataset_root_and_sep_options(run_oml: RunOml, mock_root: Path, tmp_path: Path) -> None:
    csv = tmp_path / "table.tsv"
    df = pd.read_csv(mock_root / "df_with_category.csv")
    df.loc[0, "category"] = "other"  # label 0 now has two categories: a warning, not an error
    df.to_csv(csv, sep="\t", index=False)

    result = run_oml("check-dataframe", str(csv), "--dataset-root", str(mock_root), "--sep", "\t")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"'{csv}': OK, in OML's retrieval format\n")
    assert result.stderr == (
        f"oml check-dataframe: warning: '{csv}': 1 label(s) have several categories (labels 0); the datasets "
        "map each label to one of them (get_label2category)\n"
    )

    result = run_oml("check-dataframe", str(csv), "--dataset-root", str(mock_root))  # the default sep is ","
    assert result.returncode == 1
    assert "missing the required column(s) 'label'" in result.stderr and "separator" in result.stderr


def test_a_bad_csv_exits_1_with_the_message_and_no_traceback(
    run_oml: RunOml, mock_root: Path, tmp_path: Path
) -> None:
    csv = tmp_path / "df.csv"
    df = pd.read_csv(mock_root / "df.csv")
    df.loc[3, "split"] = "test"
    df.to_csv(csv, index=False)

    result = run_oml("check-dataframe", str(csv), "--dataset-root", str(mock_root))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"oml check-dataframe: error: '{csv}': column 'split': a value other than 'train' or 'validation' "
        "at row 3 ('test')\n"
    )

    result = run_oml("check-dataframe", str(tmp_path / "nope.csv"))
    assert result.returncode == 1
    assert (
        result.stderr
        == f"oml check-dataframe: error: the dataframe file '{tmp_path / 'nope.csv'}' does not exist\n"
    )


def test_a_validation_split_without_queries_exits_1(run_oml: RunOml, mock_root: Path, tmp_path: Path) -> None:
    csv = tmp_path / "df.csv"
    df = pd.read_csv(mock_root / "df.csv")
    df.loc[df["split"] == "validation", "is_query"] = False
    df.to_csv(csv, index=False)

    result = run_oml("check-dataframe", str(csv), "--dataset-root", str(mock_root))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"oml check-dataframe: error: '{csv}': the validation split has no queries (is_query is False on every "
        "one of its 64 rows): its metrics would be undefined\n"
    )


def test_repeated_images_and_shared_labels_are_warnings(
    run_oml: RunOml, mock_root: Path, tmp_path: Path
) -> None:
    csv = tmp_path / "df.csv"
    df = pd.read_csv(mock_root / "df.csv")
    first_val = int((df["split"] == "validation").idxmax())
    df.loc[1, "path"] = df.loc[0, "path"]  # an image twice
    # a train label on two validation rows (queries and gallery items: each is the other's ground truth)
    df.loc[[first_val, first_val + 1], "label"] = df.loc[0, "label"]
    df.to_csv(csv, index=False)

    result = run_oml("check-dataframe", str(csv), "--dataset-root", str(mock_root))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"'{csv}': OK, in OML's retrieval format\n")
    label = df.loc[0, "label"]
    assert result.stderr == (
        f"oml check-dataframe: warning: '{csv}': column 'path': a path already on an earlier row at row 1 "
        f"('{df.loc[0, 'path']}', as row 0)\n"
        f"oml check-dataframe: warning: '{csv}': 1 label(s) are in both the train and the validation split "
        f"(labels {label}): the validation measures the retrieval of classes seen in training\n"
    )


def test_a_path_out_of_the_root_a_repeated_validation_row_and_a_one_row_train_label_are_warnings(
    run_oml: RunOml, mock_root: Path, tmp_path: Path
) -> None:
    """Real files: a row whose path climbs out of the dataset folder to an image beside it, a validation row
    written twice, a train label given to one row only; each one warning line naming the count and the rows."""
    root = tmp_path / "root"
    shutil.copytree(mock_root / "images", root / "images")
    shutil.copyfile(mock_root / "images" / "circle_1.jpg", tmp_path / "outside.jpg")
    df = pd.read_csv(mock_root / "df.csv")
    df.loc[2, "path"] = "images/../../outside.jpg"
    df.loc[5, "label"] = 1000
    last_val = df[df["split"] == "validation"].iloc[[-1]]
    df = pd.concat([df, last_val], ignore_index=True)
    csv = root / "df.csv"
    df.to_csv(csv, index=False)
    before = csv.read_bytes()

    result = run_oml("check-dataframe", str(csv))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"'{csv}': OK, in OML's retrieval format\n")
    repeated, first = len(df) - 1, int(last_val.index[0])
    assert result.stderr.splitlines() == [
        f"oml check-dataframe: warning: '{csv}': column 'path': a path already on an earlier row at row "
        f"{repeated} ('{df.loc[first, 'path']}', as row {first})",
        f"oml check-dataframe: warning: '{csv}': column 'path': a path that leaves the dataset folder (..) at "
        "row 2 ('images/../../outside.jpg')",
        f"oml check-dataframe: warning: '{csv}': column 'label': a train label of one row only (no positive "
        "pair) at row 5 (1000)",
    ]
    assert csv.read_bytes() == before
