"""check_retrieval_dataframe_format: OML's retrieval dataframe format, one test per rejected case."""

from __future__ import annotations

import inspect
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from oml_core.datasets import DataFrameFormatError, check_retrieval_dataframe_format
from oml_core.datasets.dataframe_format import (
    check_duplicated_items,
    check_paths_outside_root,
    check_single_item_train_labels,
    check_train_validation_overlap,
    dataframe_warnings,
    format_rows,
    parse_flags,
)

FILES = ["a.png", "b.png", "c.png", "d.png", "e.png", "f.png"]


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    """A dataset folder whose image files exist (empty: the checker never decodes them)."""
    (tmp_path / "images").mkdir()
    for name in FILES:
        (tmp_path / "images" / name).touch()
    return tmp_path


def good_df(**columns: Any) -> pd.DataFrame:
    """2 train rows (label 0) and 4 validation rows (labels 1, 2); every query has another gallery item."""
    base: dict[str, Any] = {
        "label": [0, 0, 1, 1, 2, 2],
        "path": [f"images/{name}" for name in FILES],
        "split": ["train", "train", "validation", "validation", "validation", "validation"],
        "is_query": [None, None, True, True, False, True],
        "is_gallery": [None, None, True, True, True, False],
    }
    base.update(columns)
    return pd.DataFrame({k: v for k, v in base.items() if v is not None})


def rejected(df: pd.DataFrame | Path | str, root: Path | None, **kwargs: Any) -> str:
    with pytest.raises(DataFrameFormatError) as info:
        check_retrieval_dataframe_format(df, dataset_root=root, verbose=False, **kwargs)
    return str(info.value)


# ------------------------------------------------------------------------------------------ passing


def test_a_good_dataframe_passes_and_prints_its_summary(root: Path, capsys: pytest.CaptureFixture) -> None:
    assert check_retrieval_dataframe_format(good_df(), dataset_root=root) is None
    assert capsys.readouterr().out == (
        "the dataframe: OK, in OML's retrieval format\n"
        "  train:      2 rows, 1 labels\n"
        "  validation: 4 rows, 2 labels, 3 queries, 3 gallery items\n"
    )
    check_retrieval_dataframe_format(good_df(), dataset_root=str(root), verbose=False)
    assert capsys.readouterr().out == ""


def test_the_summary_names_the_optional_columns(root: Path, capsys: pytest.CaptureFixture) -> None:
    df = good_df(
        category=["a", "a", "b", "b", "c", "c"],
        sequence=["s0", "s0", "s1", "s2", 7, 7],
        x_1=[0, None, 1, 1, 1, 1],
        x_2=[5, None, 4, 4, 4, 4],
        y_1=[0, None, 0, 0, 0, 0],
        y_2=[3, None, 2, 2, 2, 2],
    )
    check_retrieval_dataframe_format(df, dataset_root=root)
    assert capsys.readouterr().out.splitlines()[-1] == (
        "  optional:   category (3 categories), bounding boxes (5 rows with a box), sequence (4 sequences)"
    )


def test_boolean_like_flags_are_accepted(root: Path) -> None:
    df = good_df(
        is_query=[None, "", "True", "1", 0, "true"], is_gallery=[np.nan, None, 1.0, " TRUE ", "1", "false"]
    )
    # rows 2, 3 (label 1) are queries and in the gallery; row 5 (label 2) a query with row 4 in the gallery
    check_retrieval_dataframe_format(df, dataset_root=root, verbose=False)


def test_absolute_paths_without_a_dataset_root(root: Path) -> None:
    df = good_df(path=[str(root / "images" / name) for name in FILES])
    check_retrieval_dataframe_format(df, verbose=False)


def test_a_csv_path_with_a_separator(root: Path, capsys: pytest.CaptureFixture) -> None:
    csv = root / "table.csv"
    good_df().to_csv(csv, sep=";", index=False)
    check_retrieval_dataframe_format(csv, dataset_root=root, sep=";")
    assert capsys.readouterr().out.startswith(f"'{csv}': OK, in OML's retrieval format\n")
    check_retrieval_dataframe_format(str(csv), dataset_root=root, sep=";", verbose=False)

    message = rejected(csv, root)  # the default sep=","
    assert message.startswith(f"'{csv}': missing the required column(s) 'label', 'path', 'split'")
    assert "(is the separator right?)" in message


def test_a_csv_with_1_0_flags_and_empty_train_flags(root: Path) -> None:
    csv = root / "df.csv"
    good_df(is_query=[None, None, 1, 1, 0, 1], is_gallery=[None, None, 1, 1, 1, 0]).to_csv(csv, index=False)
    assert pd.read_csv(csv)["is_query"].dtype == np.float64  # 1.0 / 0.0 / NaN
    check_retrieval_dataframe_format(csv, dataset_root=root, verbose=False)


# --------------------------------------------------------------------------------------- structure


@pytest.mark.parametrize("column", ["label", "path", "split", "is_query", "is_gallery"])
def test_a_missing_required_column_is_named(root: Path, column: str) -> None:
    message = rejected(good_df(**{column: None}), root)
    assert message.startswith(
        f"the dataframe: missing the required column(s) '{column}'; the columns present"
    )


def test_no_rows(root: Path) -> None:
    assert rejected(good_df().iloc[:0], root) == "the dataframe: the dataframe has no rows"


def test_a_missing_csv_and_a_bad_df_argument(root: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        check_retrieval_dataframe_format(root / "nope.csv")
    with pytest.raises(TypeError, match="df must be a pandas DataFrame or the path"):
        check_retrieval_dataframe_format(123)  # type: ignore[arg-type]
    (root / "empty.csv").write_text("")
    assert re.match(
        r"'.*empty\.csv': cannot be read as a csv with sep=','", rejected(root / "empty.csv", root)
    )


# ------------------------------------------------------------------------------------------- values


def test_labels_that_are_not_integers(root: Path) -> None:
    message = rejected(good_df(label=[0, 0, "one", 1, 2.5, 2]), root)
    assert "column 'label': a label that is not an integer in 2 rows: rows 2 ('one'), 4 (2.5)" in message


def test_empty_labels(root: Path) -> None:
    message = rejected(good_df(label=[0, None, 1, 1, 2, 2]), root)
    assert message == "the dataframe: column 'label': an empty label at row 1 (nan)"


def test_integral_float_labels_are_integers(root: Path) -> None:
    check_retrieval_dataframe_format(good_df(label=[0.0, 0.0, 1.0, 1.0, 2.0, 2.0]), root, verbose=False)


def test_a_split_other_than_train_or_validation(root: Path) -> None:
    df = good_df(split=["train", "test", "validation", "validation", "validation", None])
    message = rejected(df, root)
    assert (
        "column 'split': a value other than 'train' or 'validation' in 2 rows: rows 1 ('test'), 5 ("
        in message
    )


def test_flags_set_on_train_rows(root: Path) -> None:
    message = rejected(good_df(is_query=[True, None, True, True, False, True]), root)
    assert (
        message
        == "the dataframe: column 'is_query': a value on a train row (must be empty there) at row 0 (True)"
    )


def test_flags_missing_on_validation_rows(root: Path) -> None:
    message = rejected(good_df(is_gallery=[None, None, True, True, None, False]), root)
    assert (
        "column 'is_gallery': an empty value on a validation row (must be True/False or 1/0) at row 4"
        in message
    )


def test_flags_that_are_not_boolean(root: Path) -> None:
    message = rejected(good_df(is_query=[None, None, "yes", True, 2, True]), root)
    assert message == "the dataframe: column 'is_query': a non-boolean value in 2 rows: rows 2 ('yes'), 4 (2)"


def test_a_query_whose_label_has_no_other_gallery_item(root: Path) -> None:
    # label 2: rows 4 and 5 are queries, neither is in the gallery
    message = rejected(
        good_df(is_query=[None, None, True, True, True, True], is_gallery=[None, None, 1, 1, 0, 0]), root
    )
    assert message == (
        "the dataframe: column 'is_gallery': a query whose label has no gallery item other than itself "
        "in 2 rows: rows 4 (label 2), 5 (label 2)"
    )


def test_a_query_that_is_the_only_gallery_item_of_its_label(root: Path) -> None:
    df = good_df(label=[0, 0, 1, 1, 2, 3], is_query=[None, None, True, True, True, True])
    df["is_gallery"] = [None, None, True, True, True, True]
    message = rejected(df, root)  # labels 2 and 3 have one validation row each: only themselves
    assert (
        "a query whose label has no gallery item other than itself in 2 rows: rows 4 (label 2), 5 (label 3)"
        in message
    )


def test_a_validation_row_neither_query_nor_gallery_and_problems_are_listed_together(root: Path) -> None:
    df = good_df(
        is_query=[None, None, True, True, False, True], is_gallery=[None, None, True, True, False, False]
    )
    message = rejected(df, root)
    assert message == (
        "the dataframe is not in OML's retrieval format (2 problems):\n"
        "  - columns 'is_query', 'is_gallery': a validation row that is neither a query nor in the gallery "
        "at row 4\n"
        "  - column 'is_gallery': a query whose label has no gallery item other than itself at row 5 (label 2)"
    )


def test_a_validation_split_without_queries_or_gallery_items(root: Path) -> None:
    no_queries = good_df(
        is_query=[None, None, False, False, False, False], is_gallery=[None, None, 1, 1, 1, 1]
    )
    assert rejected(no_queries, root) == (
        "the dataframe: the validation split has no queries (is_query is False on every one of its 4 rows): "
        "its metrics would be undefined"
    )
    csv = root / "no_gallery.csv"  # every query would also lack a gallery item of its label: not repeated
    good_df(is_query=[None, None, 1, 1, 1, 1], is_gallery=[None, None, 0, 0, 0, 0]).to_csv(csv, index=False)
    assert rejected(csv, root) == (
        f"'{csv}': the validation split has no gallery items (is_gallery is False on every one of its 4 rows): "
        "its metrics would be undefined"
    )
    train_only = good_df(split=["train"] * 6, is_query=[None] * 6, is_gallery=[None] * 6)
    check_retrieval_dataframe_format(
        train_only, dataset_root=root, verbose=False
    )  # no validation split: fine


def test_rows_are_positions_even_with_another_index(root: Path) -> None:
    df = good_df(split=["train", "train", "validation", "nope", "validation", "validation"])
    df.index = [10, 11, 12, 13, 14, 15]
    assert "at row 3 ('nope')" in rejected(df, root)


# ------------------------------------------------------------------------------------------- bboxes


def boxes(**changes: list[Any]) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {
        "x_1": [0, 1, 2, 0, 0, 0],
        "x_2": [5, 6, 7, 5, 5, 5],
        "y_1": [0, 0, 0, 1, 1, 1],
        "y_2": [4, 4, 4, 4, 4, 4],
    }
    columns.update(changes)
    return columns


def test_good_boxes_and_rows_without_a_box_pass(root: Path) -> None:
    check_retrieval_dataframe_format(good_df(**boxes()), root, verbose=False)
    empty = [None] * 6
    check_retrieval_dataframe_format(good_df(x_1=empty, x_2=empty, y_1=empty, y_2=empty), root, verbose=False)


def test_half_filled_boxes(root: Path) -> None:
    message = rejected(
        good_df(**boxes(y_2=[4, 4, None, 4, 4, 4], x_1=[0, None, 2, 0, 0, 0], x_2=[5, None, 7, 5, 5, 5])),
        root,
    )
    assert message == (
        "the dataframe: bounding box: incomplete (some of x_1, x_2, y_1, y_2 empty) in 2 rows: "
        "rows 1 (empty x_1/x_2), 2 (empty y_2)"
    )


def test_inverted_boxes(root: Path) -> None:
    message = rejected(good_df(**boxes(x_2=[5, 1, 7, 5, 5, 5], y_1=[0, 0, 0, 1, 1, 9])), root)
    assert "columns 'x_1', 'x_2': an inverted box (x_1 >= x_2) at row 1 (x_1=1, x_2=1)" in message
    assert "columns 'y_1', 'y_2': an inverted box (y_1 >= y_2) at row 5 (y_1=9, y_2=4)" in message


def test_negative_coordinates(root: Path) -> None:
    message = rejected(good_df(**boxes(x_1=[0, 1, 2, -3, 0, 0])), root)
    assert message == "the dataframe: column 'x_1': a negative coordinate at row 3 (-3)"


def test_non_integer_and_non_numeric_coordinates(root: Path) -> None:
    message = rejected(good_df(**boxes(y_2=[4, 4.5, 4, 4, 4, 4])), root)
    assert message == "the dataframe: column 'y_2': not an integer at row 1 (4.5)"
    message = rejected(good_df(**boxes(x_2=[5, 6, "wide", 5, 5, 5])), root)
    assert message == "the dataframe: column 'x_2': not a number at row 2 ('wide')"


def test_some_box_columns_missing(root: Path) -> None:
    columns = boxes()
    del columns["y_1"], columns["y_2"]
    message = rejected(good_df(**columns), root)
    assert message == (
        "the dataframe: bounding box columns: 'y_1', 'y_2' missing; give all of ['x_1', 'x_2', 'y_1', 'y_2'] or none"
    )


# ------------------------------------------------------------------------------- optional columns


def test_empty_category_and_sequence_values(root: Path) -> None:
    message = rejected(good_df(category=["a", "a", "", "b", "c", "c"], sequence=[1, 1, 2, None, 3, 3]), root)
    assert "column 'category': an empty value at row 2" in message
    assert "column 'sequence': an empty value at row 3" in message


def test_a_label_with_several_categories_warns_when_verbose(
    root: Path, capsys: pytest.CaptureFixture
) -> None:
    df = good_df(category=["a", "b", "c", "c", "d", "d"])
    with pytest.warns(UserWarning, match=r"1 label\(s\) have several categories \(labels 0\)"):
        check_retrieval_dataframe_format(df, dataset_root=root)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_retrieval_dataframe_format(df, dataset_root=root, verbose=False)


# ----------------------------------------------------------------------------------------- warnings
def test_repeated_images_are_a_warning_naming_the_rows(root: Path) -> None:
    paths = ["images/a.png", "images/b.png", "images/c.png", "images/d.png", "images/c.png", "images/./a.png"]
    df = good_df(path=paths)
    assert check_duplicated_items(df) == [
        "column 'path': a path already on an earlier row in 2 rows: rows 4 ('images/c.png', as row 2), "
        "5 ('images/./a.png', as row 0)"
    ]
    assert check_duplicated_items(good_df()) == []
    # several boxes of one image are fine; the same box twice is not
    with_boxes = good_df(path=paths, x_1=[0, 0, 0, 0, 1, 0], x_2=[5] * 6, y_1=[0] * 6, y_2=[5] * 6)
    assert check_duplicated_items(with_boxes) == [
        "columns 'path', 'x_1', 'x_2', 'y_1', 'y_2': a path and box already on an earlier row at row 5 "
        "('images/./a.png', as row 0)"
    ]


def test_repeated_texts_and_clips_are_warnings_and_clips_at_other_start_times_are_not() -> None:
    texts = good_df(path=None, text=["a cat", "a dog", "a cat", "a fox", "a cow", "a fox"])
    assert check_duplicated_items(texts) == [
        "column 'text': a text already on an earlier row in 2 rows: rows 2 ('a cat', as row 0), 5 ('a fox', as "
        "row 3)"
    ]
    clips = good_df(path=["a.wav"] * 6, start_time=[0.0, 1.0, 2.0, 0.0, 3.0, 4.0])
    assert check_duplicated_items(clips) == [
        "columns 'path', 'start_time': a path and start_time already on an earlier row at row 3 ('a.wav', as "
        "row 0)"
    ]
    assert check_duplicated_items(good_df(path=["a.wav"] * 6, start_time=[0, 1, 2, 3, 4, 5])) == []


def test_paths_that_leave_the_dataset_folder_are_a_warning_naming_the_rows() -> None:
    paths = ["images/a.png", "../a.png", "images/../b.png", "images/../../c.png", "/abs/d.png", "..x/e.png"]
    assert check_paths_outside_root(good_df(path=paths)) == [
        "column 'path': a path that leaves the dataset folder (..) in 2 rows: rows 1 ('../a.png'), 3 "
        "('images/../../c.png')"
    ]
    assert check_paths_outside_root(good_df()) == []


def test_train_labels_of_one_row_are_a_warning_naming_the_count_and_first_rows() -> None:
    assert check_single_item_train_labels(good_df()) == []  # validation labels may have one row per split
    many = good_df(
        label=[3, 4, 5, 6, 7, 8, 9, 9, 1, 1],
        split=["train"] * 8 + ["validation"] * 2,
        path=[f"{i}.png" for i in range(10)],
        is_query=[None] * 8 + [True, True],
        is_gallery=[None] * 8 + [True, True],
    )
    assert check_single_item_train_labels(many) == [
        "column 'label': a train label of one row only (no positive pair) in 6 rows: rows 0 (3), 1 (4), 2 (5), "
        "3 (6), 4 (7) and 1 more"
    ]


def test_labels_in_both_splits_are_a_warning_naming_a_few(root: Path) -> None:
    assert check_train_validation_overlap(good_df()) == []
    assert check_train_validation_overlap(good_df(label=[2, 1, 1, 1, 2, 2])) == [
        "2 label(s) are in both the train and the validation split (labels 1, 2): the validation measures "
        "the retrieval of classes seen in training"
    ]
    many = pd.DataFrame(
        {
            "label": list(range(8)) * 2,
            "split": ["train"] * 8 + ["validation"] * 8,
            "path": [f"{i}" for i in range(16)],
        }
    )
    assert check_train_validation_overlap(many) == [
        "8 label(s) are in both the train and the validation split (labels 0, 1, 2, 3, 4 and 3 more): the "
        "validation measures the retrieval of classes seen in training"
    ]


def test_dataframe_warnings_are_warned_when_verbose(root: Path, capsys: pytest.CaptureFixture) -> None:
    df = good_df(
        label=[1, 1, 1, 1, 2, 2],
        path=[f"images/{name}" for name in ["a.png", "a.png", "c.png", "d.png", "e.png", "f.png"]],
        category=["a", "b", "b", "b", "c", "c"],
    )
    expected = [
        "the dataframe: 1 label(s) have several categories (labels 1); the datasets map each label to one of "
        "them (get_label2category)",
        "the dataframe: column 'path': a path already on an earlier row at row 1 ('images/a.png', as row 0)",
        "the dataframe: 1 label(s) are in both the train and the validation split (labels 1): the validation "
        "measures the retrieval of classes seen in training",
    ]
    assert dataframe_warnings(df) == expected
    with pytest.warns(UserWarning) as caught:
        check_retrieval_dataframe_format(df, dataset_root=root)
    assert [str(w.message) for w in caught] == expected
    assert capsys.readouterr().out.startswith("the dataframe: OK")  # warnings, not errors
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_retrieval_dataframe_format(df, dataset_root=root, verbose=False)
    assert dataframe_warnings(good_df(), source="'df.csv'") == []


# -------------------------------------------------------------------------------------------- paths


def test_files_that_do_not_exist(root: Path) -> None:
    (root / "images" / "b.png").unlink()
    (root / "images" / "e.png").unlink()
    message = rejected(good_df(), root)
    assert message == (
        f"the dataframe: column 'path': a file that does not exist under the dataset_root '{root}' "
        "(2 of 6 files missing) in 2 rows: rows 1 ('images/b.png'), 4 ('images/e.png')"
    )


def test_many_missing_files_name_the_first_few(tmp_path: Path) -> None:
    message = rejected(good_df(), tmp_path / "elsewhere")
    assert "(6 of 6 files missing) in 6 rows: rows 0 ('images/a.png'), 1 ('images/b.png'), 2" in message
    assert message.endswith("4 ('images/e.png') and 1 more")


def test_relative_paths_without_a_dataset_root_are_missing(root: Path) -> None:
    assert "does not exist (no dataset_root) (6 of 6 files missing)" in rejected(good_df(), None)


def test_a_directory_is_not_an_image_file(root: Path) -> None:
    df = good_df(path=["images", *[f"images/{name}" for name in FILES[1:]]])
    assert "column 'path': a directory, not an image file at row 0 ('images')" in rejected(df, root)
    assert "does not exist" not in rejected(df, root)


def test_empty_paths_and_an_empty_path_column(root: Path) -> None:
    message = rejected(good_df(path=["images/a.png", "", *[f"images/{n}" for n in FILES[2:]]]), root)
    assert message == "the dataframe: column 'path': an empty path at row 1 ('')"
    message = rejected(good_df(path=[None] * 6), root)
    assert message == "the dataframe: column 'path': it is empty (no row has a path)"


def test_a_csv_problem_names_the_file_and_row(root: Path) -> None:
    csv = root / "bad.csv"
    good_df(label=[0, 0, 1, 1, 2, "x"]).to_csv(csv, index=False)
    assert rejected(csv, root) == f"'{csv}': column 'label': a label that is not an integer at row 5 ('x')"


# ------------------------------------------------------------------------------------------ helpers


def test_format_rows() -> None:
    assert format_rows(np.array([3])) == "row 3"
    assert format_rows(np.array([1, 2]), ["a", "b", "c"]) == "rows 1 ('b'), 2 ('c')"
    assert format_rows(np.arange(8)) == "rows 0, 1, 2, 3, 4 and 3 more"


def test_parse_flags() -> None:
    flags, missing, invalid = parse_flags(
        pd.Series(["True", " false ", 1, 0.0, None, "", "maybe"], dtype=object)
    )
    assert flags.tolist() == [True, False, True, False, False, False, False]
    assert missing.tolist() == [False, False, False, False, True, True, False]
    assert invalid.tolist() == [False, False, False, False, False, False, True]


def test_the_signature_is_the_manuals_and_oml_import_path_works() -> None:
    from oml_core.utils.dataframe_format import check_retrieval_dataframe_format as from_utils

    assert from_utils is check_retrieval_dataframe_format
    parameters = inspect.signature(check_retrieval_dataframe_format).parameters
    assert [(name, p.default) for name, p in parameters.items()] == [
        ("df", inspect.Parameter.empty),
        ("dataset_root", None),
        ("sep", ","),
        ("verbose", True),
        ("encoding", "utf-8"),  # oml's additions, keyword-only: OML's positional order is kept
        ("items_column", None),
    ]
    assert parameters["encoding"].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["items_column"].kind is inspect.Parameter.KEYWORD_ONLY
    assert issubclass(DataFrameFormatError, ValueError)


def test_read_csv_with_column_names_the_file_the_column_and_the_empty_rows(tmp_path: Path) -> None:
    from oml_core.datasets.dataframe_format import read_csv_with_column

    path = tmp_path / "df.csv"
    with pytest.raises(DataFrameFormatError, match=f"^the dataframe file '{path}' does not exist$"):
        read_csv_with_column(path, "path")
    path.write_text("name,label\na.png,0\n")
    with pytest.raises(DataFrameFormatError, match=r"has no column 'path' \(columns: name, label\)$"):
        read_csv_with_column(path, "path")
    path.write_text("text,label\nred shoe,0\n  ,1\nblue hat,2\n,3\n")
    with pytest.raises(DataFrameFormatError) as error:
        read_csv_with_column(path, "text", empty="an empty text")
    assert str(error.value) == f"'{path}': 'text': an empty text in 2 rows: rows 1, 3"
    path.write_text("text,label\nred shoe,0\nblue hat,2\n")
    assert read_csv_with_column(path, "text")["text"].tolist() == ["red shoe", "blue hat"]


def test_a_column_of_items_that_are_no_files_stands_for_path(root: Path) -> None:
    """``items_column``: a plugin's items (here rows of numbers) are required in their column instead of ``path``,
    and no file is looked for; the other columns are checked as ever."""
    features = ["0 1", "1 0", "2 2", "3 3", "4 4", "5 5"]
    df = good_df(path=None, features=features)
    check_retrieval_dataframe_format(df, verbose=False, items_column="features")
    assert rejected(df.drop(columns="features"), None, items_column="features").startswith(
        "the dataframe: missing the required column(s) 'features'; the columns present are "
    )
    assert rejected(df.assign(split=["train"] * 5 + ["test"]), None, items_column="features") == (
        "the dataframe: column 'split': a value other than 'train' or 'validation' at row 5 ('test')"
    )
    assert "missing the required column(s) 'path'" in rejected(df, root)  # without it: images
