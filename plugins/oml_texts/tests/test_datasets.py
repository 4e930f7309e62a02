"""OML's text datasets against hand-computed tokens: the ids of MiniLM's (BERT uncased) vocabulary, read from its
vocab.txt by line number, with [CLS] ... [SEP] and [PAD] padding up to max_length."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from oml_texts import (
    TextBaseDataset,
    TextData,
    TextLabeledDataset,
    TextQueryGalleryDataset,
    TextQueryGalleryLabeledDataset,
    get_mock_texts_dataset,
)

from oml_core.datasets.dataframe_format import DataFrameFormatError


def vocab_id(folder: Path, token: str) -> int:
    """The id of ``token``: its 0-based line in vocab.txt (a naive look-up, not the tokenizer)."""
    return folder.joinpath("vocab.txt").read_text(encoding="utf-8").splitlines().index(token)


def test_an_item_holds_the_texts_ids_padded_and_its_attention_mask(minilm_folder, minilm_tokenizer):
    cls, sep, pad = (vocab_id(minilm_folder, t) for t in ("[CLS]", "[SEP]", "[PAD]"))
    hello, world = vocab_id(minilm_folder, "hello"), vocab_id(minilm_folder, "world")
    assert (cls, sep, pad) == (101, 102, 0)
    dataset = TextBaseDataset(
        ["Hello world", "world"], minilm_tokenizer, max_length=6, extra_data={"w": [3, 4]}
    )
    item = dataset[0]
    assert set(item) == {"input_tensors", "idx", "w"} and item["idx"] == 0 and item["w"] == 3
    assert set(item["input_tensors"]) == {"input_ids", "attention_mask"}
    assert item["input_tensors"]["input_ids"].tolist() == [cls, hello, world, sep, pad, pad]
    assert item["input_tensors"]["attention_mask"].tolist() == [1, 1, 1, 1, 0, 0]
    assert item["input_tensors"]["input_ids"].dtype == torch.int64
    assert dataset[1]["input_tensors"]["input_ids"].tolist() == [cls, world, sep, pad, pad, pad]


def test_a_long_text_is_truncated_to_max_length_with_its_special_tokens(minilm_folder, minilm_tokenizer):
    dataset = TextBaseDataset(["hello world hello world"], minilm_tokenizer, max_length=4)
    hello, world = vocab_id(minilm_folder, "hello"), vocab_id(minilm_folder, "world")
    assert dataset[0]["input_tensors"]["input_ids"].tolist() == [101, hello, world, 102]
    assert dataset[0]["input_tensors"]["attention_mask"].tolist() == [1, 1, 1, 1]


def test_a_batch_of_items_collates_into_named_tensors(minilm_tokenizer):
    dataset = TextBaseDataset(["a", "b c", "d"], minilm_tokenizer, max_length=5)
    batch = next(iter(torch.utils.data.DataLoader(dataset, batch_size=3)))
    assert batch["input_tensors"]["input_ids"].shape == (3, 5)
    assert batch["input_tensors"]["attention_mask"].sum(dim=1).tolist() == [3, 4, 3]


def test_labelled_and_query_gallery_datasets_follow_the_dataframe(minilm_tokenizer):
    df_train, df_val = get_mock_texts_dataset()
    train = TextLabeledDataset(df_train, minilm_tokenizer)
    assert train.get_labels().tolist() == df_train["label"].tolist()
    assert train[7]["labels"] == df_train["label"][7] and train[7]["categories"] == df_train["category"][7]
    assert train.get_label2category()[0] == "furniture"

    df_val.loc[0, "is_query"] = False
    df_val.loc[1, "is_gallery"] = False
    val = TextQueryGalleryLabeledDataset(df_val, minilm_tokenizer, max_length=16)
    assert val.get_query_ids().tolist() == list(range(1, len(df_val)))
    assert val.get_gallery_ids().tolist() == [0, *range(2, len(df_val))]
    assert (val[0]["is_query"], val[0]["is_gallery"], val[1]["is_gallery"]) == (False, True, False)
    assert val[0]["input_tensors"]["input_ids"].shape == (16,)

    unlabelled = TextQueryGalleryDataset(df_val.drop(columns=["label"]), minilm_tokenizer)
    assert unlabelled.get_query_ids().tolist() == val.get_query_ids().tolist()
    assert "labels" not in unlabelled[0]


def test_a_dataframe_without_a_text_column_is_named():
    df = pd.DataFrame({"label": [0], "path": ["a.jpg"]})
    with pytest.raises(
        DataFrameFormatError, match=r"^TextLabeledDataset: missing the required column\(s\) 'text'"
    ):
        TextLabeledDataset(df, tokenizer=None)


def test_visualize_draws_the_text_in_a_frame_of_the_colour(minilm_tokenizer):
    image = TextBaseDataset(["a long product description " * 5], minilm_tokenizer).visualize(0, (0, 200, 0))
    assert image.shape == (224, 224, 3) and image.dtype == np.uint8
    assert image[0, 0].tolist() == [0, 200, 0] and image[-1, -1].tolist() == [0, 200, 0]
    inside = image[8:-8, 8:-8]
    assert (inside < 100).all(axis=2).any()  # dark letters on white
    assert (inside == 255).all(axis=2).mean() > 0.5


def test_the_mock_texts_are_in_omls_format_with_disjoint_labels():
    df_train, df_val = get_mock_texts_dataset()
    assert (len(df_train), len(df_val)) == (90, 30)
    assert set(df_train["label"]) == set(range(18)) and set(df_val["label"]) == set(range(18, 24))
    assert df_val["is_query"].all() and df_val["is_gallery"].all()
    assert df_train["text"].nunique() == 90 and df_val["category"].nunique() == 6
    assert get_mock_texts_dataset()[0].equals(df_train)  # deterministic


def test_a_repeated_validation_text_and_a_one_row_train_label_are_one_warning_each(minilm_folder, tmp_path):
    """The texts dataset component's check (``show_dataset_warnings``) on a real CSV: a validation row written
    twice and a train label of one row are warned, one line each with the rows; the CSV is left as it was."""
    df = pd.DataFrame(
        {
            "label": [0, 0, 1, 2, 2, 3, 3],
            "text": ["a red car", "a red truck", "a lone fox", "a cat", "a kitten", "a dog", "a cat"],
            "split": ["train"] * 3 + ["validation"] * 4,
            "is_query": [None] * 3 + [True] * 4,
            "is_gallery": [None] * 3 + [True] * 4,
        }
    )
    df = pd.concat([df, df.iloc[[4]]], ignore_index=True)  # the validation row 4 again, as row 7
    df.to_csv(tmp_path / "df.csv", index=False)
    written = (tmp_path / "df.csv").read_bytes()
    data = TextData(str(minilm_folder), tmp_path, "df.csv", show_dataset_warnings=True)
    found = data.check([data.train_dataset(), data.validation_dataset()], 0, False)
    source = repr(str(tmp_path / "df.csv"))
    assert found == [
        f"{source}: column 'text': a text already on an earlier row in 2 rows: rows 6 ('a cat', as row 3), 7 "
        "('a kitten', as row 4)",
        f"{source}: column 'label': a train label of one row only (no positive pair) at row 2 (1)",
    ]
    assert (tmp_path / "df.csv").read_bytes() == written
