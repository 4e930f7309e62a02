"""OML 4.0's text datasets: texts tokenised by a Hugging Face tokenizer when an item is asked for (a block of texts
at a time: :mod:`oml_texts.tokens`).

An item is a dict: ``input_tensors_key`` holds ``{"input_ids": [max_length] int64, "attention_mask":
[max_length] int64}`` (the text with its special tokens, truncated to ``max_length`` tokens and padded to it),
``index_key`` the item's index; the labelled datasets add ``labels_key`` (and ``categories`` with a ``category``
column), the query/gallery ones ``is_query`` and ``is_gallery``; ``extra_data`` adds one key per record. The
dataframes are OML's format with a ``text`` column instead of ``path``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import numpy as np
import pandas as pd
from torch import Tensor

from oml_core.const import (
    BLACK,
    CATEGORIES_COLUMN,
    CATEGORIES_KEY,
    INDEX_KEY,
    INPUT_TENSORS_KEY,
    IS_GALLERY_COLUMN,
    IS_QUERY_COLUMN,
    LABELS_COLUMN,
    LABELS_KEY,
    TEXTS_COLUMN,
    TColor,
)
from oml_core.datasets.dataframe_columns import LabelsColumn, QueryGalleryColumns
from oml_core.datasets.dataframe_format import (
    DataFrameFormatError,
    missing_columns_problem,
)
from oml_core.datasets.extra_data import add_extra_data, checked_extra_data
from oml_core.interfaces.datasets import (
    IBaseDataset,
    ILabeledDataset,
    IQueryGalleryDataset,
    IQueryGalleryLabeledDataset,
    IVisualizableDataset,
)
from oml_core.retrieval.retrieval_results import HTML_IMAGE_SIZE, framed_block_html
from oml_texts.draw import draw_text
from oml_texts.tokens import BlockTokens

#: A Hugging Face tokenizer (``transformers.PreTrainedTokenizerBase``), or any callable with its signature.
TTokenizer = Any


class TextBaseDataset(IBaseDataset, IVisualizableDataset):
    """Texts, tokenised when asked for (a block of texts at a time).

    Args:
        texts: The texts.
        tokenizer: A Hugging Face tokenizer.
        max_length: Tokens per item (special tokens included): longer texts are truncated, shorter ones padded.
        extra_data: Records of ``len(texts)`` values each, put into the items under their keys.
        input_tensors_key: Key of the tokens (``input_ids`` and ``attention_mask``) in the items.
        index_key: Key of the items' indices.

    Raises:
        ValueError: a record of ``extra_data`` of another length.
    """

    def __init__(
        self,
        texts: Sequence[str] | pd.Series,
        tokenizer: TTokenizer,
        max_length: int = 128,
        extra_data: Mapping[str, Sequence[Any]] | None = None,
        input_tensors_key: str = INPUT_TENSORS_KEY,
        index_key: str = INDEX_KEY,
    ) -> None:
        self.texts = [str(text) for text in texts]
        reserved = (input_tensors_key, index_key)
        self.extra_data = checked_extra_data(
            extra_data, len(self.texts), reserved, type(self).__name__, "texts"
        )
        self.tokenizer = tokenizer
        self.max_length = max_length
        self._tokens = BlockTokens(self.texts, tokenizer, max_length)
        self.input_tensors_key = input_tensors_key
        self.index_key = index_key

    def __len__(self) -> int:
        return len(self.texts)

    def tokens(self, item: int) -> dict[str, Tensor]:
        """``{"input_ids", "attention_mask"}`` of the text ``item``: ``[max_length]`` int64 each, as one call of
        the tokenizer with ``padding="max_length"`` gives them (tokenised a block of texts at a time:
        :class:`~oml_texts.tokens.BlockTokens`)."""
        return self._tokens(item)

    def __getitem__(self, item: int) -> dict[str, Any]:
        data: dict[str, Any] = {self.input_tensors_key: self.tokens(item), self.index_key: item}
        return add_extra_data(data, self.extra_data, item)

    def visualize(self, item: int, color: tuple[int, int, int]) -> np.ndarray:
        """The text drawn into a framed picture (:func:`~oml_texts.draw.draw_text`)."""
        return draw_text(self.texts[item], color)

    def visualize_as_html(self, item: int, title: str, color: TColor = BLACK) -> str:
        """The text itself as HTML (escaped, wrapped, in a box of the side of the image blocks that scrolls when
        the text is longer), framed by ``color`` under ``title``: a block of
        ``RetrievalResults.visualize_as_html`` (:func:`~oml_core.retrieval.retrieval_results.framed_block_html`)."""
        size = HTML_IMAGE_SIZE
        style = (
            f"width: {size}px; height: {size}px; overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere; "
            "text-align: left; font-size: 12px;"
        )
        text = f'<div class="oml-text" style="{style}">{escape(self.texts[item])}</div>'
        return framed_block_html(text, color, title)


def _checked(df: pd.DataFrame, required: Sequence[str], owner: str) -> pd.DataFrame:
    """``df`` with a fresh index, after checking it has the ``required`` columns.

    Raises:
        DataFrameFormatError: a required column is missing.
    """
    problem = missing_columns_problem(df, required)
    if problem is not None:
        raise DataFrameFormatError(f"{owner}: {problem}")
    return df.reset_index(drop=True)


class TextLabeledDataset(TextBaseDataset, LabelsColumn, ILabeledDataset):
    """The texts of a dataframe (columns ``text`` and ``label``; ``category`` used when present) with their labels.

    Args:
        df: The dataframe.
        tokenizer, max_length, extra_data, input_tensors_key, index_key: See :class:`TextBaseDataset`.
        labels_key: Key of the labels in the items.

    Raises:
        DataFrameFormatError: the column ``text`` or ``label`` is missing.
    """

    def __init__(
        self,
        df: pd.DataFrame,
        tokenizer: TTokenizer,
        max_length: int = 128,
        extra_data: Mapping[str, Sequence[Any]] | None = None,
        input_tensors_key: str = INPUT_TENSORS_KEY,
        labels_key: str = LABELS_KEY,
        index_key: str = INDEX_KEY,
    ) -> None:
        self.df = _checked(df, self._required_columns(), type(self).__name__)
        super().__init__(
            self.df[TEXTS_COLUMN], tokenizer, max_length, extra_data, input_tensors_key, index_key
        )
        self.labels_key = labels_key
        self._init_labels()

    @staticmethod
    def _required_columns() -> tuple[str, ...]:
        return TEXTS_COLUMN, LABELS_COLUMN

    def __getitem__(self, item: int) -> dict[str, Any]:
        data = self._add_label(super().__getitem__(item), item)
        if CATEGORIES_COLUMN in self.df.columns:
            data[CATEGORIES_KEY] = self.df[CATEGORIES_COLUMN].iloc[item]
        return data


class TextQueryGalleryLabeledDataset(QueryGalleryColumns, TextLabeledDataset, IQueryGalleryLabeledDataset):
    """The labelled texts of a dataframe with a query/gallery split (columns ``text``, ``label``, ``is_query``,
    ``is_gallery``; an item both query and gallery: "1 vs rest" validation). OML's argument order.

    Raises:
        DataFrameFormatError: a required column is missing, or a flag is not True/False.
    """

    def __init__(
        self,
        df: pd.DataFrame,
        tokenizer: TTokenizer,
        max_length: int = 128,
        extra_data: Mapping[str, Sequence[Any]] | None = None,
        labels_key: str = LABELS_KEY,
        input_tensors_key: str = INPUT_TENSORS_KEY,
        index_key: str = INDEX_KEY,
    ) -> None:
        super().__init__(df, tokenizer, max_length, extra_data, input_tensors_key, labels_key, index_key)
        self._init_query_gallery(self.df)

    @staticmethod
    def _required_columns() -> tuple[str, ...]:
        return TEXTS_COLUMN, LABELS_COLUMN, IS_QUERY_COLUMN, IS_GALLERY_COLUMN

    def __getitem__(self, item: int) -> dict[str, Any]:
        return self._add_query_gallery(super().__getitem__(item), item)


class TextQueryGalleryDataset(QueryGalleryColumns, TextBaseDataset, IQueryGalleryDataset):
    """The texts of a dataframe without labels, with a query/gallery split (columns ``text``, ``is_query``,
    ``is_gallery``).

    Raises:
        DataFrameFormatError: a required column is missing, or a flag is not True/False.
    """

    def __init__(
        self,
        df: pd.DataFrame,
        tokenizer: TTokenizer,
        max_length: int = 128,
        extra_data: Mapping[str, Sequence[Any]] | None = None,
        input_tensors_key: str = INPUT_TENSORS_KEY,
        index_key: str = INDEX_KEY,
    ) -> None:
        required = (TEXTS_COLUMN, IS_QUERY_COLUMN, IS_GALLERY_COLUMN)
        self.df = _checked(df, required, type(self).__name__)
        super().__init__(
            self.df[TEXTS_COLUMN], tokenizer, max_length, extra_data, input_tensors_key, index_key
        )
        self._init_query_gallery(self.df)

    def __getitem__(self, item: int) -> dict[str, Any]:
        return self._add_query_gallery(super().__getitem__(item), item)


__all__ = [
    "TTokenizer",
    "TextBaseDataset",
    "TextLabeledDataset",
    "TextQueryGalleryDataset",
    "TextQueryGalleryLabeledDataset",
]
