"""Benchmark: clips per second of the audio pipeline of ``oml-audio`` on CPU, stage by stage.

The clips are the mock audio dataset's 48 one-second files (16 and 22.05 kHz, mono and stereo, 16-bit WAV),
generated into a temporary folder. Each round times, in turn (interleaved, so that a drift of the machine's speed
moves all of them):

- **read**: ``AudioBaseDataset[i]`` for every clip: soundfile reading, down-mix, polyphase resampling to 16 kHz,
  the crop of ``--seconds`` from the clip's ``start_time`` (zero-padded in front);
- **features**: the log mel filterbank of ECAPA-TDNN (pre-emphasis, 512-point STFT, 80 mels) on batches of
  ``--batch`` of those waveforms;
- **model**: ``ECAPATDNNExtractor`` (the released architecture, C = 1024, random weights, eval mode,
  ``torch.no_grad``) on the same batches, features included;
- **pipeline**: read + model, what ``oml predict`` does per clip (without Lightning's own overhead).

The table gives the median over ``--repeat`` rounds of clips per second.

Usage (from the repository root)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/audio_throughput.py --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from oml_audio import AudioBaseDataset, ECAPATDNNExtractor, get_mock_audios_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="length of every item (s)")
    parser.add_argument("--batch", type=int, default=24)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        df_train, df_val = get_mock_audios_dataset(Path(folder), global_paths=True)
        paths = [*df_train["path"], *df_val["path"]]
        starts = [*df_train["start_time"], *df_val["start_time"]]
        dataset = AudioBaseDataset(paths, max_num_seconds=args.seconds, start_times=starts)
        torch.manual_seed(0)
        model = ECAPATDNNExtractor(weights=None, arch="ecapa_tdnn_taoruijie").eval()
        waveforms = torch.stack([dataset[i]["input_tensors"] for i in range(len(dataset))])
        batches = list(torch.split(waveforms, args.batch))

        def read() -> None:
            for i in range(len(dataset)):
                dataset[i]

        def features() -> None:
            with torch.no_grad():
                for batch in batches:
                    model.model.features(batch.squeeze(1))

        def embed() -> None:
            with torch.no_grad():
                for batch in batches:
                    model(batch)

        def pipeline() -> None:
            read()
            embed()

        stages: dict[str, Callable[[], None]] = {
            "read": read,
            "features": features,
            "model": embed,
            "pipeline": pipeline,
        }
        seconds: dict[str, list[float]] = {name: [] for name in stages}
        for _ in range(args.repeat):
            for name, stage in stages.items():
                started = time.perf_counter()
                stage()
                seconds[name].append(time.perf_counter() - started)

    print(
        f"{len(paths)} clips of {args.seconds:g} s, batches of {args.batch}, torch threads {torch.get_num_threads()}"
    )
    print("| stage | clips/s (median) | clips/s (all rounds) |")
    print("|---|---|---|")
    for name, times in seconds.items():
        rates = [len(paths) / t for t in times]
        print(f"| {name} | {statistics.median(rates):.1f} | {', '.join(f'{r:.1f}' for r in rates)} |")


if __name__ == "__main__":
    main()
