"""Errors of the texts plugin that name what is wrong in one line, before any work: a folder that is not a model
(or holds no tokenizer) given as the extractor's model or the dataset's tokenizer, and a tokenizer whose ids go past
the model's token embeddings (refused when the pipeline has built both; the extractor refuses such ids itself too).
The commands run in this process (``oml_core.cli.main``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from PIL import Image

from oml_core.cli import main
from oml_core.registry import ConfigError, default_registry

USAGE = 2
#: The token embeddings of the small model: fewer than all-MiniLM-L6-v2's tokenizer has tokens (30522).
SMALL_VOCABULARY = 1000


@pytest.fixture(scope="module")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of a randomly initialised one-layer BERT of width 32 and :data:`SMALL_VOCABULARY` token embeddings,
    without a tokenizer."""
    from transformers import BertConfig, BertModel

    folder = tmp_path_factory.mktemp("small_bert")
    config = BertConfig(
        vocab_size=SMALL_VOCABULARY,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=130,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        BertModel(config).save_pretrained(str(folder))
    return folder


@pytest.fixture()
def texts_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated oml cache (the mock texts are written there) and a fresh registry; returns the logs' folder."""
    monkeypatch.setenv("OML_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OML_TRACEBACK", raising=False)
    default_registry.cache_clear()
    yield tmp_path / "logs"
    default_registry.cache_clear()


def train(model: Path, logs: Path, *overrides: str) -> list[str]:
    """``oml train`` on the mock texts with the extractor's model ``model``."""
    return [
        "train",
        "dataset@dataset=texts",
        "extractor@extractor=hf_text",
        f"extractor.args.model={model}",
        "transforms_train=null",
        "transforms_val=null",
        f"logs_root={logs}",
        *overrides,
    ]


def error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one line of stderr of ``oml ARGV``, which exits 2."""
    status = main(argv)
    lines = capsys.readouterr().err.splitlines()
    assert status == USAGE and len(lines) == 1, lines
    return lines[0]


def no_model_folder(tmp_path: Path, case: str) -> Path:
    """A folder that is not a model: ``empty``, a folder of ``pictures``, or a ``config`` without weights."""
    folder = tmp_path / case
    folder.mkdir()
    if case == "pictures":
        Image.new("RGB", (8, 8)).save(folder / "photo.jpg")
    if case == "config":
        (folder / "config.json").write_text('{"model_type": "bert"}')
    return folder


@pytest.mark.parametrize(
    ("case", "missing"),
    [
        ("empty", "no config.json"),
        ("pictures", "no config.json"),
        (
            "config",
            "no weights (none of model.safetensors, model.safetensors.index.json, pytorch_model.bin, "
            "pytorch_model.bin.index.json)",
        ),
    ],
)
def test_a_folder_that_is_not_a_model_is_named_before_any_work(
    texts_env, minilm_folder, tmp_path, capsys, case, missing
):
    folder = no_model_folder(tmp_path, case)
    line = error_line(capsys, train(folder, texts_env, f"dataset.args.tokenizer={minilm_folder}"))
    assert (
        line == f"oml train: error: hf_text: model: {str(folder)!r} is not a model folder: it has {missing}"
    )
    assert not texts_env.exists()


def test_a_model_folder_without_a_tokenizer_is_named_as_the_tokenizer(texts_env, small_model, capsys):
    """The texts dataset's tokenizer is the extractor's model unless given: a model saved without its tokenizer."""
    line = error_line(capsys, train(small_model, texts_env))
    assert line == (
        f"oml train: error: extractor_training_pipeline: dataset.args.tokenizer: {str(small_model)!r} holds no "
        f"tokenizer: it has none of tokenizer.json, tokenizer_config.json, vocab.txt, vocab.json, spiece.model, "
        f"sentencepiece.bpe.model, tokenizer.model"
    )
    assert not texts_env.exists()


def test_a_tokenizer_larger_than_the_model_s_vocabulary_is_named_before_any_work(
    texts_env, small_model, minilm_folder, minilm_tokenizer, capsys
):
    line = error_line(capsys, train(small_model, texts_env, f"dataset.args.tokenizer={minilm_folder}"))
    assert line == (
        f"oml train: error: extractor_training_pipeline: dataset.args.tokenizer {str(minilm_folder)!r} has 30522 "
        f"tokens, more than the {SMALL_VOCABULARY} token embeddings of the extractor hf_text (model "
        f"{str(small_model)!r}): its ids would go past them; give the tokenizer of the extractor's model"
    )
    assert not texts_env.exists()

    from oml_texts import HFTextExtractor

    extractor = HFTextExtractor(model=str(small_model))  # the library, given such tokens, names them too
    tokens = minilm_tokenizer(["an espresso machine"], return_tensors="pt")
    largest = int(tokens["input_ids"].max())
    assert largest >= SMALL_VOCABULARY
    with pytest.raises(ConfigError) as raised:
        extractor(dict(tokens))
    assert str(raised.value) == (
        f"hf_text (model {str(small_model)!r}): the token id {largest} is past the {SMALL_VOCABULARY} token "
        f"embeddings of the model: the texts were tokenised by another model's tokenizer; give the model's own"
    )
