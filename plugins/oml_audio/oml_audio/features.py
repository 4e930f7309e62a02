"""Mel filterbank features in torch (no torchaudio): pre-emphasis, the power spectrogram and the HTK mel scale.

The modules keep their constants as buffers under the names torchaudio's ``MelSpectrogram`` uses
(``spectrogram.window``, ``mel_scale.fb``), so that a state dict of a model built on torchaudio (ECAPA-TDNN's)
loads into them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def hz_to_mel(hz: Tensor) -> Tensor:
    """The HTK mel scale: ``mel = 2595 log10(1 + hz / 700)``."""
    return 2595.0 * torch.log10(1.0 + hz / 700.0)


def mel_to_hz(mel: Tensor) -> Tensor:
    """The inverse of :func:`hz_to_mel`: ``hz = 700 (10^(mel / 2595) - 1)``."""
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


def mel_filterbank(n_freqs: int, f_min: float, f_max: float, n_mels: int, sample_rate: int) -> Tensor:
    """Triangular filters on the HTK mel scale, unnormalised, ``[n_freqs, n_mels]``.

    The ``n_mels + 2`` edges ``f_0 < ... < f_{n_mels+1}`` are equally spaced in mel between ``f_min`` and
    ``f_max``; filter ``m`` at the frequency ``f`` (the ``n_freqs`` bins ``0 .. sample_rate / 2``) is
    ``max(0, min((f - f_m) / (f_{m+1} - f_m), (f_{m+2} - f) / (f_{m+2} - f_{m+1})))``.
    """
    freqs = torch.linspace(0, sample_rate // 2, n_freqs, dtype=torch.float64)
    edges = mel_to_hz(
        torch.linspace(
            hz_to_mel(torch.tensor(float(f_min))).item(),
            hz_to_mel(torch.tensor(float(f_max))).item(),
            n_mels + 2,
            dtype=torch.float64,
        )
    )
    lower, centre, upper = edges[:-2], edges[1:-1], edges[2:]
    rising = (freqs[:, None] - lower) / (centre - lower)
    falling = (upper - freqs[:, None]) / (upper - centre)
    return torch.clamp(torch.minimum(rising, falling), min=0.0).float()


class PreEmphasis(nn.Module):
    """``y[t] = x[t] - coef x[t - 1]`` on ``[B, samples]``, with ``x[-1] = x[1]`` (reflection)."""

    def __init__(self, coef: float = 0.97) -> None:
        super().__init__()
        self.coef = coef
        self.register_buffer("flipped_filter", torch.tensor([[[-coef, 1.0]]]))

    def forward(self, x: Tensor) -> Tensor:
        """``[B, samples]`` -> ``[B, samples]``."""
        x = F.pad(x.unsqueeze(1), (1, 0), mode="reflect")
        return F.conv1d(x, self.flipped_filter).squeeze(1)


class PowerSpectrogram(nn.Module):
    """``|STFT|^2`` of ``[B, samples]``: frames of ``n_fft`` every ``hop_length`` samples, centred (the signal
    reflected by ``n_fft // 2`` at both ends), windowed by a periodic Hamming window of ``win_length`` placed in
    the middle of the frame; ``[B, n_fft // 2 + 1, 1 + samples // hop_length]``."""

    def __init__(self, n_fft: int, win_length: int, hop_length: int) -> None:
        super().__init__()
        self.n_fft = n_fft
        self.hop_length = hop_length
        self.register_buffer("window", torch.hamming_window(win_length))

    def forward(self, x: Tensor) -> Tensor:
        """``[B, samples]`` -> ``[B, n_fft // 2 + 1, frames]``."""
        spectrum = torch.stft(
            x,
            self.n_fft,
            hop_length=self.hop_length,
            win_length=self.window.shape[0],
            window=self.window,
            center=True,
            pad_mode="reflect",
            return_complex=True,
        )
        return spectrum.abs() ** 2


class MelScale(nn.Module):
    """A spectrogram ``[B, n_freqs, frames]`` summed through :func:`mel_filterbank`: ``[B, n_mels, frames]``."""

    def __init__(self, n_freqs: int, f_min: float, f_max: float, n_mels: int, sample_rate: int) -> None:
        super().__init__()
        self.register_buffer("fb", mel_filterbank(n_freqs, f_min, f_max, n_mels, sample_rate))

    def forward(self, spectrogram: Tensor) -> Tensor:
        """``[B, n_freqs, frames]`` -> ``[B, n_mels, frames]``."""
        return torch.matmul(spectrogram.transpose(-1, -2), self.fb).transpose(-1, -2)


class MelSpectrogram(nn.Module):
    """The mel power spectrogram: :class:`PowerSpectrogram` then :class:`MelScale` (``f_max`` None: Nyquist)."""

    def __init__(
        self,
        sample_rate: int = 16_000,
        n_fft: int = 512,
        win_length: int = 400,
        hop_length: int = 160,
        f_min: float = 20.0,
        f_max: float | None = 7600.0,
        n_mels: int = 80,
    ) -> None:
        super().__init__()
        self.spectrogram = PowerSpectrogram(n_fft, win_length, hop_length)
        top = sample_rate / 2 if f_max is None else f_max
        self.mel_scale = MelScale(n_fft // 2 + 1, f_min, top, n_mels, sample_rate)

    def forward(self, x: Tensor) -> Tensor:
        """``[B, samples]`` -> ``[B, n_mels, 1 + samples // hop_length]``."""
        return self.mel_scale(self.spectrogram(x))


def log_mel_spectrogram(audio: Tensor, sample_rate: int, n_mels: int = 64) -> Tensor:
    """``log(1 + mel)`` of a waveform ``[channels, samples]`` (channels averaged), ``[n_mels, frames]``: frames of
    ~64 ms every ~16 ms, filters from 0 Hz to Nyquist; what the audio datasets draw."""
    n_fft = 2 ** max(6, math.ceil(math.log2(0.064 * sample_rate)))
    hop = max(1, n_fft // 4)
    signal = audio.float().mean(dim=0, keepdim=True)
    if signal.shape[1] <= n_fft // 2:  # the centred frames reflect n_fft // 2 samples
        signal = F.pad(signal, (0, n_fft // 2 + 1 - signal.shape[1]))
    mel = MelSpectrogram(sample_rate, n_fft, n_fft, hop, 0.0, None, n_mels)(signal)
    return torch.log1p(mel[0])


__all__ = [
    "MelScale",
    "MelSpectrogram",
    "PowerSpectrogram",
    "PreEmphasis",
    "hz_to_mel",
    "log_mel_spectrogram",
    "mel_filterbank",
    "mel_to_hz",
]
