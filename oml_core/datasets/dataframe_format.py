"""OML's retrieval dataframe format: its columns, the parsing of its flags and boxes, and its checker.

Required columns: ``label`` (integers), ``path`` (global, or relative to a ``dataset_root``; a dataframe of texts
has a ``text`` column instead, as OML's), ``split``
(``train`` or ``validation``), ``is_query`` and ``is_gallery`` (empty on train rows, ``True``/``False`` or
``1``/``0`` on validation rows; both may be true: "1 vs rest" validation). Optional columns: ``category``,
``sequence`` and the bounding box ``x_1, x_2, y_1, y_2`` (left, right, top, bottom; integers with
``0 <= x_1 < x_2`` and ``0 <= y_1 < y_2``; a row with the four values empty uses the whole image).

Rows are named by their 0-based position in the dataframe (for a csv file: the data row, the header not
counted).

Besides the errors of :func:`check_retrieval_dataframe_format`, :func:`dataframe_warnings` tells what is
allowed but likely a mistake: a label with several categories, an item (and box or start time) on several rows
(:func:`check_duplicated_items`), a path that leaves the dataset folder (:func:`check_paths_outside_root`), a
train label of one row (:func:`check_single_item_train_labels`), labels in both splits
(:func:`check_train_validation_overlap`).
"""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from oml_core.const import (
    BBOXES_COLUMNS,
    CATEGORIES_COLUMN,
    IS_GALLERY_COLUMN,
    IS_QUERY_COLUMN,
    LABELS_COLUMN,
    OBLIGATORY_COLUMNS,
    PATHS_COLUMN,
    SEQUENCE_COLUMN,
    SPLIT_COLUMN,
    START_TIME_COLUMN,
    TEXTS_COLUMN,
    X1_COLUMN,
    X2_COLUMN,
    Y1_COLUMN,
    Y2_COLUMN,
    TBBox,
)
from oml_core.registry.errors import ConfigError
from oml_core.utils.errors import OmlValueError
from oml_core.utils.files import not_a_file
from oml_core.utils.logs import get_logger
from oml_core.utils.text import is_text_encoding, undecodable_position

logger = get_logger(__name__)

SPLITS = ("train", "validation")
#: The text encoding of a csv unless told otherwise (pandas' default, as OML reads them).
DEFAULT_ENCODING = "utf-8"
#: The suffix of a dataframe in Parquet (a file, or the files of a folder).
PARQUET_SUFFIX = ".parquet"


class DataFrameFormatError(OmlValueError):
    """A dataframe is not in OML's retrieval format; the message names the file, columns and rows at fault.

    A ``ValueError`` and, as :class:`~oml_core.utils.errors.OmlValueError`, an ``AssertionError``: the type OML
    raises for a dataframe out of its format, so that code written for OML (``except AssertionError``) catches it.
    """


_N_ROWS_SHOWN = 5
_TRUE = ("true", "1", "1.0")
_FALSE = ("false", "0", "0.0")


def format_rows(rows: np.ndarray, values: Sequence[object] | pd.Series | None = None) -> str:
    """``"row 3"`` or ``"rows 3, 7, 9 and 12 more"`` for the positions ``rows`` (the first few are named);
    with ``values`` (indexed by position) each named row shows its value: ``"row 3 ('abc')"``."""
    rows = np.asarray(rows, dtype=np.int64)
    named = []
    for row in rows[:_N_ROWS_SHOWN].tolist():
        shown = "" if values is None else f" ({_value_text(values[row])})"
        named.append(f"{row}{shown}")
    more = f" and {len(rows) - _N_ROWS_SHOWN} more" if len(rows) > _N_ROWS_SHOWN else ""
    return f"{'row' if len(rows) == 1 else 'rows'} {', '.join(named)}{more}"


def _value_text(value: object) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value)


def row_problem(
    columns: str, what: str, mask: np.ndarray, values: Sequence[object] | pd.Series | None = None
) -> str:
    """``"<columns>: <what> at row 3 (<value>)"`` or ``"... in 7 rows: rows 3, 4, ..."`` for the rows where
    ``mask`` is true (see :func:`format_rows`)."""
    rows = np.flatnonzero(mask)
    where = "at" if len(rows) == 1 else f"in {len(rows)} rows:"
    return f"{columns}: {what} {where} {format_rows(rows, values)}"


def empty_mask(values: pd.Series) -> np.ndarray:
    """Which entries are missing: ``None``, NaN or a blank string."""
    missing = values.isna().to_numpy()
    if not pd.api.types.is_numeric_dtype(values.dtype):  # object, str (pandas >= 3), category ...
        missing = missing | values.astype(str).str.strip().eq("").to_numpy()
    return missing


def missing_columns_problem(df: pd.DataFrame, required: Sequence[str]) -> str | None:
    """A message naming the columns of ``required`` that ``df`` lacks (and the columns it has), or ``None``."""
    missing = [c for c in required if c not in df.columns]
    if not missing:
        return None
    names = ", ".join(f"'{c}'" for c in missing)
    hint = " (is the separator right?)" if len(df.columns) == 1 else ""
    return (
        f"missing the required column(s) {names}; the columns present are {list(map(str, df.columns))}{hint}"
    )


def parse_flags(values: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read a column of boolean flags: ``True``/``False``, ``1``/``0`` or those as strings (any case).

    Returns three bool arrays: the flags (false where not a flag), the missing entries (``None``, NaN, blank)
    and the invalid ones (present but not one of the accepted values).
    """
    missing = empty_mask(values)
    text = values.astype(str).str.strip().str.lower()
    flags = text.isin(_TRUE).to_numpy() & ~missing
    invalid = ~missing & ~flags & ~text.isin(_FALSE).to_numpy()
    return flags, missing, invalid


def parse_bool_column(df: pd.DataFrame, column: str, owner: str) -> np.ndarray:
    """The flags of ``df[column]`` as a bool array; :class:`DataFrameFormatError` naming ``owner``, the column
    and the rows when an entry is missing or not one of ``True/False``, ``1/0`` (or those as strings)."""
    flags, missing, invalid = parse_flags(df[column])
    bad = missing | invalid
    if bad.any():
        what = "a missing or non-boolean value (expected True/False or 1/0)"
        raise DataFrameFormatError(f"{owner}: {row_problem(f'column {column!r}', what, bad, df[column])}")
    return flags


def _bbox_problems(df: pd.DataFrame) -> tuple[np.ndarray | None, list[str]]:
    """``(boxes, problems)``: ``boxes`` is ``[N, 4]`` float in the order ``x_1, x_2, y_1, y_2`` (NaN rows have
    no box), ``None`` when the dataframe has no box column or a problem prevents reading them."""
    present = [c for c in BBOXES_COLUMNS if c in df.columns]
    if not present:
        return None, []
    if len(present) != len(BBOXES_COLUMNS):
        missing = ", ".join(f"'{c}'" for c in BBOXES_COLUMNS if c not in df.columns)
        return None, [f"bounding box columns: {missing} missing; give all of {list(BBOXES_COLUMNS)} or none"]

    problems = []
    numeric = {}
    for column in BBOXES_COLUMNS:
        numeric[column] = pd.to_numeric(df[column], errors="coerce").to_numpy(dtype=np.float64)
        not_number = np.isnan(numeric[column]) & ~empty_mask(df[column])
        if not_number.any():
            problems.append(row_problem(f"column {column!r}", "not a number", not_number, df[column]))
    if problems:
        return None, problems

    boxes = np.stack([numeric[c] for c in BBOXES_COLUMNS], axis=1)
    empty = np.isnan(boxes)
    half = empty.any(axis=1) & ~empty.all(axis=1)
    if half.any():
        which = [
            "empty " + "/".join(c for c, e in zip(BBOXES_COLUMNS, row) if e)
            for row in empty[np.flatnonzero(half)]
        ]
        described = _raw_series(which, index=np.flatnonzero(half))
        problems.append(
            row_problem("bounding box", "incomplete (some of x_1, x_2, y_1, y_2 empty)", half, described)
        )

    full = ~empty.any(axis=1)
    with np.errstate(invalid="ignore"):
        for j, column in enumerate(BBOXES_COLUMNS):
            values = boxes[:, j]
            fractional = full & (np.mod(values, 1) != 0)
            if fractional.any():
                problems.append(row_problem(f"column {column!r}", "not an integer", fractional, values))
            negative = full & (values < 0)
            if negative.any():
                problems.append(row_problem(f"column {column!r}", "a negative coordinate", negative, values))
        for lo, hi in ((X1_COLUMN, X2_COLUMN), (Y1_COLUMN, Y2_COLUMN)):
            a, b = boxes[:, BBOXES_COLUMNS.index(lo)], boxes[:, BBOXES_COLUMNS.index(hi)]
            inverted = full & (a >= b)
            if inverted.any():
                shown = _raw_series([f"{lo}={a[i]:g}, {hi}={b[i]:g}" for i in range(len(a))])
                problems.append(
                    row_problem(f"columns '{lo}', '{hi}'", f"an inverted box ({lo} >= {hi})", inverted, shown)
                )
    return (None if problems else boxes), problems


class _Raw(str):
    """A string shown as it is (not quoted) by :func:`format_rows`."""

    def __repr__(self) -> str:
        return str(self)


def _raw_series(
    texts: Sequence[str], index: Sequence[int] | pd.Index | np.ndarray | None = None
) -> pd.Series:
    """``texts`` as :class:`_Raw` values of an ``object`` series (a string dtype, pandas 3's default with pyarrow
    installed, would turn them back into plain, quoted strings)."""
    return pd.Series([_Raw(text) for text in texts], index=index, dtype=object)


def parse_bboxes(df: pd.DataFrame, owner: str = "dataset") -> list[TBBox | None] | None:
    """Read the bounding boxes of a dataframe in OML's format.

    Returns ``None`` when the dataframe has none of the columns ``x_1, x_2, y_1, y_2``; otherwise a list with,
    for each row (in order), ``None`` when the row's four box values are empty, or ``(x_1, y_1, x_2, y_2)``
    as integers. Raises :class:`DataFrameFormatError` naming ``owner``, the column and the rows when only some
    of the columns exist, when a row has only some of its values, or when a box is not integers with
    ``0 <= x_1 < x_2`` and ``0 <= y_1 < y_2``.
    """
    boxes, problems = _bbox_problems(df)
    if problems:
        raise DataFrameFormatError(f"{owner}: " + "; ".join(problems))
    if boxes is None:
        return None
    return [
        None if np.isnan(x1) else (int(x1), int(y1), int(x2), int(y2)) for x1, x2, y1, y2 in boxes.tolist()
    ]


def _read(
    df: pd.DataFrame | Path | str, sep: str, encoding: str = DEFAULT_ENCODING
) -> tuple[pd.DataFrame, str]:
    if isinstance(df, pd.DataFrame):
        return df.reset_index(drop=True), "the dataframe"
    if not isinstance(df, (str, Path)):
        raise TypeError(
            f"df must be a pandas DataFrame or the path of a csv or Parquet file, got {type(df).__name__}"
        )
    return read_table_file(df, sep, encoding), f"'{Path(df)}'"


def is_parquet(path: Path | str) -> bool:
    """Whether the dataframe ``path`` is Parquet: a ``*.parquet`` file, or a folder (of ``*.parquet`` files)."""
    path = Path(path)
    return path.suffix.lower() == PARQUET_SUFFIX or path.is_dir()


def dataframe_files(path: Path | str) -> list[Path]:
    """The files of the dataframe ``path``: the file itself, or the ``*.parquet`` files of the folder ``path``
    (not below it) in the order of their names, which is the order of their rows.

    Raises:
        DataFrameFormatError: ``path`` is not a file (:func:`~oml_core.utils.files.not_a_file`) nor a folder
            holding ``*.parquet`` files.
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(f for f in path.iterdir() if f.suffix.lower() == PARQUET_SUFFIX and f.is_file())
        if not files:
            raise DataFrameFormatError(f"the dataframe folder '{path}' holds no {PARQUET_SUFFIX} files")
        return files
    problem = not_a_file(path)
    if problem is not None:
        raise DataFrameFormatError(f"the dataframe file '{path}' {problem}")
    return [path]


def read_table_file(path: Path | str, sep: str = ",", encoding: str = DEFAULT_ENCODING) -> pd.DataFrame:
    """The dataframe ``path`` as it is, unchecked: Parquet (:func:`is_parquet`: a ``*.parquet`` file or a folder
    of them, read with pyarrow, their rows in the order of :func:`dataframe_files`), else a csv
    (:func:`read_csv_file`).

    Raises:
        FileNotFoundError: no such file.
        DataFrameFormatError: see :func:`read_csv_file`; a folder without ``*.parquet`` files, a file that is not
            Parquet, Parquet files of columns that do not go together (naming the file).
    """
    if not is_parquet(path):
        return read_csv_file(path, sep, encoding)
    if not Path(path).exists():
        raise FileNotFoundError(f"the dataframe file '{path}' does not exist")
    files = dataframe_files(path)
    import pyarrow  # imported here, as `oml --help` does not need it
    import pyarrow.parquet

    tables = []
    for file in files:
        try:
            tables.append(pyarrow.parquet.read_table(file))
        except (OSError, pyarrow.ArrowException) as e:
            raise DataFrameFormatError(f"'{file}': cannot be read as Parquet: {e}") from e
    try:
        table = pyarrow.concat_tables(tables, promote_options="default")
    except pyarrow.ArrowException as e:
        raise DataFrameFormatError(f"'{path}': its Parquet files' columns do not go together: {e}") from e
    return table.to_pandas().reset_index(drop=True)


def read_csv_file(path: Path | str, sep: str = ",", encoding: str = DEFAULT_ENCODING) -> pd.DataFrame:
    """The csv file ``path`` (text in ``encoding``, fields separated by ``sep``) as pandas reads it, unchecked.

    Raises:
        FileNotFoundError: no such file.
        DataFrameFormatError: ``path`` is no file (a symbolic link loop, a directory: :func:`~oml_core.utils.files
            .not_a_file`); ``encoding`` is no text encoding; the file is not text in ``encoding`` (the message
            names the line and the data row of its first undecodable byte, and how to give the encoding); it does
            not parse as a csv.
    """
    path = Path(path)
    problem = not_a_file(path)
    if problem == "does not exist":
        raise FileNotFoundError(f"the dataframe file '{path}' does not exist")
    if problem is not None:
        raise DataFrameFormatError(f"the dataframe file '{path}' {problem}")
    if not is_text_encoding(encoding):
        raise DataFrameFormatError(f"'{path}': unknown encoding {encoding!r} (e.g. utf-8, latin-1, cp1252)")
    try:
        return pd.read_csv(path, sep=sep, index_col=False, encoding=encoding)
    except UnicodeDecodeError:
        raise DataFrameFormatError(_undecodable_message(path, sep, encoding)) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise DataFrameFormatError(f"'{path}': cannot be read as a csv with sep={sep!r}: {e}") from e


def read_csv_with_column(
    path: Path, column: str, encoding: str = DEFAULT_ENCODING, empty: str = "an empty value"
) -> pd.DataFrame:
    """The csv ``path`` (text in ``encoding``) or Parquet (:func:`read_table_file`), which must have the column
    ``column`` without an empty cell (:func:`empty_mask`): the dataframes that need no labels or splits (of a
    prediction, of queries), whatever the column holds (paths, texts); ``empty`` is how the message names an empty
    cell (``an empty text``).

    Raises:
        DataFrameFormatError: no such file (or a symbolic link loop, a folder without Parquet files ...); not text
            in ``encoding`` or not a csv, not Parquet (:func:`read_table_file`); no
            column ``column`` (naming the columns there are); an empty cell (naming the rows).
    """
    dataframe_files(path)
    df = read_table_file(path, encoding=encoding)
    if column not in df.columns:
        raise DataFrameFormatError(
            f"'{path}': has no column {column!r} (columns: {', '.join(map(str, df.columns))})"
        )
    missing = empty_mask(df[column])
    if missing.any():
        raise DataFrameFormatError(f"'{path}': {row_problem(repr(column), empty, missing)}")
    return df


def _undecodable_message(path: Path, sep: str, encoding: str) -> str:
    """The message of the csv file ``path`` that pandas cannot decode as ``encoding``: the file, the line
    (1-based, the header being line 1) and the data row (0-based, as :func:`check_retrieval_dataframe_format`
    names rows; pandas' count of the rows above, blank lines and quoted line breaks included) of its first
    undecodable byte, and how to give the file's encoding."""
    hint = (
        "give the file's encoding (the config key dataframe_encoding, oml check-dataframe --encoding), e.g. "
        "latin-1 or cp1252, or save it as UTF-8"
    )
    data = path.read_bytes()
    try:
        data.decode(encoding)
    except UnicodeDecodeError as e:
        line, column = undecodable_position(data, e)
        above = data[: e.start - column + 1].decode(encoding)  # the lines above that byte's
        try:
            row = f"row {len(pd.read_csv(io.StringIO(above), sep=sep, index_col=False))}"
        except pd.errors.EmptyDataError:  # nothing above: the byte is in the header
            row = "the header"
        except pd.errors.ParserError:
            row = f"row {line - 2}"
        return (
            f"'{path}': is not {encoding} text: the byte 0x{data[e.start]:02x} at line {line} ({row}), column "
            f"{column} is not {encoding}; {hint}"
        )
    return f"'{path}': is not {encoding} text; {hint}"  # pandas' decoder failed where Python's does not


def _labels(df: pd.DataFrame, problems: list[str]) -> pd.Series | None:
    column = df[LABELS_COLUMN]
    missing = empty_mask(column)
    numeric = pd.to_numeric(column, errors="coerce")
    with np.errstate(invalid="ignore"):
        bad = ~missing & (numeric.isna().to_numpy() | (np.mod(numeric.to_numpy(dtype=np.float64), 1) != 0))
    if missing.any():
        problems.append(row_problem(f"column {LABELS_COLUMN!r}", "an empty label", missing, column))
    if bad.any():
        problems.append(
            row_problem(f"column {LABELS_COLUMN!r}", "a label that is not an integer", bad, column)
        )
    return None if (missing | bad).any() else numeric.astype(np.int64)


def _splits(df: pd.DataFrame, problems: list[str]) -> np.ndarray | None:
    column = df[SPLIT_COLUMN]
    bad = ~column.isin(SPLITS).to_numpy()
    if bad.any():
        what = "a value other than 'train' or 'validation'"
        problems.append(row_problem(f"column {SPLIT_COLUMN!r}", what, bad, column))
        return None
    return (column == "validation").to_numpy()


def _flags(
    df: pd.DataFrame, column: str, is_val: np.ndarray | None, problems: list[str]
) -> np.ndarray | None:
    flags, missing, invalid = parse_flags(df[column])
    n_before = len(problems)
    if is_val is not None:
        set_on_train = ~is_val & ~missing
        if set_on_train.any():
            what = "a value on a train row (must be empty there)"
            problems.append(row_problem(f"column {column!r}", what, set_on_train, df[column]))
        missing_on_val = is_val & missing
        if missing_on_val.any():
            what = "an empty value on a validation row (must be True/False or 1/0)"
            problems.append(row_problem(f"column {column!r}", what, missing_on_val, df[column]))
        invalid = invalid & is_val
    if invalid.any():
        problems.append(row_problem(f"column {column!r}", "a non-boolean value", invalid, df[column]))
    return flags if len(problems) == n_before and is_val is not None else None


def _query_gallery_problems(
    labels: pd.Series, is_val: np.ndarray, is_q: np.ndarray, is_g: np.ndarray
) -> list[str]:
    problems = []
    q, g = is_val & is_q, is_val & is_g
    neither = is_val & ~is_q & ~is_g
    if neither.any():
        what = "a validation row that is neither a query nor in the gallery"
        problems.append(
            row_problem(f"columns '{IS_QUERY_COLUMN}', '{IS_GALLERY_COLUMN}'", what, neither, None)
        )
    n_val = int(is_val.sum())
    for flags, items, column in ((q, "queries", IS_QUERY_COLUMN), (g, "gallery items", IS_GALLERY_COLUMN)):
        if n_val and not flags.any():
            problems.append(
                f"the validation split has no {items} ({column} is False on every one of its {n_val} rows): "
                "its metrics would be undefined"
            )
    if n_val and not g.any():
        return problems  # every query would also be named as lacking a gallery item of its label
    gallery_per_label = pd.Series(g.astype(np.int64)).groupby(labels.to_numpy()).sum()
    others = labels.map(gallery_per_label).fillna(0).to_numpy() - (q & g)
    lonely = q & (others <= 0)
    if lonely.any():
        what = "a query whose label has no gallery item other than itself"
        problems.append(
            row_problem(
                f"column {IS_GALLERY_COLUMN!r}",
                what,
                lonely,
                _raw_series([f"label {v}" for v in labels], index=labels.index),
            )
        )
    return problems


def _paths(df: pd.DataFrame, dataset_root: Path | None, problems: list[str]) -> None:
    column = df[PATHS_COLUMN]
    missing = empty_mask(column)
    if missing.all():
        problems.append(f"column {PATHS_COLUMN!r}: it is empty (no row has a path)")
        return
    if missing.any():
        problems.append(row_problem(f"column {PATHS_COLUMN!r}", "an empty path", missing, column))
    root = "" if dataset_root is None else str(dataset_root)
    full_paths = [os.path.join(root, str(p)) for p in column.tolist()]
    exists = np.array([m or os.path.isfile(p) for p, m in zip(full_paths, missing)])
    faults = pd.Series([None if e else not_a_file(p) for p, e in zip(full_paths, exists)], dtype=object)
    directories = (faults == "is a directory, not a file").to_numpy()
    if directories.any():
        problems.append(
            row_problem(f"column {PATHS_COLUMN!r}", "a directory, not an image file", directories, column)
        )
    loops = (faults == "is a symbolic link loop").to_numpy()
    if loops.any():
        problems.append(row_problem(f"column {PATHS_COLUMN!r}", "a symbolic link loop", loops, column))
    absent = ~exists & ~directories & ~loops
    if absent.any():
        where = (
            f"under the dataset_root '{dataset_root}'" if dataset_root is not None else "(no dataset_root)"
        )
        what = f"a file that does not exist {where} ({int(absent.sum())} of {len(column)} files missing)"
        problems.append(row_problem(f"column {PATHS_COLUMN!r}", what, absent, column))


def _optional_columns(df: pd.DataFrame, problems: list[str]) -> None:
    for column in (CATEGORIES_COLUMN, SEQUENCE_COLUMN):
        if column in df.columns:
            missing = empty_mask(df[column])
            if missing.any():
                problems.append(row_problem(f"column {column!r}", "an empty value", missing, None))


def _shown_values(values: Sequence[object]) -> str:
    """``"3, 5, 8"`` or ``"3, 5, 8, 11, 12 and 4 more"``: the first few of ``values``."""
    shown = ", ".join(_value_text(v) for v in list(values)[:_N_ROWS_SHOWN])
    return shown + (f" and {len(values) - _N_ROWS_SHOWN} more" if len(values) > _N_ROWS_SHOWN else "")


def _label_categories_warnings(df: pd.DataFrame) -> list[str]:
    if CATEGORIES_COLUMN not in df.columns:
        return []
    n_categories = df.groupby(LABELS_COLUMN)[CATEGORIES_COLUMN].nunique()
    several = n_categories[n_categories > 1]
    if not len(several):
        return []
    return [
        f"{len(several)} label(s) have several categories (labels {_shown_values(several.index.tolist())}); the "
        "datasets map each label to one of them (get_label2category)"
    ]


def check_duplicated_items(df: pd.DataFrame) -> list[str]:
    """Warnings (not errors) about rows that repeat the item of an earlier row: the same ``path`` (compared after
    ``os.path.normpath``; a dataframe of texts: the same ``text``) and, when the dataframe has them, the same box
    (several boxes of one image are fine) or the same ``start_time`` (several clips of one audio file are fine).
    Such an item counts twice: in the validation split, as its own closest match.

    Args:
        df: A dataframe in OML's format (checked by :func:`check_retrieval_dataframe_format`) with a ``path`` or a
            ``text`` column.

    Returns:
        ``[]``, or one message naming the repeated rows (0-based, see the module's docstring), each with its
        item and the earlier row it repeats: ``"column 'path': a path already on an earlier row at row 5
        ('a.jpg', as row 2)"``.
    """
    if PATHS_COLUMN in df.columns:
        column, what = PATHS_COLUMN, "path"
        items = df[PATHS_COLUMN].map(lambda p: os.path.normpath(str(p)))
    else:
        column, what = TEXTS_COLUMN, "text"
        items = df[TEXTS_COLUMN].astype(str)
    within = [c for c in BBOXES_COLUMNS if c in df.columns] or [
        c for c in (START_TIME_COLUMN,) if c in df.columns
    ]
    columns = [column, *within]
    keys = pd.concat([items, df[within].astype(str)], axis=1)
    repeated = keys.duplicated(keep="first").to_numpy()
    if not repeated.any():
        return []
    codes = keys.groupby(columns, sort=False, dropna=False).ngroup().to_numpy()
    _, first_row = np.unique(codes, return_index=True)
    shown = _raw_series(
        [f"{_value_text(item)}, as row {first_row[code]}" for item, code in zip(df[column], codes)]
    )
    if not within:
        return [row_problem(f"column {column!r}", f"a {what} already on an earlier row", repeated, shown)]
    names = ", ".join(f"'{c}'" for c in columns)
    part = "box" if within == list(BBOXES_COLUMNS) else START_TIME_COLUMN
    return [
        row_problem(f"columns {names}", f"a {what} and {part} already on an earlier row", repeated, shown)
    ]


def check_paths_outside_root(df: pd.DataFrame) -> list[str]:
    """Warnings (not errors) about relative paths that leave the dataset folder (``../x.jpg``,
    ``images/../../x.jpg``): a dataframe is read relative to its ``dataset_root``, and such a path reads a file
    elsewhere (a deliberate one can be written absolute).

    Args:
        df: A dataframe in OML's format with a ``path`` column.

    Returns:
        ``[]``, or one message with how many rows and the first few: ``"column 'path': a path that leaves the
        dataset folder (..) at row 3 ('../a.jpg')"``.
    """
    paths = df[PATHS_COLUMN].astype(str)
    leaves = np.array(
        [not os.path.isabs(p) and os.path.normpath(p).split(os.sep)[0] == os.pardir for p in paths.tolist()],
        dtype=bool,
    )
    if not leaves.any():
        return []
    return [
        row_problem(f"column {PATHS_COLUMN!r}", "a path that leaves the dataset folder (..)", leaves, paths)
    ]


def check_single_item_train_labels(df: pd.DataFrame) -> list[str]:
    """Warnings (not errors) about train labels of one row only: such an item has no positive pair to learn
    from (a triplet or a balanced batch needs two of a label).

    Args:
        df: A dataframe in OML's format (checked by :func:`check_retrieval_dataframe_format`).

    Returns:
        ``[]``, or one message with how many rows and the first few, each with its label: ``"column 'label': a
        train label of one row only (no positive pair) in 2 rows: rows 0 (7), 3 (9)"``.
    """
    is_train = (df[SPLIT_COLUMN] == "train").to_numpy()
    labels = df[LABELS_COLUMN]
    counts = labels[is_train].value_counts()
    single = is_train & labels.isin(counts[counts == 1].index).to_numpy()
    if not single.any():
        return []
    return [
        row_problem(
            f"column {LABELS_COLUMN!r}", "a train label of one row only (no positive pair)", single, labels
        )
    ]


def check_train_validation_overlap(df: pd.DataFrame) -> list[str]:
    """Warnings (not errors) about labels that are in both the train and the validation split: validation then
    measures the retrieval of classes seen in training, not of new ones (OML's usual protocol has disjoint
    classes; a deliberate "seen classes" validation may ignore the warning).

    Args:
        df: A dataframe in OML's format (checked by :func:`check_retrieval_dataframe_format`).

    Returns:
        ``[]``, or one message with how many labels are shared and the first few of them (ascending).
    """
    is_val = (df[SPLIT_COLUMN] == "validation").to_numpy()
    labels = df[LABELS_COLUMN]
    shared = sorted(set(labels[~is_val].tolist()) & set(labels[is_val].tolist()))
    if not shared:
        return []
    return [
        f"{len(shared)} label(s) are in both the train and the validation split (labels "
        f"{_shown_values(shared)}): the validation measures the retrieval of classes seen in training"
    ]


def dataframe_warnings(df: pd.DataFrame, source: str = "the dataframe") -> list[str]:
    """Everything about a dataframe in OML's format that is allowed but likely a mistake, as messages that
    start with ``source``: a label with several categories, repeated items (:func:`check_duplicated_items`),
    paths that leave the dataset folder (:func:`check_paths_outside_root`), train labels of one row
    (:func:`check_single_item_train_labels`), labels in both splits (:func:`check_train_validation_overlap`).
    The pipelines warn or log them;
    :func:`check_retrieval_dataframe_format` warns them (``verbose=True``).

    Args:
        df: A dataframe in OML's format (checked by :func:`check_retrieval_dataframe_format`).
        source: How the messages name the dataframe (for a file: its path, quoted).
    """
    found = [
        *_label_categories_warnings(df),
        *(check_duplicated_items(df) if PATHS_COLUMN in df.columns or TEXTS_COLUMN in df.columns else []),
        *(check_paths_outside_root(df) if PATHS_COLUMN in df.columns else []),
        *check_single_item_train_labels(df),
        *check_train_validation_overlap(df),
    ]
    return [f"{source}: {message}" for message in found]


def split_warnings(df: pd.DataFrame, source: str = "the dataframe") -> list[str]:
    """What a dataframe in OML's format (it has rows, each of one split) cannot be used for, as messages that
    start with ``source``: without train rows it serves ``oml validate`` and ``oml predict`` only (the training
    pipelines need both splits); without validation rows ``oml predict`` only (validating needs them)."""
    splits = set(df[SPLIT_COLUMN])
    if "train" not in splits:
        return [
            f"{source}: no train rows: usable for validate/predict only (oml train and oml train-postprocessor "
            f"need rows with split=train)"
        ]
    if "validation" not in splits:
        return [
            f"{source}: no validation rows: usable for predict only (oml train, oml validate and the "
            f"post-processor pipelines need rows with split=validation)"
        ]
    return []


def _summary(df: pd.DataFrame, source: str) -> str:
    labels = df[LABELS_COLUMN]
    is_val = (df[SPLIT_COLUMN] == "validation").to_numpy()
    is_q, is_g = parse_flags(df[IS_QUERY_COLUMN])[0], parse_flags(df[IS_GALLERY_COLUMN])[0]
    lines = [
        f"{source}: OK, in OML's retrieval format",
        f"  train:      {int((~is_val).sum())} rows, {labels[~is_val].nunique()} labels",
        f"  validation: {int(is_val.sum())} rows, {labels[is_val].nunique()} labels, "
        f"{int((is_val & is_q).sum())} queries, {int((is_val & is_g).sum())} gallery items",
    ]
    extras = []
    if CATEGORIES_COLUMN in df.columns:
        extras.append(f"category ({df[CATEGORIES_COLUMN].nunique()} categories)")
    if X1_COLUMN in df.columns:
        extras.append(f"bounding boxes ({int(df[X1_COLUMN].notna().sum())} rows with a box)")
    if SEQUENCE_COLUMN in df.columns:
        extras.append(f"sequence ({df[SEQUENCE_COLUMN].nunique()} sequences)")
    if extras:
        lines.append(f"  optional:   {', '.join(extras)}")
    return "\n".join(lines)


def check_retrieval_dataframe_format(
    df: pd.DataFrame | Path | str,
    dataset_root: Path | str | None = None,
    sep: str = ",",
    verbose: bool = True,
    *,
    encoding: str = DEFAULT_ENCODING,
    items_column: str | None = None,
) -> None:
    """Check that a dataframe is in OML's retrieval format (see the module's docstring); cheap: vectorised
    pandas and file existence checks, no image is decoded.

    Args:
        df: The dataframe, or the path of a ``.csv`` file.
        dataset_root: The folder that the relative paths of ``df`` are joined to; ``None`` when the paths are
            absolute (or relative to the working directory).
        sep: The separator of the ``.csv`` file (unused for a DataFrame).
        verbose: Log (``INFO``, :mod:`oml_core.utils.logs`) a short summary (rows, labels, queries, gallery
            items per split) when the dataframe is fine, and warn the :func:`dataframe_warnings` (a label with
            several categories, an image on several rows, labels in both splits) and the
            :func:`split_warnings` (no train rows, no validation rows: which commands can use it).
        encoding: The text encoding of the ``.csv`` file (unused for a DataFrame); keyword-only, oml's addition to
            OML's signature.
        items_column: The column that holds the items when they are not files (a plugin's modality: e.g.
            ``features``), required instead of ``path`` (whose files are then not looked for); None: ``path``, or
            ``text`` in a dataframe of texts (a ``text`` column and no ``path``). Keyword-only, oml's addition.

    Raises:
        FileNotFoundError: ``df`` is a path that does not exist.
        TypeError: ``df`` is neither a DataFrame nor a path.
        DataFrameFormatError: (a ``ValueError``) The file is not text in ``encoding`` (the message names its line
            and row, :func:`_undecodable_message`), or the dataframe is not in the format. The message names the
            file (for a path), and lists every problem found with its column(s) and the first offending rows:
            missing required columns, no rows, empty or non-integer labels, a split other than ``train`` or
            ``validation``, ``is_query`` or ``is_gallery`` set on a train row, empty or non-boolean on a
            validation row, a validation row neither query nor gallery, a validation split (with rows) with no
            query or no gallery item, a query whose label has no other gallery item, incomplete, non-integer,
            negative or inverted bounding boxes, empty ``category`` or ``sequence`` values, empty paths and
            paths with no file (with how many are missing).
    """
    df, source = _read(df, sep, encoding)
    _check(df, source, dataset_root, verbose, items_column)


def read_dataframe(
    dataset_root: Path | str, dataframe_name: str, encoding: str = DEFAULT_ENCODING
) -> pd.DataFrame:
    """Read ``dataset_root / dataframe_name`` (a ``,``-separated csv of text in ``encoding``, the config key
    ``dataframe_encoding``; or Parquet, a ``*.parquet`` file or a folder of them: :func:`read_table_file`) once,
    checked with :func:`check_retrieval_dataframe_format` (columns, labels, splits,
    query/gallery flags, boxes, existing image paths; no summary printed).

    Raises:
        ConfigError: the file does not exist (or is a symbolic link loop, a folder without Parquet files ...),
            is not Parquet, is not text in
            ``encoding`` (the message names the line and row of its first undecodable byte), or is not in OML's
            format (the message names the file, the column and the first offending rows).
    """
    path = Path(dataset_root) / dataframe_name
    problem = None if path.is_dir() else not_a_file(path)
    if problem is not None:
        raise ConfigError(f"dataframe {str(path)!r} (dataset_root + dataframe_name) {problem}")
    try:
        df, source = _read(path, ",", encoding)
        _check(df, source, dataset_root, verbose=False)
    except DataFrameFormatError as e:
        raise ConfigError(str(e)) from e
    return df


def _check(
    df: pd.DataFrame,
    source: str,
    dataset_root: Path | str | None,
    verbose: bool,
    items_column: str | None = None,
) -> None:
    """The checks of :func:`check_retrieval_dataframe_format` on ``df`` read from ``source``."""
    if items_column is None and TEXTS_COLUMN in df.columns and PATHS_COLUMN not in df.columns:
        items_column = TEXTS_COLUMN  # OML's: a text column for a path
    required = [column for column in OBLIGATORY_COLUMNS if not (items_column and column == PATHS_COLUMN)]
    if items_column:
        required.append(items_column)
    missing = missing_columns_problem(df, required)
    if missing is not None:
        raise DataFrameFormatError(f"{source}: {missing}")
    if len(df) == 0:
        raise DataFrameFormatError(f"{source}: the dataframe has no rows")

    problems: list[str] = []
    labels = _labels(df, problems)
    is_val = _splits(df, problems)
    is_q = _flags(df, IS_QUERY_COLUMN, is_val, problems)
    is_g = _flags(df, IS_GALLERY_COLUMN, is_val, problems)
    if labels is not None and is_val is not None and is_q is not None and is_g is not None:
        problems.extend(_query_gallery_problems(labels, is_val, is_q, is_g))
    problems.extend(_bbox_problems(df)[1])
    _optional_columns(df, problems)
    if not items_column:
        _paths(df, Path(dataset_root) if dataset_root is not None else None, problems)

    if len(problems) == 1:
        raise DataFrameFormatError(f"{source}: {problems[0]}")
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems)
        raise DataFrameFormatError(
            f"{source} is not in OML's retrieval format ({len(problems)} problems):\n{listed}"
        )

    if verbose:
        for message in [*dataframe_warnings(df, source), *split_warnings(df, source)]:
            warnings.warn(message, stacklevel=3)
        logger.info(_summary(df, source))


__all__ = [
    "DEFAULT_ENCODING",
    "PARQUET_SUFFIX",
    "dataframe_files",
    "is_parquet",
    "read_csv_file",
    "read_csv_with_column",
    "read_dataframe",
    "read_table_file",
    "split_warnings",
    "BBOXES_COLUMNS",
    "CATEGORIES_COLUMN",
    "DataFrameFormatError",
    "IS_GALLERY_COLUMN",
    "IS_QUERY_COLUMN",
    "LABELS_COLUMN",
    "OBLIGATORY_COLUMNS",
    "PATHS_COLUMN",
    "SEQUENCE_COLUMN",
    "SPLITS",
    "SPLIT_COLUMN",
    "X1_COLUMN",
    "X2_COLUMN",
    "Y1_COLUMN",
    "Y2_COLUMN",
    "check_duplicated_items",
    "check_paths_outside_root",
    "check_single_item_train_labels",
    "check_retrieval_dataframe_format",
    "check_train_validation_overlap",
    "dataframe_warnings",
    "format_rows",
    "parse_bboxes",
    "parse_bool_column",
    "parse_flags",
    "row_problem",
]
