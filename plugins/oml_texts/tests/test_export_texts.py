"""``oml export`` of ``hf_text`` with the genuine all-MiniLM-L6-v2: the graph takes token ids and attention mask
(batch and sequence axes dynamic), pools and normalises inside, and gives sentence-transformers' embeddings of the
same texts; its tokenizer is written beside it."""

from __future__ import annotations

import pytest
import torch
from oml_texts.extractors import HFTextExtractor
from transformers import AutoTokenizer

from oml_core.config.compose import compose_config
from oml_core.export import ExportSource, write_export
from oml_core.export.extractor import OnnxExtractor
from oml_core.lightning.pipelines import extractor_validation_pipeline
from oml_core.registry import Registry

TEXTS = [
    "Acme office chair: padded armrests and smooth casters.",
    "A red potato, great for boiling.",
    "Wireless headphones with active noise cancelling and a 30-hour battery that lasts all week long.",
    "Blue",
    "A stainless steel kettle that boils a litre of water in three minutes.",
]


@pytest.fixture(scope="module")
def minilm_export(minilm_folder, tmp_path_factory) -> OnnxExtractor:
    """all-MiniLM-L6-v2 (mean pooling, normalised, as the zoo's ``all_minilm_l6_v2``) exported for texts of 40
    tokens."""
    extractor = HFTextExtractor(str(minilm_folder), pooling="mean", normalise_features=True)
    spec = {
        "name": "hf_text",
        "args": {"model": str(minilm_folder), "pooling": "mean", "normalise_features": True},
    }
    dataset = {
        "name": "texts",
        "args": {"tokenizer": str(minilm_folder), "max_length": 40, "download": False},
    }
    folder = tmp_path_factory.mktemp("export") / "minilm"
    write_export(
        ExportSource("checkpoint", "minilm", extractor, spec, None, dataset, None), folder, Registry()
    )
    return OnnxExtractor(folder)


def test_the_export_of_minilm_gives_sentence_transformers_embeddings(minilm_export, minilm_folder):
    from sentence_transformers import SentenceTransformer

    expected = SentenceTransformer(str(minilm_folder), device="cpu").encode(
        TEXTS, normalize_embeddings=True, convert_to_tensor=True
    )
    manifest = minilm_export.manifest
    pre = manifest.preprocessing
    assert (pre["tokenizer"], pre["max_length"], pre["pooling"], pre["normalise_features"]) == (
        "tokenizer",
        40,
        "mean",
        True,
    )
    tokenizer = AutoTokenizer.from_pretrained(str(manifest.folder / pre["tokenizer"]), local_files_only=True)
    tokens = tokenizer(
        TEXTS, padding="max_length", truncation=True, max_length=pre["max_length"], return_tensors="pt"
    )
    found = minilm_export({"input_ids": tokens["input_ids"], "attention_mask": tokens["attention_mask"]})
    assert found.shape == (5, 384)
    relative = torch.linalg.vector_norm(found - expected.float(), dim=1) / torch.linalg.vector_norm(
        expected, dim=1
    )
    assert float(relative.max()) < 1e-4
    assert manifest.data["inputs"] == [
        {"name": "input_ids", "dtype": "int64", "shape": ["batch", "sequence"]},
        {"name": "attention_mask", "dtype": "int64", "shape": ["batch", "sequence"]},
    ]
    assert manifest.data["parity"]["max_relative_l2"] <= 1e-4
    assert manifest.padding == {"sequence": "attention_mask"}  # the batch's trailing padding is cut off first


def test_a_batch_of_one_short_text_is_its_embedding_in_a_padded_batch(minilm_export, minilm_tokenizer):
    tokens = minilm_tokenizer(TEXTS, padding="max_length", max_length=40, return_tensors="pt")
    assert tokens["attention_mask"][:, -1].sum() == 0  # padding in every text: cut off before the graph runs
    alone = minilm_tokenizer(TEXTS[3:4], return_tensors="pt")  # 3 tokens: another sequence length, no padding
    batch = minilm_export({key: tokens[key] for key in ("input_ids", "attention_mask")})
    one = minilm_export({key: alone[key] for key in ("input_ids", "attention_mask")})
    torch.testing.assert_close(one[0], batch[3], atol=1e-5, rtol=0)


def test_the_overrides_oml_export_prints_validate_the_export_on_texts(minilm_export, tmp_path, monkeypatch):
    """``Run it:`` of ``oml export`` names the texts dataset of the source (its tokenizer and ``max_length``):
    run as printed, the export validates on the mock texts (zero-shot MiniLM finds every text's product)."""
    monkeypatch.setenv("OML_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    manifest = minilm_export.manifest
    overrides = manifest.validate_overrides(str(manifest.folder))
    registry = Registry()
    quiet = "lightning_trainer_extra_args={enable_progress_bar: false}"
    cfg = compose_config(
        "extractor_validation_pipeline", [*overrides, f"logs_root={tmp_path}", quiet], registry=registry
    )
    assert cfg.dataset == manifest.data["dataset"] and cfg.extractor.args.path == str(manifest.folder)
    metrics = extractor_validation_pipeline(cfg, registry=registry).metrics
    assert float(metrics["OVERALL/cmc/1"]) == 1.0
