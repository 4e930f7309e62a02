"""OML's audio datasets: ``AudioBaseDataset`` (a list of files) and, from a dataframe in OML's format (``path``,
``label``, ``is_query``, ``is_gallery``; ``start_time``, ``category``, ``sequence`` when present),
``AudioLabeledDataset``, ``AudioQueryGalleryDataset`` and ``AudioQueryGalleryLabeledDataset``.

An item's waveform: the file read with soundfile, down-mixed to mono (the mean of its channels) with
``convert_to_mono``, resampled to ``sample_rate`` (polyphase filter), then the ``max_num_seconds * sample_rate``
samples from its start time, zero-padded in front when the file ends earlier (:mod:`oml_audio.waveform`). A
dataset reads no file until an item is asked for.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from torch import Tensor

from oml_audio.visualisation import default_spec_repr_func, visualize_audio, visualize_audio_with_player
from oml_audio.waveform import (
    AUDIO_EXTENSIONS,
    DEFAULT_CONVERT_TO_MONO,
    DEFAULT_SAMPLE_RATE,
    MAX_AUDIO_LEN,
    START_TIME_COLUMN,
    downmix,
    frame_offset,
    read_audio,
    resample,
    trim_or_pad,
)
from oml_core.const import (
    BLACK,
    CATEGORIES_COLUMN,
    INDEX_KEY,
    INPUT_TENSORS_KEY,
    IS_GALLERY_COLUMN,
    IS_QUERY_COLUMN,
    LABELS_COLUMN,
    LABELS_KEY,
    PATHS_COLUMN,
    SEQUENCE_COLUMN,
    TColor,
)
from oml_core.datasets.dataframe_columns import LabelsColumn, QueryGalleryColumns
from oml_core.datasets.dataframe_format import format_rows
from oml_core.datasets.extra_data import add_extra_data, checked_extra_data
from oml_core.interfaces.datasets import (
    IBaseDataset,
    IHTMLVisualizableDataset,
    ILabeledDataset,
    IQueryGalleryDataset,
    IQueryGalleryLabeledDataset,
    IVisualizableDataset,
)

TSpecFunc = Callable[[Tensor], Tensor]


def parse_start_times(df: pd.DataFrame) -> list[float] | None:
    """The ``start_time`` column (seconds; empty cells are 0), or None without that column.

    Raises:
        ValueError: a value that is not a finite number >= 0, naming the rows.
    """
    if START_TIME_COLUMN not in df.columns:
        return None
    values = pd.to_numeric(df[START_TIME_COLUMN], errors="coerce")
    bad = (values.isna() & df[START_TIME_COLUMN].notna()) | ~np.isfinite(values.fillna(0)) | (values < 0)
    if bad.any():
        raise ValueError(
            f"column {START_TIME_COLUMN!r}: not a number of seconds >= 0 at "
            f"{format_rows(np.flatnonzero(bad.to_numpy()), df[START_TIME_COLUMN])}"
        )
    return values.fillna(0.0).astype(float).tolist()


class AudioBaseDataset(IBaseDataset, IVisualizableDataset, IHTMLVisualizableDataset):
    """Audio files as waveforms ``[channels, num_frames]`` (``[1, num_frames]`` with ``convert_to_mono``).

    Items: ``{input_tensors_key: waveform, index_key: item, **extra_data of the item}``.

    Args:
        paths: The audio files (``.mp3, .wav, .ogg, .flac``, any case).
        dataset_root: The folder the paths are relative to (None: as given).
        extra_data: Per-item records to put into the items (one value per path each).
        input_tensors_key: Key of the waveforms.
        index_key: Key of the items' indices.
        sample_rate: The rate every file is resampled to (Hz, > 0).
        max_num_seconds: Length of every waveform in seconds (> 0); None: the whole files (their lengths
            differ, so batching needs a collate function of one's own; a warning says so).
        convert_to_mono: Average the channels.
        start_times: Where each item starts in its file (seconds), or None (0 for all).
        spec_repr_func: The picture of a waveform (:meth:`visualize`): ``[channels, samples]`` -> ``[bins, frames]``.

    Raises:
        ValueError: a bad argument (naming it), or a path that is not an audio file by its suffix.
    """

    def __init__(
        self,
        paths: Sequence[str | Path],
        dataset_root: str | Path | None = None,
        extra_data: Mapping[str, Sequence[Any]] | None = None,
        input_tensors_key: str = INPUT_TENSORS_KEY,
        index_key: str = INDEX_KEY,
        sample_rate: int = DEFAULT_SAMPLE_RATE,
        max_num_seconds: float | None = MAX_AUDIO_LEN,
        convert_to_mono: bool = DEFAULT_CONVERT_TO_MONO,
        start_times: Sequence[float] | None = None,
        spec_repr_func: TSpecFunc = default_spec_repr_func,
    ) -> None:
        if not isinstance(sample_rate, int) or isinstance(sample_rate, bool) or sample_rate <= 0:
            raise ValueError(f"sample_rate must be a positive integer (Hz), got {sample_rate!r}")
        if max_num_seconds is not None and not max_num_seconds > 0:
            raise ValueError(f"max_num_seconds must be None or > 0, got {max_num_seconds!r}")
        if not isinstance(convert_to_mono, bool):
            raise ValueError(f"convert_to_mono must be a bool, got {convert_to_mono!r}")
        if start_times is not None and len(start_times) != len(paths):
            raise ValueError(f"start_times has {len(start_times)} values for {len(paths)} paths")
        self._paths = [Path(p) if dataset_root is None else Path(dataset_root) / p for p in paths]
        not_audio = [str(p) for p in self._paths if p.suffix.lower() not in AUDIO_EXTENSIONS]
        if not_audio:
            raise ValueError(
                f"not an audio file ({', '.join(AUDIO_EXTENSIONS)}): {not_audio[:3]}"
                + (f" and {len(not_audio) - 3} more" if len(not_audio) > 3 else "")
            )
        reserved = (input_tensors_key, index_key)
        self.extra_data = checked_extra_data(
            extra_data, len(self._paths), reserved, type(self).__name__, "paths"
        )
        self.input_tensors_key = input_tensors_key
        self.index_key = index_key
        self.sample_rate = sample_rate
        self.convert_to_mono = convert_to_mono
        if max_num_seconds is None:
            warnings.warn(
                "max_num_seconds is None: the waveforms are not cropped or padded, their lengths differ and "
                "batching them needs a collate_fn of your own",
                stacklevel=2,
            )
        self.num_frames = None if max_num_seconds is None else int(max_num_seconds * sample_rate)
        self.start_times = (
            [0.0] * len(self._paths) if start_times is None else [float(t) for t in start_times]
        )
        self.spec_repr_func = spec_repr_func

    @property
    def paths(self) -> list[Path]:
        """The files of the items, joined to ``dataset_root``."""
        return list(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def get_audio(self, item: int) -> Tensor:
        """The waveform of ``item``: read, down-mixed, resampled, cropped or padded from its start time.

        Raises:
            AudioReadError: the file cannot be read as audio.
            ValueError: its start time is not inside the file.
        """
        path = self._paths[item]
        audio, rate = read_audio(path)
        if self.convert_to_mono and audio.shape[0] != 1:
            audio = downmix(audio)
        audio = resample(audio, rate, self.sample_rate)
        if self.num_frames is None:
            return audio
        offset = frame_offset(self.start_times[item], self.sample_rate)
        if offset >= audio.shape[1]:
            raise ValueError(
                f"'{path}': the start time {self.start_times[item]} s is past its end "
                f"({audio.shape[1] / self.sample_rate:.3f} s)"
            )
        return trim_or_pad(audio, offset, self.num_frames)

    def __getitem__(self, item: int) -> dict[str, Any]:
        """``{input_tensors_key: get_audio(item), index_key: item, **extra_data}``."""
        data: dict[str, Any] = {self.input_tensors_key: self.get_audio(item), self.index_key: item}
        return add_extra_data(data, self.extra_data, item)

    def visualize(self, item: int, color: TColor = BLACK) -> np.ndarray:
        """The spectrogram (``spec_repr_func``) of the item's waveform as a framed ``HxWx3`` uint8 thumbnail."""
        return visualize_audio(self.spec_repr_func(self.get_audio(item)), color=color)

    def visualize_as_html(self, item: int, title: str, color: TColor = BLACK) -> str:
        """The thumbnail of :meth:`visualize` with an audio player of the waveform, as an HTML block."""
        audio = self.get_audio(item)
        return visualize_audio_with_player(
            audio, self.spec_repr_func(audio), self.sample_rate, title=title, color=color
        )


class _DataFrameAudioDataset(AudioBaseDataset):
    """The items of a dataframe's rows: its ``path`` and ``start_time`` columns; ``category`` and ``sequence``
    put into the items' extra data (as OML does)."""

    def _init_from_df(
        self,
        df: pd.DataFrame,
        required: Sequence[str],
        extra_data: Mapping[str, Sequence[Any]] | None,
        **base_kwargs: Any,
    ) -> None:
        missing = [column for column in required if column not in df.columns]
        if missing:
            raise ValueError(f"{type(self).__name__}: the dataframe lacks the column(s) {missing}")
        self.df = df.reset_index(drop=True)
        extra = dict(extra_data or {})
        for column in (CATEGORIES_COLUMN, SEQUENCE_COLUMN):
            if column in self.df.columns:
                extra[column] = self.df[column].tolist()
        AudioBaseDataset.__init__(
            self,
            paths=[str(p) for p in self.df[PATHS_COLUMN]],
            extra_data=extra,
            start_times=parse_start_times(self.df),
            **base_kwargs,
        )


class AudioLabeledDataset(_DataFrameAudioDataset, LabelsColumn, ILabeledDataset):
    """The audios of a dataframe with their ground truth labels (columns ``label`` and ``path``).

    Items: those of :class:`AudioBaseDataset` plus ``labels_key`` (and ``category`` / ``sequence`` when the
    dataframe has those columns).

    Args:
        df: The dataframe (OML's format).
        labels_key: Key of the labels in the items.

    The other arguments are those of :class:`AudioBaseDataset`; the start times are the ``start_time`` column.
    """

    def __init__(
        self,
        df: pd.DataFrame,
        dataset_root: str | Path | None = None,
        extra_data: Mapping[str, Sequence[Any]] | None = None,
        input_tensors_key: str = INPUT_TENSORS_KEY,
        index_key: str = INDEX_KEY,
        labels_key: str = LABELS_KEY,
        sample_rate: int = DEFAULT_SAMPLE_RATE,
        max_num_seconds: float | None = MAX_AUDIO_LEN,
        convert_to_mono: bool = DEFAULT_CONVERT_TO_MONO,
        spec_repr_func: TSpecFunc = default_spec_repr_func,
    ) -> None:
        self.labels_key = labels_key
        self._init_from_df(
            df,
            self._required_columns(),
            extra_data,
            dataset_root=dataset_root,
            input_tensors_key=input_tensors_key,
            index_key=index_key,
            sample_rate=sample_rate,
            max_num_seconds=max_num_seconds,
            convert_to_mono=convert_to_mono,
            spec_repr_func=spec_repr_func,
        )
        self._init_labels()

    @staticmethod
    def _required_columns() -> tuple[str, ...]:
        return LABELS_COLUMN, PATHS_COLUMN

    def __getitem__(self, item: int) -> dict[str, Any]:
        """The item of :class:`AudioBaseDataset` plus ``labels_key``."""
        return self._add_label(super().__getitem__(item), item)


class AudioQueryGalleryDataset(QueryGalleryColumns, _DataFrameAudioDataset, IQueryGalleryDataset):
    """The not annotated audios of a dataframe with a query/gallery split (columns ``path``, ``is_query``,
    ``is_gallery``). An item both query and gallery is compared to every other item ("1 vs rest").

    The arguments are those of :class:`AudioLabeledDataset` without ``labels_key``.
    """

    def __init__(
        self,
        df: pd.DataFrame,
        dataset_root: str | Path | None = None,
        extra_data: Mapping[str, Sequence[Any]] | None = None,
        input_tensors_key: str = INPUT_TENSORS_KEY,
        index_key: str = INDEX_KEY,
        sample_rate: int = DEFAULT_SAMPLE_RATE,
        max_num_seconds: float | None = MAX_AUDIO_LEN,
        convert_to_mono: bool = DEFAULT_CONVERT_TO_MONO,
        spec_repr_func: TSpecFunc = default_spec_repr_func,
    ) -> None:
        self._init_from_df(
            df,
            (PATHS_COLUMN, IS_QUERY_COLUMN, IS_GALLERY_COLUMN),
            extra_data,
            dataset_root=dataset_root,
            input_tensors_key=input_tensors_key,
            index_key=index_key,
            sample_rate=sample_rate,
            max_num_seconds=max_num_seconds,
            convert_to_mono=convert_to_mono,
            spec_repr_func=spec_repr_func,
        )
        self._init_query_gallery(self.df)


class AudioQueryGalleryLabeledDataset(QueryGalleryColumns, AudioLabeledDataset, IQueryGalleryLabeledDataset):
    """The annotated audios of a dataframe with a query/gallery split (columns ``label``, ``path``,
    ``is_query``, ``is_gallery``), what validation runs on.

    The arguments are those of :class:`AudioLabeledDataset`.
    """

    def __init__(
        self,
        df: pd.DataFrame,
        dataset_root: str | Path | None = None,
        extra_data: Mapping[str, Sequence[Any]] | None = None,
        input_tensors_key: str = INPUT_TENSORS_KEY,
        index_key: str = INDEX_KEY,
        labels_key: str = LABELS_KEY,
        sample_rate: int = DEFAULT_SAMPLE_RATE,
        max_num_seconds: float | None = MAX_AUDIO_LEN,
        convert_to_mono: bool = DEFAULT_CONVERT_TO_MONO,
        spec_repr_func: TSpecFunc = default_spec_repr_func,
    ) -> None:
        AudioLabeledDataset.__init__(
            self,
            df,
            dataset_root=dataset_root,
            extra_data=extra_data,
            input_tensors_key=input_tensors_key,
            index_key=index_key,
            labels_key=labels_key,
            sample_rate=sample_rate,
            max_num_seconds=max_num_seconds,
            convert_to_mono=convert_to_mono,
            spec_repr_func=spec_repr_func,
        )
        self._init_query_gallery(self.df)

    @staticmethod
    def _required_columns() -> tuple[str, ...]:
        return LABELS_COLUMN, PATHS_COLUMN, IS_QUERY_COLUMN, IS_GALLERY_COLUMN


__all__ = [
    "AudioBaseDataset",
    "AudioLabeledDataset",
    "AudioQueryGalleryDataset",
    "AudioQueryGalleryLabeledDataset",
    "parse_start_times",
]
