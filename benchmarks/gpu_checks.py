"""GPU checks and timings: the CUDA paths that the CPU test suite cannot run, each against its CPU result.

Run on a machine with one CUDA GPU (the oml core and the texts and audio plugins installed), e.g.::

    python benchmarks/gpu_checks.py --parts retrieval fnmr texts audio index --minilm-config DIR

Parts (each prints a markdown table and goes on to the next part when one fails, printing its traceback):

- ``retrieval``: ``RetrievalResults.from_embeddings`` (l2, top 5, self excluded) + ``calc_retrieval_metrics_rr``
  (cmc@1, cmc@5, precision@5, map@5) of ``bench_retrieval.py``'s clustered set, all ``N`` items queries and
  gallery, with the embeddings on the GPU and on the CPU (``--threads``): seconds (CUDA synchronised), the GPU's
  peak allocated memory, and whether the retrieved ids and metrics equal the CPU's (ids may differ only at
  distance ties; the metrics are compared to 1e-6).
- ``fnmr``: ``calc_fnmr_at_fmr_all_pairs`` over all ``N * (N - 1)`` pairs on both devices: seconds and the values.
- ``texts``: embeddings per second of ``hf_text`` (mean pooling, normalised) through
  :func:`oml_core.inference.inference` on the GPU, in float32 and with ``use_fp16=True``, against
  sentence-transformers' ``encode`` on the same GPU and texts; the largest difference of the embeddings. The
  model is all-MiniLM-L6-v2's architecture and tokenizer (``--minilm-config``: a folder with its
  ``config.json`` and tokenizer files) with random weights (seed 0) written into that folder: the speed of
  the real model, not its embeddings.
- ``audio``: clips per second of ``ECAPATDNNExtractor`` (the released architecture, random weights) on batches
  of 3-second 16 kHz waveforms on the GPU, float32 and under bfloat16 autocast, against the CPU.
- ``index``: seconds of ``oml index build``'s default config (the 192 mock pictures, the seeded random ResNet18,
  calibrated; :func:`~oml_core.index.build.build_gallery_index` of the composed config, as the command runs it)
  with ``accelerator=cpu`` and ``accelerator=gpu`` at each ``--index-sizes`` (``transforms.args.im_size``),
  interleaved rounds; the largest relative L2 distance of the GPU's embeddings from the CPU's, as the index
  computes them (float32, TF32 off) and with torch's default TF32 convolutions; whether the thresholds agree.

Results of a run: ``benchmarks/RESULTS.md``, section "GPU checks".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_retrieval import TOP_K, OneVsRest, make_embeddings  # noqa: E402

from oml_core.functional.fnmr import calc_fnmr_at_fmr_all_pairs  # noqa: E402
from oml_core.metrics.embeddings import calc_retrieval_metrics_rr  # noqa: E402
from oml_core.retrieval import RetrievalResults  # noqa: E402

CUDA = torch.device("cuda")
FMR_VALS = (0.001, 0.01, 0.1)


def timed(function: Callable[[], object], device: torch.device) -> tuple[object, float]:
    """``(function(), seconds)``, the GPU's queued work finished before the clock stops."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    result = function()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return result, time.perf_counter() - started


def retrieval(sizes: list[int], dim: int) -> None:
    print(
        "| N | device | kNN + metrics s | GPU peak MiB | cmc@1 | precision@5 | ids equal CPU's | metrics equal |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for n in sizes:
        embeddings, labels = make_embeddings(n, dim, 5, seed=0)
        dataset = OneVsRest(labels)
        results = {}
        for device in (torch.device("cpu"), CUDA):
            x = embeddings.to(device)
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()

            def run(x: torch.Tensor = x, dataset: OneVsRest = dataset) -> tuple[RetrievalResults, dict]:
                rr = RetrievalResults.from_embeddings(x, dataset, n_items=TOP_K)
                metrics = calc_retrieval_metrics_rr(
                    rr, cmc_top_k=(1, 5), precision_top_k=(5,), map_top_k=(5,)
                )
                return rr, metrics

            (rr, metrics), seconds = timed(run, device)
            peak = (
                (torch.cuda.max_memory_allocated() - base) / 2**20 if device.type == "cuda" else float("nan")
            )
            results[device.type] = (rr, metrics, seconds, peak)
        cpu_rr, cpu_metrics = results["cpu"][:2]
        for name, (rr, metrics, seconds, peak) in results.items():
            same_ids = torch.equal(rr.retrieved_ids.values.cpu(), cpu_rr.retrieved_ids.values)
            same_metrics = all(
                abs(float(metrics[m][k]) - float(cpu_metrics[m][k])) < 1e-6
                for m in metrics
                for k in metrics[m]
            )
            print(
                f"| {n} | {name} | {seconds:.2f} | {peak:.0f} | {float(metrics['cmc'][1]):.4f} | "
                f"{float(metrics['precision'][5]):.4f} | {same_ids} | {same_metrics} |"
            )


def fnmr(sizes: list[int], dim: int) -> None:
    print("| N | device | seconds | " + " | ".join(f"fnmr@fmr={v}" for v in FMR_VALS) + " |")
    print("|---|---|---|" + "---|" * len(FMR_VALS))
    for n in sizes:
        embeddings, labels = make_embeddings(n, dim, 5, seed=0)
        ids = torch.arange(n)
        for device in (torch.device("cpu"), CUDA):
            x, i, y = embeddings.to(device), ids.to(device), labels.to(device)
            values, seconds = timed(
                partial(calc_fnmr_at_fmr_all_pairs, x, i, i, y, fmr_vals=FMR_VALS), device
            )
            shown = " | ".join(f"{float(v):.6f}" for v in values)  # type: ignore[union-attr]
            print(f"| {n} | {device.type} | {seconds:.2f} | {shown} |")


def random_minilm(folder: Path) -> None:
    """Write random weights (seed 0) of the ``config.json`` in ``folder`` as its ``model.safetensors``."""
    from transformers import AutoConfig, AutoModel

    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(folder)).save_pretrained(folder)


def texts(folder: Path, n_texts: int, rounds: int) -> None:
    from oml_texts import TextBaseDataset, get_mock_texts_dataset
    from oml_texts.extractors import HFTextExtractor
    from oml_texts.hub import load_tokenizer
    from sentence_transformers import SentenceTransformer

    from oml_core.inference import inference

    random_minilm(folder)
    df_train, df_val = get_mock_texts_dataset()
    pool = df_train["text"].tolist() + df_val["text"].tolist()
    texts = (pool * (n_texts // len(pool) + 1))[:n_texts]
    extractor = HFTextExtractor(model=str(folder), pooling="mean", normalise_features=True).to(CUDA)
    dataset = TextBaseDataset(texts, load_tokenizer(str(folder)), max_length=128)
    st = SentenceTransformer(str(folder), device="cuda")
    print(f"| batch | side | texts/s (median of {rounds}) | max abs difference from encode |")
    print("|---|---|---|---|")
    for batch in (32, 256):
        sides: dict[str, Callable[[], torch.Tensor]] = {
            "hf_text fp32": partial(inference, extractor, dataset, batch_size=batch),
            "hf_text use_fp16": partial(inference, extractor, dataset, batch_size=batch, use_fp16=True),
            "sentence-transformers encode": partial(
                st.encode, texts, batch_size=batch, normalize_embeddings=True, convert_to_tensor=True
            ),
        }
        reference = sides["sentence-transformers encode"]().cpu()
        difference = {name: float((side().cpu() - reference).abs().max()) for name, side in sides.items()}
        speed: dict[str, list[float]] = {name: [] for name in sides}
        for r in range(rounds):
            for name in list(sides) if r % 2 == 0 else list(sides)[::-1]:
                _, seconds = timed(sides[name], CUDA)
                speed[name].append(n_texts / seconds)
        for name, values in speed.items():
            print(f"| {batch} | {name} | {statistics.median(values):.0f} | {difference[name]:.2e} |")


def audio(n_clips: int, batch: int, rounds: int) -> None:
    from oml_audio import ECAPATDNNExtractor

    torch.manual_seed(0)
    model = ECAPATDNNExtractor(weights=None, arch="ecapa_tdnn_taoruijie").eval()
    waveforms = torch.randn(n_clips, 1, 3 * 16000, generator=torch.Generator().manual_seed(0)) * 0.1
    print(f"| device | mode | clips/s (median of {rounds}) | max abs difference from CPU fp32 |")
    print("|---|---|---|---|")
    with torch.no_grad():
        reference = torch.cat([model(b) for b in waveforms[:batch].split(batch)])
        for device, modes in ((torch.device("cpu"), ("fp32",)), (CUDA, ("fp32", "bf16 autocast"))):
            model.to(device)
            for mode in modes:

                def embed(device: torch.device = device, mode: str = mode) -> torch.Tensor:
                    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=mode != "fp32"):
                        return torch.cat([model(b.to(device)).float().cpu() for b in waveforms.split(batch)])

                first = embed()
                rates = [
                    n_clips / timed(embed, device)[1] for _ in range(rounds if device.type == "cuda" else 1)
                ]
                diff = float((first[:batch] - reference).abs().max())
                print(f"| {device.type} | {mode} | {statistics.median(rates):.0f} | {diff:.2e} |")


def farthest(embeddings: torch.Tensor, reference: torch.Tensor) -> float:
    """The largest relative L2 distance of a row of ``embeddings`` from the same row of ``reference``."""
    return float(((embeddings.cpu() - reference).norm(dim=1) / reference.norm(dim=1)).max())


def index_build(sizes: list[int], rounds: int) -> None:
    import tempfile

    from oml_core.config.compose import compose_config
    from oml_core.index.build import INDEX_BUILD, build_gallery_index
    from oml_core.inference import inference
    from oml_core.registry import Registry

    print(
        f"| im_size | device | build s (median of {rounds}) | items | max relative L2 from the CPU's embeddings "
        "| the same with TF32 convolutions | threshold |"
    )
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            seconds: dict[str, list[float]] = {"cpu": [], "gpu": []}
            built = {}
            for r in range(rounds):
                for accelerator in ("cpu", "gpu") if r % 2 == 0 else ("gpu", "cpu"):
                    registry = Registry()
                    overrides = [
                        f"index_dir={Path(tmp) / f'{size}_{accelerator}_{r}'}",
                        f"accelerator={accelerator}",
                        f"transforms.args.im_size={size}",
                    ]
                    cfg = compose_config(INDEX_BUILD, overrides, registry=registry)
                    result, elapsed = timed(partial(build_gallery_index, cfg, registry), CUDA)
                    seconds[accelerator].append(elapsed)
                    built[accelerator] = result.index
            reference = built["cpu"].embeddings
            gpu_index = built["gpu"]
            with torch.no_grad():  # torch's default: cuDNN convolutions in TF32
                tf32 = inference(
                    gpu_index.extractor.to(CUDA), gpu_index.data.gallery_dataset("all"), batch_size=64
                )

            for accelerator, index in built.items():
                threshold = index.calibration.threshold if index.calibration else float("nan")
                with_tf32 = f"{farthest(tf32, reference):.1e}" if accelerator == "gpu" else ""
                print(
                    f"| {size} | {accelerator} | {statistics.median(seconds[accelerator]):.2f} | {len(index)} | "
                    f"{farthest(index.embeddings, reference):.1e} | {with_tf32} | {threshold:.6f} |"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["retrieval", "fnmr", "texts", "audio", "index"])
    parser.add_argument("--n", type=int, nargs="+", default=[100000, 300000], help="retrieval sizes")
    parser.add_argument("--fnmr-n", type=int, nargs="+", default=[30000], help="fnmr sizes")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--threads", type=int, default=16, help="CPU threads of the CPU side")
    parser.add_argument(
        "--minilm-config", type=Path, help="folder with all-MiniLM-L6-v2's config and tokenizer"
    )
    parser.add_argument("--texts", type=int, default=4096)
    parser.add_argument("--clips", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--index-sizes", type=int, nargs="+", default=[64, 224], help="im_size of the index part's pictures"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CPU threads {torch.get_num_threads()}")
    parts: dict[str, Callable[[], None]] = {
        "retrieval": lambda: retrieval(args.n, args.dim),
        "fnmr": lambda: fnmr(args.fnmr_n, args.dim),
        "texts": lambda: texts(args.minilm_config, args.texts, args.rounds),
        "audio": lambda: audio(args.clips, 64, args.rounds),
        "index": lambda: index_build(args.index_sizes, args.rounds),
    }
    failed = []
    for name in args.parts:
        print(f"\n## {name}\n", flush=True)
        started = time.perf_counter()
        try:
            parts[name]()
        except Exception:  # a benchmark part that fails is reported with its traceback and counted
            traceback.print_exc()
            failed.append(name)
        print(f"({name}: {time.perf_counter() - started:.0f} s)", flush=True)
    if failed:
        sys.exit(f"failed parts: {failed}")


if __name__ == "__main__":
    main()
