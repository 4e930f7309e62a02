"""The tokens of the text datasets' items, tokenised a block of texts at a time.

A Hugging Face fast tokenizer runs several times faster on a list of texts than text by text (one call into Rust
instead of one per text: about 11,000 against 2,500 short texts per second on one core here), and per-text
tokenisation is what held ``hf_text`` on a GPU to a fraction of sentence-transformers' ``encode`` speed
(``benchmarks/RESULTS.md``, "GPU checks"). :class:`BlockTokens` therefore tokenises the :data:`TOKENISE_BLOCK`
texts around an item in one call, without padding, when the first of them is asked for, keeps their token ids
(``int32``, about ``4 x tokens`` bytes a text), and pads each item itself as the tokenizer would: to
``max_length`` with ``pad_token_id``, on the tokenizer's ``padding_side``, the attention mask ``1`` on the tokens.
The items are the same as those of one tokenizer call per text with ``padding="max_length"`` (a test compares
them); a tokenizer without ``pad_token_id`` and ``padding_side`` (any callable with a tokenizer's signature) is
called text by text, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

#: Texts tokenised by one call of the tokenizer, when the first of them is asked for.
TOKENISE_BLOCK = 512
#: Tokens per text of the texts dataset unless its ``max_length`` says otherwise (and of an export's preprocessing).
DEFAULT_MAX_LENGTH = 128


def _pads_itself(tokenizer: Any) -> bool:
    """Whether the items can be padded here as ``tokenizer`` pads: it names its pad token and padding side."""
    return getattr(tokenizer, "pad_token_id", None) is not None and getattr(
        tokenizer, "padding_side", None
    ) in (
        "left",
        "right",
    )


class BlockTokens:
    """``tokens(item)``: ``{"input_ids", "attention_mask"}`` of ``texts[item]``, ``[max_length]`` int64 each.

    Args:
        texts: The texts.
        tokenizer: A Hugging Face tokenizer (called with ``truncation=True``, ``max_length``,
            ``add_special_tokens=True``).
        max_length: Tokens per item, special tokens included: longer texts are truncated, shorter ones padded.
    """

    def __init__(self, texts: Sequence[str], tokenizer: Any, max_length: int) -> None:
        self.texts = texts
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.blocked = _pads_itself(tokenizer)
        #: block number -> (the block's token ids concatenated, int32; the offsets of its texts in them)
        self.blocks: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, item: int) -> dict[str, Tensor]:
        if not self.blocked:
            return self._one_text(item)
        block, position = divmod(item, TOKENISE_BLOCK)
        if block not in self.blocks:
            self.blocks[block] = self._tokenise_block(block)
        values, offsets = self.blocks[block]
        ids = torch.from_numpy(values[offsets[position] : offsets[position + 1]].astype(np.int64))
        input_ids = torch.full((self.max_length,), int(self.tokenizer.pad_token_id), dtype=torch.long)
        attention_mask = torch.zeros(self.max_length, dtype=torch.long)
        right = self.tokenizer.padding_side == "right"
        where = slice(None, len(ids)) if right else slice(self.max_length - len(ids), None)
        input_ids[where] = ids
        attention_mask[where] = 1
        return {"input_ids": input_ids, "attention_mask": attention_mask}

    def _tokenise_block(self, block: int) -> tuple[np.ndarray, np.ndarray]:
        texts = list(self.texts[block * TOKENISE_BLOCK : (block + 1) * TOKENISE_BLOCK])
        encoded = self.tokenizer(
            texts, truncation=True, padding=False, max_length=self.max_length, add_special_tokens=True
        )
        ids = [list(row) for row in encoded["input_ids"]]
        offsets = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum([len(row) for row in ids], out=offsets[1:])
        values = np.fromiter((token for row in ids for token in row), dtype=np.int32, count=int(offsets[-1]))
        return values, offsets

    def _one_text(self, item: int) -> dict[str, Tensor]:
        encoded = self.tokenizer(
            self.texts[item],
            truncation=True,
            padding="max_length",
            max_length=self.max_length,
            return_tensors="pt",
            add_special_tokens=True,
        )
        return {key: torch.as_tensor(encoded[key]).reshape(-1) for key in ("input_ids", "attention_mask")}
