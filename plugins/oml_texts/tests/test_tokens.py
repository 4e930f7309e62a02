"""Block tokenisation (:mod:`oml_texts.tokens`) gives the items of one tokenizer call per text.

The reference is the tokenizer itself, called text by text with ``padding="max_length"`` (what the datasets did
before, and what OML's do), on the genuine MiniLM tokenizer: the mock texts, texts longer than ``max_length``,
an empty text, more texts than a block, both padding sides.
"""

from __future__ import annotations

import copy

import pytest
import torch
from oml_texts import TextBaseDataset, get_mock_texts_dataset
from oml_texts.tokens import TOKENISE_BLOCK, BlockTokens


def one_call(tokenizer, text: str, max_length: int) -> dict[str, list[int]]:
    encoded = tokenizer(
        text, truncation=True, padding="max_length", max_length=max_length, add_special_tokens=True
    )
    return {key: list(encoded[key]) for key in ("input_ids", "attention_mask")}


def texts_over_a_block() -> list[str]:
    df_train, df_val = get_mock_texts_dataset()
    mock = [*df_train["text"], *df_val["text"]]
    long = "a very long listing of a stainless steel kettle with many words " * 6
    texts = (mock * (TOKENISE_BLOCK // len(mock) + 2))[: TOKENISE_BLOCK + 37]
    texts[3], texts[TOKENISE_BLOCK + 5] = long, ""
    return texts


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("max_length", [8, 128])
def test_every_item_equals_one_tokenizer_call_per_text(minilm_tokenizer, side, max_length):
    tokenizer = copy.deepcopy(minilm_tokenizer)
    tokenizer.padding_side = side
    texts = texts_over_a_block()
    tokens = BlockTokens(texts, tokenizer, max_length)
    assert tokens.blocked
    order = [TOKENISE_BLOCK + 5, 3, *range(len(texts))]  # the second block first: blocks are independent
    for item in order:
        got = tokens(item)
        assert {key: value.tolist() for key, value in got.items()} == one_call(
            tokenizer, texts[item], max_length
        )
        assert got["input_ids"].dtype == torch.int64 and got["attention_mask"].dtype == torch.int64
    assert sorted(tokens.blocks) == [0, 1]


def test_the_long_text_is_truncated_and_the_empty_one_is_its_special_tokens(minilm_tokenizer):
    texts = texts_over_a_block()
    dataset = TextBaseDataset(texts, minilm_tokenizer, max_length=8)
    long = dataset[3]["input_tensors"]
    assert (
        long["input_ids"][0] == 101
        and long["input_ids"][-1] == 102
        and long["attention_mask"].tolist() == [1] * 8
    )
    empty = dataset[TOKENISE_BLOCK + 5]["input_tensors"]
    assert empty["input_ids"].tolist() == [101, 102, 0, 0, 0, 0, 0, 0]
    assert empty["attention_mask"].tolist() == [1, 1, 0, 0, 0, 0, 0, 0]


class CallableTokenizer:
    """A callable with a tokenizer's signature and no ``pad_token_id``: called text by text."""

    def __init__(self) -> None:
        self.calls: list[object] = []

    def __call__(self, text, truncation, padding, max_length, return_tensors, add_special_tokens):
        self.calls.append(text)
        ids = [7] * min(len(text.split()), max_length)
        return {
            "input_ids": torch.tensor([ids + [0] * (max_length - len(ids))]),
            "attention_mask": torch.tensor([[1] * len(ids) + [0] * (max_length - len(ids))]),
        }


def test_a_tokenizer_that_does_not_say_how_it_pads_is_called_text_by_text():
    tokenizer = CallableTokenizer()
    dataset = TextBaseDataset(["a b", "c d e"], tokenizer, max_length=4)
    item = dataset[1]["input_tensors"]
    assert item["input_ids"].tolist() == [7, 7, 7, 0]
    assert item["attention_mask"].tolist() == [1, 1, 1, 0]
    assert tokenizer.calls == ["c d e"]
