"""Audio items as pictures: a log-mel spectrogram thumbnail in a coloured frame (the worst-query plots) and, for
``RetrievalResults.visualize_as_html``, the same picture with an audio player (OML's ``oml.utils.audios``)."""

from __future__ import annotations

import base64
import io

import numpy as np
import soundfile
from PIL import Image
from torch import Tensor

from oml_audio.features import log_mel_spectrogram
from oml_audio.waveform import DEFAULT_SAMPLE_RATE
from oml_core.const import BLACK, TColor
from oml_core.retrieval.retrieval_results import framed_block_html, image_to_png_base64

#: The side of a thumbnail and the width of its frame (pixels).
THUMBNAIL_SIZE = 128
FRAME_WIDTH = 4
#: The colour map of the spectrograms: RGB anchors from low to high values, linearly interpolated.
COLORMAP_ANCHORS = np.array(
    [[0, 0, 4], [59, 15, 112], [140, 41, 129], [222, 73, 104], [254, 159, 109], [252, 253, 191]],
    dtype=np.float64,
)


def default_spec_repr_func(audio: Tensor) -> Tensor:
    """OML's default picture of a waveform ``[channels, samples]`` at 16 kHz: ``log(1 + mel)``, ``[n_mels,
    frames]`` (:func:`~oml_audio.features.log_mel_spectrogram`)."""
    return log_mel_spectrogram(audio, DEFAULT_SAMPLE_RATE)


def spectrogram_image(spec_repr: Tensor) -> np.ndarray:
    """``spec_repr`` ``[bins, frames]`` scaled to ``[0, 1]`` by its range, coloured by :data:`COLORMAP_ANCHORS`,
    low bins at the bottom: ``[bins, frames, 3]`` uint8."""
    values = spec_repr.detach().float().cpu().numpy()
    low, high = float(values.min()), float(values.max())
    scaled = (values - low) / (high - low) if high > low else np.zeros_like(values)
    position = scaled[::-1] * (len(COLORMAP_ANCHORS) - 1)
    below = np.clip(np.floor(position).astype(int), 0, len(COLORMAP_ANCHORS) - 2)
    fraction = (position - below)[..., None]
    rgb = COLORMAP_ANCHORS[below] * (1 - fraction) + COLORMAP_ANCHORS[below + 1] * fraction
    return np.round(rgb).astype(np.uint8)


def visualize_audio(spec_repr: Tensor, color: TColor = BLACK, draw_bbox: bool = True) -> np.ndarray:
    """The spectrogram ``spec_repr`` as a :data:`THUMBNAIL_SIZE`-square ``HxWx3`` uint8 picture, framed in
    ``color`` (:data:`FRAME_WIDTH` pixels) when ``draw_bbox``."""
    picture = Image.fromarray(spectrogram_image(spec_repr)).resize(
        (THUMBNAIL_SIZE, THUMBNAIL_SIZE), Image.Resampling.BILINEAR
    )
    pixels = np.array(picture, dtype=np.uint8)
    if draw_bbox:
        frame = np.asarray(color, dtype=np.uint8)
        pixels[:FRAME_WIDTH], pixels[-FRAME_WIDTH:] = frame, frame
        pixels[:, :FRAME_WIDTH], pixels[:, -FRAME_WIDTH:] = frame, frame
    return pixels


def wav_bytes(audio: Tensor, sample_rate: int) -> bytes:
    """The waveform ``[channels, samples]`` as a 16-bit PCM WAV file."""
    buffer = io.BytesIO()
    soundfile.write(buffer, audio.detach().cpu().numpy().T, sample_rate, format="WAV", subtype="PCM_16")
    return buffer.getvalue()


def visualize_audio_with_player(
    audio: Tensor,
    spec_repr: Tensor,
    sample_rate: int,
    title: str = "",
    color: TColor = BLACK,
    draw_bbox: bool = True,
) -> str:
    """An HTML block: ``title``, the picture of :func:`visualize_audio` and an ``<audio>`` player of ``audio``,
    both embedded as base64 (PNG and 16-bit WAV), framed in ``color`` as the image blocks of
    ``RetrievalResults.visualize_as_html`` are (:func:`~oml_core.retrieval.retrieval_results.framed_block_html`)."""
    image = image_to_png_base64(visualize_audio(spec_repr, color, draw_bbox))
    sound = base64.b64encode(wav_bytes(audio, sample_rate)).decode("ascii")
    inner = (
        f'<img src="data:image/png;base64,{image}" style="width: {THUMBNAIL_SIZE}px; '
        f'height: {THUMBNAIL_SIZE}px;" alt="log-mel spectrogram"/>'
        '<audio controls style="display: block; width: 100%; margin-top: 3px;">'
        f'<source src="data:audio/wav;base64,{sound}" type="audio/wav"></audio>'
    )
    return f'<div style="margin: 10px; display: inline-block;">{framed_block_html(inner, color, title)}</div>'


__all__ = [
    "COLORMAP_ANCHORS",
    "FRAME_WIDTH",
    "THUMBNAIL_SIZE",
    "default_spec_repr_func",
    "spectrogram_image",
    "visualize_audio",
    "visualize_audio_with_player",
    "wav_bytes",
]
