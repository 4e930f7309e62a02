"""The mock audio dataset, generated in code from a seeded generator (nothing is downloaded).

8 labels of synthetic 1-second clips, 6 clips each (48 WAV files, 16-bit PCM): labels 0..3 are
``split == "train"`` (4 training labels, as OML's mock audio has: its README's ArcFace takes ``num_classes=4``),
4..7 ``split == "validation"`` (every validation row a query and a gallery item). A label's
kind, its ``category``, is ``label % 3``:

- ``tone``: a sine of ``220 * 2^(label / 4)`` Hz with its second harmonic at half amplitude;
- ``chirp``: a linear sweep from ``300 + 150 label`` Hz to three times that;
- ``noise``: white noise bursts (25 ms rise and fall) at ``3 + label / 2`` bursts a second.

Each clip varies: frequencies by up to 3 %, the phase, the amplitude (0.3 to 0.7), a little white noise
(1 % of full scale), the sample rate (16 000 or 22 050 Hz) and the channels (mono, or stereo with the channels at
different gains, so that the datasets down-mix and resample). Its ``start_time`` is 0 to 0.25 s.

Files under the root, named as OML's mock audio names them (``voices/voice0_0.wav``, the clip that OML's zoo
example opens)::

    voices/voice<label>_<k>.wav   k = 0..5, the clips of a label (voice0_0.wav ... voice7_5.wav)
    df.csv                        label, path, split, is_query, is_gallery, category, start_time
    df_with_start_times.csv       the same table, under the name OML reads the start times from
    manifest.json                 version, seed and the md5 of every file; written last (the completion marker)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import soundfile

from oml_audio.waveform import START_TIME_COLUMN
from oml_core.caches.folder import get_cache_dir
from oml_core.const import (
    CATEGORIES_COLUMN,
    IS_GALLERY_COLUMN,
    IS_QUERY_COLUMN,
    LABELS_COLUMN,
    MOCK_AUDIO_DATASET_NAME,
    MOCK_AUDIO_DATASET_VERSION,
    MOCK_DATASET_DEFAULT_CSV,
    PATHS_COLUMN,
    SPLIT_COLUMN,
    mock_audio_dataset_dirname,
)
from oml_core.datasets.generated import GeneratedDataset

#: The name and version of the mock audio dataset: the core's constants, next to OML's ``MOCK_AUDIO_DATASET_PATH``
#: (the folder of seed 0, :func:`get_mock_audios_path`), which OML's zoo example reads.
MOCK_AUDIOS_NAME = MOCK_AUDIO_DATASET_NAME
MOCK_AUDIOS_VERSION = MOCK_AUDIO_DATASET_VERSION
#: The tables, all of one content: OML's default name and the one OML reads the start times from.
MOCK_AUDIOS_TABLES = (MOCK_DATASET_DEFAULT_CSV, "df_with_start_times.csv")
MOCK_N_LABELS = 8
MOCK_N_TRAIN_LABELS = 4
MOCK_N_CLIPS_PER_LABEL = 6
MOCK_CLIP_SECONDS = 1.0
MOCK_KINDS = ("tone", "chirp", "noise")
MOCK_SAMPLE_RATES = (16_000, 22_050)


def get_mock_audios_path(cache_dir: Path | str | None = None, seed: int = 0) -> Path:
    """``<cache>/mock_audios_v<version>_seed<seed>`` (``cache_dir``, else oml's cache folder); nothing is created."""
    cache = Path(cache_dir).expanduser() if cache_dir is not None else get_cache_dir()
    return cache / mock_audio_dataset_dirname(seed)


def synthesize_clip(rng: np.random.Generator, label: int, sample_rate: int) -> np.ndarray:
    """One mono clip of ``label`` (see the module's docstring), ``[samples]`` float64 in ``(-1, 1)``."""
    t = np.arange(int(MOCK_CLIP_SECONDS * sample_rate)) / sample_rate
    jitter = 1 + rng.uniform(-0.03, 0.03)
    phase = rng.uniform(0, 2 * np.pi)
    kind = MOCK_KINDS[label % len(MOCK_KINDS)]
    if kind == "tone":
        f = 220.0 * 2 ** (label / 4) * jitter
        clip = np.sin(2 * np.pi * f * t + phase) + 0.5 * np.sin(4 * np.pi * f * t + phase)
    elif kind == "chirp":
        f0 = (300.0 + 150.0 * label) * jitter
        rate = 2 * f0 / MOCK_CLIP_SECONDS  # Hz per second: from f0 to 3 f0
        clip = np.sin(2 * np.pi * (f0 * t + rate * t**2 / 2) + phase)
    else:
        bursts_per_second = (3 + label / 2) * jitter
        cycle = (t * bursts_per_second + phase / (2 * np.pi)) % 1.0
        on = cycle < 0.5
        ramp = np.clip(np.minimum(cycle, 0.5 - cycle) * (1 / bursts_per_second) / 0.025, 0, 1)
        clip = rng.normal(0, 0.35, len(t)) * on * ramp
    clip = clip / max(np.abs(clip).max(), 1e-9) * rng.uniform(0.3, 0.7)
    return np.clip(clip + rng.normal(0, 0.01, len(t)), -0.99, 0.99)


def _write(root: Path, seed: int) -> list[str]:
    """Write the clips and the table of the mock audio dataset of ``seed`` into ``root`` and return their names
    (the manifest is :data:`MOCK_AUDIOS`'s); the same seed gives byte-identical files."""
    (root / "voices").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    rows = []
    for label in range(MOCK_N_LABELS):
        validation = label >= MOCK_N_TRAIN_LABELS
        for k in range(MOCK_N_CLIPS_PER_LABEL):
            sample_rate = MOCK_SAMPLE_RATES[k % len(MOCK_SAMPLE_RATES)]
            clip = synthesize_clip(rng, label, sample_rate)
            if k % 3 == 2:  # stereo: the same clip at two gains
                clip = np.stack([clip, clip * rng.uniform(0.5, 1.0)], axis=1)
            path = f"voices/voice{label}_{k}.wav"
            soundfile.write(root / path, clip, sample_rate, subtype="PCM_16")
            rows.append(
                {
                    LABELS_COLUMN: label,
                    PATHS_COLUMN: path,
                    SPLIT_COLUMN: "validation" if validation else "train",
                    IS_QUERY_COLUMN: True if validation else None,
                    IS_GALLERY_COLUMN: True if validation else None,
                    CATEGORIES_COLUMN: MOCK_KINDS[label % len(MOCK_KINDS)],
                    START_TIME_COLUMN: round(float(rng.uniform(0, 0.25)), 3),
                }
            )
    for table in MOCK_AUDIOS_TABLES:
        pd.DataFrame(rows).to_csv(root / table, index=False, lineterminator="\n")
    return [*MOCK_AUDIOS_TABLES, *(row[PATHS_COLUMN] for row in rows)]


#: The mock audio dataset as a generated dataset (its manifest, completeness and atomic materialisation).
MOCK_AUDIOS = GeneratedDataset(
    name=MOCK_AUDIOS_NAME,
    version=MOCK_AUDIOS_VERSION,
    tables=MOCK_AUDIOS_TABLES,
    write=_write,
    description="the mock audio dataset",
)


def get_mock_audios_dataset(
    dataset_root: Path | str | None = None,
    df_name: str = MOCK_DATASET_DEFAULT_CSV,
    check_md5: bool = True,
    global_paths: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """OML's function of the mock audio dataset: generated (seed 0) into ``dataset_root`` when it is absent,
    incomplete or (with ``check_md5``) differs from its manifest; nothing is downloaded.

    Args:
        dataset_root: The folder of the dataset; None: OML's ``MOCK_AUDIO_DATASET_PATH``,
            :func:`get_mock_audios_path` in oml's cache.
        df_name: The table to read: ``df.csv`` or ``df_with_start_times.csv`` (the same content).
        check_md5: Check every file against the manifest's md5 (regenerate on a mismatch).
        global_paths: Make the ``path`` column absolute (joined to ``dataset_root``).

    Returns:
        ``(df_train, df_val)``: the ``split == "train"`` and ``split == "validation"`` rows, each with a fresh
        index; ``df_val``'s ``is_query`` and ``is_gallery`` are bool columns.

    Raises:
        ValueError: another ``df_name``.
    """
    root = Path(dataset_root) if dataset_root is not None else get_mock_audios_path()
    return MOCK_AUDIOS.load_splits(root, 0, check_md5, df_name, global_paths)


__all__ = [
    "MOCK_AUDIOS",
    "MOCK_AUDIOS_NAME",
    "MOCK_AUDIOS_TABLES",
    "MOCK_AUDIOS_VERSION",
    "MOCK_KINDS",
    "get_mock_audios_dataset",
    "get_mock_audios_path",
    "synthesize_clip",
]
