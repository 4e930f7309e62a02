"""``hf_text`` and ``HFWrapper`` on the genuine all-MiniLM-L6-v2: sentence-transformers' embeddings, the first
token's hidden state, the zoo's sha256 check; bad models refused in one line before any model is read."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
import torch
from oml_texts import HFWrapper, TextBaseDataset
from oml_texts.extractors import HFTextExtractor

from oml_core.registry import ConfigError, default_registry
from oml_core.zoo import PretrainedChecksumError

TEXTS = [
    "Acme office chair: padded armrests and smooth casters.",
    "A red potato, great for boiling.",
    "Wireless headphones with active noise cancelling and a 30-hour battery that lasts all week long.",
]


def batch_of(texts: list[str], tokenizer, max_length: int = 64) -> dict[str, torch.Tensor]:
    dataset = TextBaseDataset(texts, tokenizer, max_length=max_length)
    return next(iter(torch.utils.data.DataLoader(dataset, batch_size=len(texts))))["input_tensors"]


@pytest.mark.slow
def test_hf_text_is_sentence_transformers_and_hfwrapper_the_first_token(minilm_folder, minilm_tokenizer):
    from sentence_transformers import SentenceTransformer

    expected = SentenceTransformer(str(minilm_folder), device="cpu").encode(
        TEXTS, normalize_embeddings=True, convert_to_tensor=True
    )
    registry = default_registry()
    extractor = registry.build(
        "extractor",
        {"name": "hf_text", "args": {"model": str(minilm_folder), "weights": "all_minilm_l6_v2"}},
    ).eval()
    assert (extractor.pooling, extractor.normalise_features, extractor.feat_dim) == (
        "mean",
        True,
        384,
    )  # the zoo's
    x = batch_of(TEXTS, minilm_tokenizer)
    with torch.no_grad():
        got = extractor(x)
        hidden = extractor.model(x["input_ids"], attention_mask=x["attention_mask"]).last_hidden_state
    torch.testing.assert_close(got, expected.float(), atol=1e-5, rtol=0)

    wrapper = HFWrapper(extractor.model, feat_dim=384)
    with torch.no_grad():
        torch.testing.assert_close(wrapper(x), hidden[:, 0, :], atol=1e-5, rtol=0)
    # a padded batch gives each text the embedding it has alone (the mask keeps the padding out of the mean)
    with torch.no_grad():
        alone = extractor(batch_of(TEXTS[1:2], minilm_tokenizer, max_length=16))
    torch.testing.assert_close(alone[0], got[1], atol=1e-5, rtol=0)


def test_the_former_name_normalise_is_accepted_with_a_warning_naming_normalise_features(minilm_folder):
    registry = default_registry()
    model = {"model": str(minilm_folder), "pooling": "mean"}
    with pytest.warns(FutureWarning, match="normalise is renamed normalise_features") as warned:
        old = registry.build("extractor", {"name": "hf_text", "args": {**model, "normalise": True}})
    assert old.normalise_features is True and len(warned) == 1
    # an override of the former name over the default config's normalise_features: the user's value wins
    both = {**model, "normalise_features": True, "normalise": False}
    with pytest.warns(FutureWarning, match=r"normalise=False is used, not normalise_features=True"):
        assert registry.build("extractor", {"name": "hf_text", "args": both}).normalise_features is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name warns of nothing
        new = registry.build("extractor", {"name": "hf_text", "args": {**model, "normalise_features": True}})
    x = {"input_ids": torch.tensor([[101, 7592, 102]]), "attention_mask": torch.ones(1, 3, dtype=torch.long)}
    with torch.no_grad():
        torch.testing.assert_close(old.eval()(x), new.eval()(x), atol=0, rtol=0)
        assert torch.linalg.vector_norm(new(x), dim=1).item() == pytest.approx(1.0, abs=1e-6)


def test_a_model_folder_that_does_not_exist_is_one_line(tmp_path):
    missing = tmp_path / "no_model"
    with pytest.raises(ConfigError) as raised:
        HFTextExtractor(model=str(missing))
    assert str(raised.value) == f"hf_text: model: the model folder {str(missing)!r} does not exist"


def test_a_model_missing_from_the_cache_is_one_line_without_download(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ConfigError) as raised:
        HFTextExtractor(model="someone/not-a-cached-model")
    assert str(raised.value).startswith(
        "hf_text: model: 'someone/not-a-cached-model' is neither a folder nor a model in the Hugging Face cache"
    )
    assert str(raised.value).endswith("give a local folder, or set download: true to download it")


def test_a_bad_pooling_is_refused_before_the_model_is_read(tmp_path):
    with pytest.raises(ConfigError, match=r"^hf_text: pooling must be one of \['cls', 'mean'\], got 'max'$"):
        HFTextExtractor(model=str(tmp_path / "never_read"), pooling="max")


def test_a_folder_whose_weights_are_not_the_zoo_models_is_refused(minilm_folder, tmp_path):
    """A real byte-flipped copy of model.safetensors under the zoo key: refused by its sha256 before reading."""
    folder = tmp_path / "minilm"
    shutil.copytree(minilm_folder, folder)
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(PretrainedChecksumError) as raised:
        HFTextExtractor(model=str(folder), weights="all_minilm_l6_v2")
    message = str(raised.value)
    assert message.startswith(f"{weights} has sha256 ")
    assert message.endswith(
        "expected 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db: it is not the zoo model "
        "'all_minilm_l6_v2' (https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/"
        "model.safetensors)"
    )
    weights.unlink()
    with pytest.raises(PretrainedChecksumError, match="has no model.safetensors"):
        HFTextExtractor(model=str(folder), weights="all_minilm_l6_v2")


def test_the_zoo_entry_of_minilm_is_registered_with_its_digest():
    from oml_core.zoo import get_pretrained

    entry = get_pretrained("all_minilm_l6_v2", default_registry())
    assert entry.extractor == "hf_text"
    assert entry.sha256 == "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    assert dict(entry.init_args) == {
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "pooling": "mean",
        "normalise_features": True,
    }


def test_the_genuine_minilm_has_the_zoos_digest(minilm_folder: Path):
    from oml_texts.zoo import check_model_folder

    from oml_core.zoo import get_pretrained

    check_model_folder(
        minilm_folder, "all_minilm_l6_v2", get_pretrained("all_minilm_l6_v2", default_registry())
    )
