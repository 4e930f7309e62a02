"""The mock audio dataset, generated in code from a seeded generator (nothing is downloaded).

12 labels of synthetic 1-second clips, 6 clips each (72 WAV files, 16-bit PCM): labels 0..7 are
``split == "train"``, 8..11 ``split == "validation"`` (every validation row a query and a gallery item). A label's
kind, its ``category``, is ``label % 3``:

- ``tone``: a sine of ``220 * 2^(label / 4)`` Hz with its second harmonic at half amplitude;
- ``chirp``: a linear sweep from ``300 + 150 label`` Hz to three times that;
- ``noise``: white noise bursts (25 ms rise and fall) at ``3 + label / 2`` bursts a second.

Each clip varies: frequencies by up to 3 %, the phase, the amplitude (0.3 to 0.7), a little white noise
(1 % of full scale), the sample rate (16 000 or 22 050 Hz) and the channels (mono, or stereo with the channels at
different gains, so that the datasets down-mix and resample). Its ``start_time`` is 0 to 0.25 s.

Files under the root::

    audios/000000.wav ... audios/000071.wav
    df.csv           label, path, split, is_query, is_gallery, category, start_time
    manifest.json    version, seed and the md5 of every file; written last (the completion marker)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import soundfile

from oml_audio.waveform import START_TIME_COLUMN
from oml_core.const import (
    CATEGORIES_COLUMN,
    IS_GALLERY_COLUMN,
    IS_QUERY_COLUMN,
    LABELS_COLUMN,
    MOCK_DATASET_DEFAULT_CSV,
    PATHS_COLUMN,
    SPLIT_COLUMN,
)
from oml_core.utils.cache import get_cache_dir

MOCK_AUDIOS_NAME = "mock_audios"
MOCK_AUDIOS_VERSION = 1
MOCK_N_LABELS = 12
MOCK_N_TRAIN_LABELS = 8
MOCK_N_CLIPS_PER_LABEL = 6
MOCK_CLIP_SECONDS = 1.0
MOCK_KINDS = ("tone", "chirp", "noise")
MOCK_SAMPLE_RATES = (16_000, 22_050)
MANIFEST_NAME = "manifest.json"


def get_mock_audios_path(cache_dir: Path | str | None = None, seed: int = 0) -> Path:
    """``<cache>/mock_audios_v<version>_seed<seed>`` (``cache_dir``, else oml's cache folder); nothing is created."""
    cache = Path(cache_dir).expanduser() if cache_dir is not None else get_cache_dir()
    return cache / f"{MOCK_AUDIOS_NAME}_v{MOCK_AUDIOS_VERSION}_seed{int(seed)}"


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


def generate_mock_audios(root: Path | str, seed: int = 0) -> None:
    """Write the mock audio dataset of ``seed`` into ``root`` (created if needed), the manifest last; the same
    seed gives byte-identical files."""
    root = Path(root)
    (root / "audios").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    rows = []
    for label in range(MOCK_N_LABELS):
        validation = label >= MOCK_N_TRAIN_LABELS
        for k in range(MOCK_N_CLIPS_PER_LABEL):
            sample_rate = MOCK_SAMPLE_RATES[k % len(MOCK_SAMPLE_RATES)]
            clip = synthesize_clip(rng, label, sample_rate)
            if k % 3 == 2:  # stereo: the same clip at two gains
                clip = np.stack([clip, clip * rng.uniform(0.5, 1.0)], axis=1)
            path = f"audios/{len(rows):06d}.wav"
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
    pd.DataFrame(rows).to_csv(root / MOCK_DATASET_DEFAULT_CSV, index=False, lineterminator="\n")
    files = [MOCK_DATASET_DEFAULT_CSV, *(row[PATHS_COLUMN] for row in rows)]
    manifest = {
        "name": MOCK_AUDIOS_NAME,
        "version": MOCK_AUDIOS_VERSION,
        "seed": int(seed),
        "files": {name: _md5(root / name) for name in files},
    }
    tmp_manifest = root / f".{MANIFEST_NAME}.tmp"
    tmp_manifest.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    os.replace(tmp_manifest, root / MANIFEST_NAME)


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _is_complete(root: Path, seed: int, check_md5: bool) -> bool:
    """Whether ``root`` holds the complete dataset of ``seed`` (every file of its manifest, of its md5 when
    ``check_md5``)."""
    try:
        manifest = json.loads((root / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(manifest, dict) or (manifest.get("version"), manifest.get("seed")) != (
        MOCK_AUDIOS_VERSION,
        seed,
    ):
        return False
    files = manifest.get("files") or {}
    return all(
        (root / name).is_file() and (not check_md5 or _md5(root / name) == md5) for name, md5 in files.items()
    )


def materialise_mock_audios(root: Path, seed: int = 0, check_md5: bool = False) -> Path:
    """Make ``root`` hold the complete dataset of ``seed`` and return it: nothing to do when it does; else it is
    generated in a temporary folder next to ``root`` and renamed into place (atomic when ``root`` is absent or
    empty; a concurrent process that finished first wins), or, into a folder with other content, written there
    with its manifest last."""
    if _is_complete(root, seed, check_md5):
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.tmp-", dir=root.parent))
    try:
        generate_mock_audios(tmp, seed)
        try:
            os.rename(tmp, root)
        except OSError:
            if not _is_complete(root, seed, check_md5):
                (root / MANIFEST_NAME).unlink(missing_ok=True)
                generate_mock_audios(root, seed)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


def get_mock_audios_dataset(
    dataset_root: Path | str | None = None,
    df_name: str = MOCK_DATASET_DEFAULT_CSV,
    check_md5: bool = True,
    global_paths: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """OML's function of the mock audio dataset: generated (seed 0) into ``dataset_root`` when it is absent,
    incomplete or (with ``check_md5``) differs from its manifest; nothing is downloaded.

    Args:
        dataset_root: The folder of the dataset; None: :func:`get_mock_audios_path` in oml's cache.
        df_name: The table to read (``df.csv``, the only one).
        check_md5: Check every file against the manifest's md5 (regenerate on a mismatch).
        global_paths: Make the ``path`` column absolute (joined to ``dataset_root``).

    Returns:
        ``(df_train, df_val)``: the ``split == "train"`` and ``split == "validation"`` rows, each with a fresh
        index; ``df_val``'s ``is_query`` and ``is_gallery`` are bool columns.

    Raises:
        ValueError: another ``df_name``.
    """
    if df_name != MOCK_DATASET_DEFAULT_CSV:
        raise ValueError(
            f"unknown df_name {df_name!r}; the mock audio dataset has only {MOCK_DATASET_DEFAULT_CSV!r}"
        )
    root = Path(dataset_root) if dataset_root is not None else get_mock_audios_path()
    materialise_mock_audios(root, seed=0, check_md5=check_md5)
    df = pd.read_csv(root / df_name, index_col=False)
    if global_paths:
        df[PATHS_COLUMN] = [str(root / p) for p in df[PATHS_COLUMN]]
    df_train = df[df[SPLIT_COLUMN] == "train"].reset_index(drop=True)
    df_val = df[df[SPLIT_COLUMN] == "validation"].reset_index(drop=True)
    for column in (IS_QUERY_COLUMN, IS_GALLERY_COLUMN):
        df_val[column] = df_val[column].astype(bool)
    return df_train, df_val


__all__ = [
    "MOCK_AUDIOS_NAME",
    "MOCK_AUDIOS_VERSION",
    "MOCK_KINDS",
    "generate_mock_audios",
    "get_mock_audios_dataset",
    "get_mock_audios_path",
    "materialise_mock_audios",
    "synthesize_clip",
]
