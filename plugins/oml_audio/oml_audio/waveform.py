"""Waveforms: reading audio files with soundfile (libsndfile), down-mixing, polyphase resampling and fixed-length
crops, the steps of :class:`~oml_audio.datasets.AudioBaseDataset` in their order.

A waveform is a float32 tensor ``[channels, samples]``.
"""

from __future__ import annotations

from math import gcd
from pathlib import Path

import numpy as np
import soundfile
import torch
from scipy.signal import resample_poly
from torch import Tensor

# OML's audio constants (``oml.const``), kept in the core's const: file suffixes, the dataframe column of the
# start times, the length of a crop in seconds, the sample rate the datasets resample to, whether they down-mix
from oml_core.const import (
    AUDIO_EXTENSIONS,
    DEFAULT_CONVERT_TO_MONO,
    DEFAULT_SAMPLE_RATE,
    MAX_AUDIO_LEN,
    START_TIME_COLUMN,
)


class AudioReadError(OSError):
    """A file that libsndfile cannot read as audio (not audio, truncated, a header with a sample rate of 0), or
    whose samples are not all finite numbers (a float WAV can hold NaN and infinities)."""


#: libsndfile's sample formats of floating point numbers: the only ones that can hold NaN or an infinity.
FLOAT_SUBTYPES = frozenset({"FLOAT", "DOUBLE"})


def read_audio(path: str | Path) -> tuple[Tensor, int]:
    """The samples of the audio file ``path`` as float32 ``[channels, samples]`` (integer PCM scaled to
    ``[-1, 1)``) and its sample rate.

    Raises:
        AudioReadError: libsndfile cannot read the file, or a sample is NaN or infinite; the message names the
            file and says why (for NaN or infinite samples: how many, and the time and channel of the first).
    """
    try:
        samples, sample_rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as e:
        raise AudioReadError(f"'{path}' cannot be read as audio: {e}") from e
    not_finite = ~np.isfinite(samples)
    if not_finite.any():
        frame, channel = np.argwhere(not_finite)[0].tolist()
        raise AudioReadError(
            f"'{path}' has {int(not_finite.sum())} NaN or infinite samples, the first at "
            f"{frame / sample_rate:.3f} s (sample {frame}, channel {channel})"
        )
    return torch.from_numpy(np.ascontiguousarray(samples.T)), int(sample_rate)


def downmix(audio: Tensor) -> Tensor:
    """The mean of the channels, ``[1, samples]``: ``out[0, t] = (1 / C) sum_c audio[c, t]``."""
    return audio.mean(dim=0, keepdim=True)


def resample(audio: Tensor, sample_rate: int, target_rate: int) -> Tensor:
    """``audio`` at ``sample_rate`` resampled to ``target_rate`` with a polyphase filter
    (``scipy.signal.resample_poly``, up by ``target_rate / g`` and down by ``sample_rate / g``, ``g`` their gcd;
    its default Kaiser window, beta 5): ``ceil(samples * target_rate / sample_rate)`` samples. The same
    rate returns ``audio`` itself.

    Raises:
        ValueError: a rate that is not positive.
    """
    if sample_rate <= 0 or target_rate <= 0:
        raise ValueError(f"sample rates must be positive, got {sample_rate} and {target_rate}")
    if sample_rate == target_rate:
        return audio
    divisor = gcd(sample_rate, target_rate)
    out = resample_poly(audio.numpy(), target_rate // divisor, sample_rate // divisor, axis=-1)
    return torch.from_numpy(np.ascontiguousarray(out, dtype=np.float32))


def frame_offset(start_time: float, sample_rate: int) -> int:
    """The sample at ``start_time`` seconds: ``int(start_time * sample_rate)`` (OML's rounding, towards 0)."""
    return int(start_time * sample_rate)


def trim_or_pad(audio: Tensor, offset: int, num_frames: int) -> Tensor:
    """``num_frames`` samples of ``audio`` from the sample ``offset``: ``audio[:, offset:offset + num_frames]``,
    zero-padded in front to ``num_frames`` when the audio ends earlier (OML pads on that side).

    Raises:
        ValueError: ``offset`` is not inside the audio (``0 <= offset < samples``).
    """
    if not 0 <= offset < audio.shape[1]:
        raise ValueError(f"the frame offset {offset} is not inside the audio of {audio.shape[1]} samples")
    segment = audio[:, offset : offset + num_frames]
    return torch.nn.functional.pad(segment, (num_frames - segment.shape[1], 0))


__all__ = [
    "AUDIO_EXTENSIONS",
    "AudioReadError",
    "DEFAULT_CONVERT_TO_MONO",
    "DEFAULT_SAMPLE_RATE",
    "FLOAT_SUBTYPES",
    "MAX_AUDIO_LEN",
    "START_TIME_COLUMN",
    "downmix",
    "frame_offset",
    "read_audio",
    "resample",
    "trim_or_pad",
]
