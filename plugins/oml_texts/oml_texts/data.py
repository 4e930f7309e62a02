"""``texts``, the dataset component of texts: a CSV in OML's format with a ``text`` column instead of ``path``
(``dataset_root / dataframe_name``; null root: the mock product descriptions), tokenised by the model's tokenizer,
checked before any model runs; the query texts of ``oml search`` (``--text``, CSVs with a ``text`` column, text
files of a query a line).

Items are named by their texts (a text on several rows: ``<text> [<n>]``, ``n`` its position), and known by
their dataframe rows.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from torch import nn

from oml_core.const import IS_GALLERY_COLUMN, MOCK_DATASET_DEFAULT_CSV, SPLIT_COLUMN, TEXTS_COLUMN
from oml_core.datasets.dataframe_format import (
    DEFAULT_ENCODING,
    DataFrameFormatError,
    check_retrieval_dataframe_format,
    dataframe_warnings,
    empty_mask,
    parse_flags,
    read_csv_with_column,
    row_problem,
)
from oml_core.datasets.image_data import check_train_and_validation_rows
from oml_core.interfaces.datasets import IBaseDataset, IDatasetComponent
from oml_core.registry import ConfigError
from oml_texts.datasets import TextBaseDataset, TextLabeledDataset, TextQueryGalleryLabeledDataset
from oml_texts.extractors import HFWrapper, token_embeddings
from oml_texts.hub import load_tokenizer
from oml_texts.mock import get_mock_texts_dataset_root
from oml_texts.tokens import DEFAULT_MAX_LENGTH


def read_texts_csv(path: Path, encoding: str = DEFAULT_ENCODING) -> pd.DataFrame:
    """The csv ``path``, which must have a ``text`` column without empty texts.

    Raises:
        ConfigError: no such file, not text in ``encoding``, no ``text`` column, an empty text (naming the rows).
    """
    try:
        return read_csv_with_column(path, TEXTS_COLUMN, encoding, empty="an empty text")
    except DataFrameFormatError as e:
        raise ConfigError(str(e)) from e


def read_query_lines(path: Path, query: str) -> list[str]:
    """The non-empty lines of the text file ``path`` (the query ``query`` as given), stripped: a query each.

    Raises:
        ConfigError: the file is not UTF-8 text (it does not decode, or holds a NUL character: an image, a
            sound), naming ``query`` and what a text index takes.
    """
    try:
        text: str | None = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        raise ConfigError(
            f"query {query!r} is not UTF-8 text: an index of texts takes texts, as a text file of a query a line, a "
            f"CSV with a {TEXTS_COLUMN!r} column, or the texts as they are (--text)"
        )
    return [line.strip() for line in text.splitlines() if line.strip()]


def unique_names(texts: Sequence[str]) -> list[str]:
    """The texts as names: a text given several times is ``<text> [<n>]``, ``n`` its position."""
    counts = Counter(texts)
    return [text if counts[text] == 1 else f"{text} [{n}]" for n, text in enumerate(texts)]


class TextData(IDatasetComponent):
    """Texts and their labels in a CSV of OML's format with a ``text`` column (``label, text, split, is_query,
    is_gallery``; ``category`` used when present).

    - Training: the ``split == "train"`` rows (:class:`~oml_texts.datasets.TextLabeledDataset`); validation: the
      ``split == "validation"`` rows (:class:`~oml_texts.datasets.TextQueryGalleryLabeledDataset`); prediction:
      the ``text`` column of every row (no other column needed).
    - A gallery index: every row (or its ``is_gallery`` rows), labelled; queries: CSVs with a ``text`` column, text
      files (a query a non-empty line) and the ``--text`` strings.
    - Checks: the ``text`` column is there and no text is empty (naming the file and the rows), before any model.

    Raises:
        ConfigError: a bad ``max_length``; ``dataset_root`` without ``dataframe_name``.

    Args:
        tokenizer: The tokenizer's model: a local folder or a Hugging Face model name (the extractor's).
        dataset_root: The folder of the CSV; null: the mock texts (:func:`~oml_texts.mock.get_mock_texts_dataset_root`).
        dataframe_name: The CSV (or Parquet: a ``*.parquet`` file or a folder of them), relative to
            ``dataset_root`` (null: ``df.csv`` of the mock texts).
        dataframe_encoding: The CSV's text encoding.
        max_length: Tokens per text (truncated or padded to it).
        download: Download the tokenizer when it is not in the Hugging Face cache.
        show_dataset_warnings: Warn about the dataframe's doubtful rows (a label with several categories, labels in
            both splits).
        pipeline: Names the pipeline in messages.
    """

    def __init__(
        self,
        tokenizer: str,
        dataset_root: str | Path | None = None,
        dataframe_name: str | None = MOCK_DATASET_DEFAULT_CSV,
        dataframe_encoding: str = DEFAULT_ENCODING,
        max_length: int = DEFAULT_MAX_LENGTH,
        download: bool = False,
        show_dataset_warnings: bool = False,
        pipeline: str = "texts",
    ) -> None:
        if not isinstance(max_length, int) or max_length < 2:
            raise ConfigError(f"{pipeline}: dataset.args.max_length must be an int >= 2, got {max_length!r}")
        self.tokenizer_name = tokenizer
        self.given_root = dataset_root
        if dataframe_name is None and dataset_root is not None:
            raise ConfigError(
                f"{pipeline}: dataframe_name is null: the texts dataset needs a csv under dataset_root"
            )
        self.dataframe_name = dataframe_name or MOCK_DATASET_DEFAULT_CSV
        self.dataframe_encoding = dataframe_encoding
        self.max_length = max_length
        self.download = download
        self.show_dataset_warnings = show_dataset_warnings
        self.pipeline = pipeline
        #: The dataframe row of each item of the datasets built from the dataframe.
        self._rows: weakref.WeakKeyDictionary[IBaseDataset, np.ndarray] = weakref.WeakKeyDictionary()

    @cached_property
    def dataset_root(self) -> Path:
        """The folder of the CSV (null: the mock texts, written on first use).

        Raises:
            ConfigError: not a folder.
        """
        if self.given_root is None:
            return get_mock_texts_dataset_root()
        root = Path(self.given_root).expanduser().resolve()
        if not root.is_dir():
            raise ConfigError(f"{self.pipeline}: dataset_root {str(root)!r} is not a directory")
        return root

    @property
    def source(self) -> Path:
        """``dataset_root / dataframe_name``."""
        return self.dataset_root / self.dataframe_name

    @cached_property
    def tokenizer(self) -> Any:
        """The tokenizer, read on first use.

        Raises:
            ConfigError: a folder that does not exist, a model that is not in the Hugging Face cache.
        """
        return load_tokenizer(self.tokenizer_name, self.download, f"{self.pipeline}: dataset.args.tokenizer")

    @cached_property
    def rows(self) -> pd.DataFrame:
        """Every row of the CSV, with its ``text`` column checked (:func:`read_texts_csv`)."""
        return read_texts_csv(self.source, self.dataframe_encoding)

    @cached_property
    def dataframe(self) -> pd.DataFrame:
        """The CSV, checked as OML's format (labels, splits, query and gallery flags) and as texts.

        Raises:
            ConfigError: see :func:`read_texts_csv` and
                :func:`~oml_core.datasets.dataframe_format.check_retrieval_dataframe_format`.
        """
        df = self.rows  # the text column first: without it the format's message would ask for a path
        try:
            check_retrieval_dataframe_format(self.source, verbose=False, encoding=self.dataframe_encoding)
        except DataFrameFormatError as e:
            raise ConfigError(str(e)) from e
        return df

    def train_dataset(self) -> TextLabeledDataset:
        """The ``split == "train"`` rows.

        Raises:
            ConfigError: no train or no validation rows (a training run needs both).
        """
        split = self.dataframe[SPLIT_COLUMN]
        train = np.flatnonzero(split == "train")
        check_train_and_validation_rows(self.source, len(train), int((split == "validation").sum()))
        return self._remember(TextLabeledDataset(self._at(train), self.tokenizer, self.max_length), train)

    def validation_dataset(self) -> TextQueryGalleryLabeledDataset:
        """The ``split == "validation"`` rows.

        Raises:
            NotImplementedError: no validation rows.
        """
        rows = np.flatnonzero(self.dataframe[SPLIT_COLUMN] == "validation")
        if len(rows) == 0:
            raise NotImplementedError(f"{self.source} has no split=validation rows")
        dataset = TextQueryGalleryLabeledDataset(self._at(rows), self.tokenizer, self.max_length)
        return self._remember(dataset, rows)

    def prediction_dataset(self) -> TextBaseDataset:
        """The ``text`` of every row, in order."""
        rows = np.arange(len(self.rows))
        return self._remember(TextBaseDataset(self.rows[TEXTS_COLUMN], self.tokenizer, self.max_length), rows)

    def gallery_dataset(self, rows: str = "all") -> TextLabeledDataset:
        """Every row (``"all"``) or the rows whose ``is_gallery`` is true (``"gallery"``), labelled."""
        df = self.dataframe
        keep = np.arange(len(df)) if rows == "all" else np.flatnonzero(parse_flags(df[IS_GALLERY_COLUMN])[0])
        return self._remember(TextLabeledDataset(self._at(keep), self.tokenizer, self.max_length), keep)

    def item_names(self, dataset: IBaseDataset) -> list[str]:
        """The texts (repeated ones numbered, :func:`unique_names`)."""
        return unique_names(self._texts(dataset).texts)

    def item_ids(self, dataset: IBaseDataset) -> list[int]:
        """The dataframe row of each item; a query's position."""
        rows = self._rows.get(dataset)
        return list(range(len(self._texts(dataset)))) if rows is None else [int(row) for row in rows]

    def query_dataset(self, queries: Sequence[str], root: Path | None = None) -> TextBaseDataset:
        """The texts of ``queries``: each a CSV (``.csv``, its ``text`` column) or a text file (a query a non-empty
        line), in order.

        Raises:
            ConfigError: a file that does not exist, a CSV without a ``text`` column or with an empty text, a file
                that is not UTF-8 text (an image, a sound: :func:`read_query_lines`).
        """
        texts: list[str] = []
        for query in queries:
            path = Path(query)
            if path.suffix.lower() == ".csv":
                texts += read_texts_csv(path)[TEXTS_COLUMN].astype(str).tolist()
            elif path.is_file():
                texts += read_query_lines(path, query)
            else:
                raise ConfigError(f"query {query!r} is no file (give query texts with --text)")
        return TextBaseDataset(texts, self.tokenizer, self.max_length)

    def text_query_dataset(self, texts: Sequence[str]) -> TextBaseDataset:
        """The query ``texts`` as they are.

        Raises:
            ConfigError: an empty text (naming its position).
        """
        for n, text in enumerate(texts, 1):
            if not text.strip():
                raise ConfigError(f"query text {n} (--text) is empty")
        return TextBaseDataset(list(texts), self.tokenizer, self.max_length)

    def check(self, datasets: list[IBaseDataset], num_workers: int, progress_bar: bool | None) -> list[str]:
        """Check that every text of ``datasets`` is there and not empty, and that the tokenizer reads them.

        Returns:
            With ``show_dataset_warnings``, the dataframe's doubtful rows.

        Raises:
            ConfigError: the CSV lacks the ``text`` column, or an empty text (naming the file and the rows).
        """
        for dataset in datasets:
            texts = pd.Series(self._texts(dataset).texts, dtype=object)
            if len(texts):
                self._texts(dataset).tokens(0)  # the tokenizer is read (a missing one named) before any model
            empty = empty_mask(texts)
            if empty.any():
                rows = self._rows.get(dataset, np.arange(len(texts)))
                where = np.zeros(int(rows.max()) + 1, dtype=bool)
                where[rows[empty]] = True
                raise ConfigError(
                    f"{str(self.source)!r}: {row_problem(repr(TEXTS_COLUMN), 'an empty text', where)}"
                )
        if self.show_dataset_warnings:
            return dataframe_warnings(self.dataframe, repr(str(self.source)))
        return []

    def check_extractor(self, extractor: nn.Module) -> None:
        """Check that the tokenizer's ids fit the token embeddings of ``extractor``'s model (an :class:`HFWrapper`,
        e.g. ``hf_text``; another extractor is not checked): a tokenizer of more tokens than the model has
        embeddings is another model's.

        Raises:
            ConfigError: ``len(tokenizer)`` is larger than the model's token embeddings, naming the tokenizer,
                the extractor and its model's folder.
        """
        size = token_embeddings(extractor.model) if isinstance(extractor, HFWrapper) else None
        if size is not None and len(self.tokenizer) > size:
            raise ConfigError(
                f"{self.pipeline}: dataset.args.tokenizer {self.tokenizer_name!r} has {len(self.tokenizer)} tokens, "
                f"more than the {size} token embeddings of the extractor {extractor.described}: its ids would go "
                f"past them; give the tokenizer of the extractor's model"
            )

    def _at(self, rows: np.ndarray) -> pd.DataFrame:
        return self.dataframe.iloc[rows].reset_index(drop=True)

    def _remember(self, dataset: Any, rows: np.ndarray) -> Any:
        self._rows[dataset] = rows
        return dataset

    def _texts(self, dataset: IBaseDataset) -> TextBaseDataset:
        if not isinstance(dataset, TextBaseDataset):
            raise TypeError(
                f"the texts dataset component got a {type(dataset).__name__}, not one of its datasets"
            )
        return dataset


__all__ = ["TextData", "read_query_lines", "read_texts_csv", "unique_names"]
