"""``audios``, the dataset component of audio: the audio files of a dataframe in OML's format (``start_time``
column optional), or of a folder, as OML's audio datasets; checked before any model runs; the audio queries of
``oml search`` and the probe clip of a gallery index.

Items are named by their paths, with ``#t=<seconds>`` appended when they start later than 0 (a media fragment),
so that two crops of one file have two names.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import soundfile
import torch

from oml_audio.datasets import (
    AudioBaseDataset,
    AudioLabeledDataset,
    AudioQueryGalleryLabeledDataset,
    parse_start_times,
)
from oml_audio.mock import MOCK_AUDIOS, get_mock_audios_path
from oml_audio.visualisation import wav_bytes
from oml_audio.waveform import (
    AUDIO_EXTENSIONS,
    DEFAULT_CONVERT_TO_MONO,
    DEFAULT_SAMPLE_RATE,
    FLOAT_SUBTYPES,
    MAX_AUDIO_LEN,
    AudioReadError,
    read_audio,
)
from oml_core.const import IS_GALLERY_COLUMN, PATHS_COLUMN
from oml_core.datasets.dataframe_format import (
    DEFAULT_ENCODING,
    DataFrameFormatError,
    dataframe_warnings,
    empty_mask,
    format_rows,
    parse_flags,
    read_csv_file,
    read_csv_with_column,
    read_dataframe,
)
from oml_core.datasets.image_data import check_train_and_validation_rows
from oml_core.interfaces.datasets import IBaseDataset, IDatasetComponent
from oml_core.registry import ConfigError
from oml_core.utils.atomic import atomic_write_bytes
from oml_core.utils.logs import get_logger

log = get_logger(__name__)

#: The probe clip of a gallery index: its file name, sample rate and length (samples).
PROBE_FILE = "probe.wav"
PROBE_RATE = 16_000
PROBE_SAMPLES = 8_000
#: Problems named in a check's error, at most.
SHOWN_PROBLEMS = 3


def item_name(path: Path | str, start_time: float) -> str:
    """``path``, with ``#t=<start_time>`` when the item starts later than 0 s."""
    return f"{path}#t={start_time:g}" if start_time > 0 else str(path)


def find_audios(folder: Path) -> list[Path]:
    """The audio files (:data:`~oml_audio.waveform.AUDIO_EXTENSIONS`, any case) under ``folder``, recursively,
    sorted by path."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_EXTENSIONS)


def audio_problem(path: Path, start_time: float) -> str | None:
    """Why the audio file ``path`` cannot give an item starting at ``start_time`` s (read by libsndfile's header:
    no such file, not audio, a sample rate of 0, no samples, a start past its end; a file of float samples is
    read whole: NaN or infinite samples), or None."""
    try:
        info = soundfile.info(str(path))
    except (soundfile.LibsndfileError, RuntimeError) as e:
        return f"'{path}' cannot be read as audio: {e}"
    if info.frames <= 0:
        return f"'{path}' has no samples"
    duration = info.frames / info.samplerate
    if start_time >= duration:
        return f"'{path}': start_time {start_time:g} s is past its end ({duration:.3f} s)"
    if info.subtype in FLOAT_SUBTYPES:  # integer samples are always finite
        try:
            read_audio(path)
        except AudioReadError as e:
            return str(e)
    return None


class AudioData(IDatasetComponent):
    """Audio files and their labels as OML lays them out: ``dataset_root / dataframe_name``, a CSV with the
    columns ``label, path, split, is_query, is_gallery`` (``start_time``, ``category``, ``sequence`` when
    present), read by OML's audio datasets.

    - Training: the ``split == "train"`` rows as an :class:`~oml_audio.datasets.AudioLabeledDataset`; validation:
      the ``split == "validation"`` rows as an :class:`~oml_audio.datasets.AudioQueryGalleryLabeledDataset`.
    - Prediction: the audio files of ``data_dir`` (recursively, sorted), or every row of ``dataframe_name``
      (its ``path`` and ``start_time`` columns); with neither, the mock audio dataset.
    - A gallery index: every row of the dataframe (or only its ``is_gallery`` rows) with its label, or the files
      of ``data_dir``; its queries: audio files, folders, CSVs with a ``path`` (and ``start_time``) column; its
      probe: a fixed half-second clip.
    - Checks: every file is audio that libsndfile reads, with samples and a start time inside it; named by the
      CSV's row; with ``show_dataset_warnings``, the dataframe's doubtful rows as warnings.

    Args:
        dataset_root: The folder of the dataframe and the files; null: the mock audio dataset (generated on first
            use in oml's cache).
        dataframe_name: The CSV, relative to ``dataset_root``.
        dataframe_encoding: The CSV's text encoding.
        sample_rate: The rate every file is resampled to (Hz, > 0).
        max_num_seconds: The length of every item (seconds, > 0).
        convert_to_mono: Average the channels (the extractors take mono).
        data_dir: A folder of audio files to predict or to make a gallery of (no labels).
        check_audios: Check every file before any model runs (false skips it).
        show_dataset_warnings: Warn about the dataframe's doubtful rows.
        pipeline: Names the pipeline in messages.

    Raises:
        ValueError: a ``sample_rate`` or ``max_num_seconds`` that is not positive; both ``data_dir`` and
            ``dataframe_name``.
    """

    def __init__(
        self,
        dataset_root: str | Path | None = None,
        dataframe_name: str | None = None,
        dataframe_encoding: str = DEFAULT_ENCODING,
        sample_rate: int = DEFAULT_SAMPLE_RATE,
        max_num_seconds: float = MAX_AUDIO_LEN,
        convert_to_mono: bool = DEFAULT_CONVERT_TO_MONO,
        data_dir: str | Path | None = None,
        check_audios: bool = True,
        show_dataset_warnings: bool = False,
        pipeline: str = "audios",
    ) -> None:
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate <= 0:
            raise ValueError(f"sample_rate must be a positive integer (Hz), got {sample_rate!r}")
        if max_num_seconds is None or not max_num_seconds > 0:
            raise ValueError(
                f"max_num_seconds must be > 0 (items are batched at one length), got {max_num_seconds!r}"
            )
        if data_dir is not None and dataframe_name is not None:
            raise ValueError("give either data_dir (a folder of audio files) or dataframe_name, not both")
        self._given_root = dataset_root
        self._root: Path | None = None
        self._frame: pd.DataFrame | None = None
        self.dataframe_name = dataframe_name
        self.dataframe_encoding = dataframe_encoding
        self.sample_rate = sample_rate
        self.max_num_seconds = float(max_num_seconds)
        self.convert_to_mono = convert_to_mono
        self.data_dir = None if data_dir is None else Path(data_dir).expanduser().resolve()
        self.check_audios = check_audios
        self.show_dataset_warnings = show_dataset_warnings
        self.pipeline = pipeline
        #: The dataframe row of each item of the datasets built from the dataframe.
        self._rows: weakref.WeakKeyDictionary[IBaseDataset, np.ndarray] = weakref.WeakKeyDictionary()

    @property
    def dataset_root(self) -> Path:
        """The folder of the dataframe and the files, absolute (null: the mock audio dataset, made on first use).

        Raises:
            ConfigError: ``dataset_root`` is not a folder.
        """
        if self._root is None:
            if self._given_root is None:
                self._root = MOCK_AUDIOS.materialise(get_mock_audios_path())
            else:
                self._root = Path(self._given_root).expanduser().resolve()
                if not self._root.is_dir():
                    raise ConfigError(f"dataset_root {str(self._root)!r} is not a directory")
        return self._root

    @property
    def source(self) -> Path:
        """``dataset_root / dataframe_name`` (a folder: ``data_dir``; neither: the mock's ``df.csv``)."""
        if self.data_dir is not None:
            return self.data_dir
        return self.dataset_root / (self.dataframe_name or "df.csv")

    @property
    def dataframe(self) -> pd.DataFrame:
        """The dataframe, read once and checked in OML's format (its ``start_time`` column too).

        Raises:
            ConfigError: no such file, not OML's format, a bad ``start_time`` (naming the file, column and rows).
        """
        if self._frame is None:
            df = read_dataframe(self.dataset_root, self.dataframe_name or "df.csv", self.dataframe_encoding)
            self._start_times(df)
            self._frame = df
        return self._frame

    def _start_times(self, df: pd.DataFrame) -> list[float] | None:
        try:
            return parse_start_times(df)
        except ValueError as e:
            raise ConfigError(f"{str(self.source)!r}: {e}") from e

    def _audio_args(self) -> dict[str, object]:
        return {
            "sample_rate": self.sample_rate,
            "max_num_seconds": self.max_num_seconds,
            "convert_to_mono": self.convert_to_mono,
        }

    def _labelled_rows(self, split: str) -> np.ndarray:
        if self.data_dir is not None:
            raise NotImplementedError("a folder of audio files has no labels")
        return np.flatnonzero(self.dataframe["split"] == split)

    def train_dataset(self) -> AudioLabeledDataset:
        """The ``split == "train"`` rows.

        Raises:
            NotImplementedError: a folder of files (no labels).
            ConfigError: no train or no validation rows (a training run needs both).
        """
        train, validation = self._labelled_rows("train"), self._labelled_rows("validation")
        check_train_and_validation_rows(self.source, len(train), len(validation))
        return self._of_rows(AudioLabeledDataset, train)

    def validation_dataset(self) -> AudioQueryGalleryLabeledDataset:
        """The ``split == "validation"`` rows.

        Raises:
            NotImplementedError: a folder of files, or a dataframe without validation rows.
        """
        rows = self._labelled_rows("validation")
        if len(rows) == 0:
            raise NotImplementedError(f"{self.source} has no split=validation rows")
        return self._of_rows(AudioQueryGalleryLabeledDataset, rows)

    def _of_rows(self, dataset_class: type[AudioLabeledDataset], rows: np.ndarray) -> AudioLabeledDataset:
        dataset = dataset_class(
            self.dataframe.iloc[rows].reset_index(drop=True),
            dataset_root=self.dataset_root,
            **self._audio_args(),
        )
        self._rows[dataset] = rows
        return dataset

    def prediction_dataset(self) -> AudioBaseDataset:
        """The files of ``data_dir``, or every row of the dataframe (the mock's without either).

        Raises:
            ConfigError: no such folder or no audio in it; a dataframe without ``path``, with empty or repeated
                items, or a bad ``start_time``.
        """
        if self.data_dir is not None:
            if not self.data_dir.is_dir():
                raise ConfigError(f"{self.pipeline}: data_dir {str(self.data_dir)!r} is not a directory")
            files = find_audios(self.data_dir)
            if not files:
                raise ConfigError(
                    f"{self.pipeline}: no audio files ({', '.join(AUDIO_EXTENSIONS)}) under data_dir "
                    f"{str(self.data_dir)!r}"
                )
            return AudioBaseDataset(files, **self._audio_args())
        df = self._prediction_frame()
        dataset = AudioBaseDataset(
            df[PATHS_COLUMN].astype(str).tolist(),
            dataset_root=self.dataset_root,
            start_times=self._start_times(df),
            **self._audio_args(),
        )
        self._rows[dataset] = np.arange(len(df))
        return dataset

    def _prediction_frame(self) -> pd.DataFrame:
        """Every row of the dataframe, read without OML's format check (no labels needed): its ``path`` column
        without empty cells, no item twice."""
        path = self.source
        try:
            df = read_csv_with_column(path, PATHS_COLUMN, self.dataframe_encoding)
        except DataFrameFormatError as e:
            raise ConfigError(str(e)) from e
        names = pd.Series(
            [item_name(p, t) for p, t in zip(df[PATHS_COLUMN], self._start_times(df) or [0.0] * len(df))]
        )
        repeated = np.flatnonzero(names.duplicated().to_numpy())
        if len(repeated):
            raise ConfigError(
                f"{str(path)!r}: the same path and start_time repeat at {format_rows(repeated, names)}; "
                "the predictions have one entry per item"
            )
        return df

    def gallery_dataset(self, rows: str = "all") -> AudioBaseDataset:
        """Every row of the dataframe (``rows="all"``) or its ``is_gallery`` rows (``"gallery"``), labelled; or
        the files of ``data_dir``, without labels.

        Raises:
            ConfigError: see :meth:`prediction_dataset` and :attr:`dataframe`.
        """
        if self.data_dir is not None:
            return self.prediction_dataset()
        df = self.dataframe
        keep = np.arange(len(df)) if rows == "all" else np.flatnonzero(parse_flags(df[IS_GALLERY_COLUMN])[0])
        return self._of_rows(AudioLabeledDataset, keep)

    def item_names(self, dataset: IBaseDataset) -> list[str]:
        """The items' paths (absolute for the dataframe's rows), with ``#t=<start>`` for a later start."""
        audios = self._audio_dataset(dataset)
        return [item_name(path, start) for path, start in zip(audios.paths, audios.start_times)]

    def item_ids(self, dataset: IBaseDataset) -> list[int]:
        """The dataframe row of each item; the position of each file of a folder or of queries."""
        audios = self._audio_dataset(dataset)
        rows = self._rows.get(audios)
        return list(range(len(audios))) if rows is None else [int(row) for row in rows]

    def query_dataset(self, queries: Sequence[str], root: Path | None = None) -> AudioBaseDataset:
        """The audio of ``queries``, in order: a folder stands for its audio files (recursively, sorted); a
        ``.csv`` for its rows (a ``path`` column joined to ``root`` or, when None, to the CSV's folder; a
        ``start_time`` column when present); anything else is an audio file. Each is checked as the data is.

        Raises:
            ConfigError: a folder without audio, a bad CSV, a file that is not audio libsndfile reads.
        """
        paths: list[Path] = []
        starts: list[float] = []
        for query in map(Path, queries):
            if query.is_dir():
                found = find_audios(query)
                if not found:
                    raise ConfigError(f"{query}: holds no audio files ({', '.join(AUDIO_EXTENSIONS)})")
                paths += found
                starts += [0.0] * len(found)
            elif query.suffix.lower() == ".csv":
                csv_paths, csv_starts = self._query_csv(query, query.parent if root is None else Path(root))
                paths += csv_paths
                starts += csv_starts
            else:
                paths.append(query)
                starts.append(0.0)
        dataset = self._files_dataset(paths, starts)
        problems = self._problems(dataset, rows=None, num_workers=0)
        if problems:
            raise ConfigError(problems[0])
        return dataset

    def _query_csv(self, path: Path, root: Path) -> tuple[list[Path], list[float]]:
        if not path.is_file():
            raise ConfigError(f"the CSV of queries '{path}' does not exist")
        try:
            df = read_csv_file(path)
        except DataFrameFormatError as e:
            raise ConfigError(str(e)) from e
        if PATHS_COLUMN not in df.columns or len(df) == 0:
            raise ConfigError(f"'{path}': a CSV of queries needs a column 'path' and rows")
        empty = empty_mask(df[PATHS_COLUMN])
        if empty.any():
            raise ConfigError(f"'{path}': column 'path' is empty at {format_rows(np.flatnonzero(empty))}")
        try:
            starts = parse_start_times(df)
        except ValueError as e:
            raise ConfigError(f"'{path}': {e}") from e
        return [root / str(p) for p in df[PATHS_COLUMN]], starts or [0.0] * len(df)

    def _files_dataset(self, paths: Sequence[Path], starts: Sequence[float]) -> AudioBaseDataset:
        try:
            return AudioBaseDataset(list(paths), start_times=list(starts), **self._audio_args())
        except ValueError as e:
            raise ConfigError(f"{self.pipeline}: {e}") from e

    def probe_query(self, folder: Path) -> str:
        """Write the probe clip into ``folder``: half a second at 16 kHz, 16-bit PCM, of
        ``0.5 sin(2 pi 440 t) + 0.25 sin(2 pi 1250 t)``; the same bytes every time."""
        t = torch.arange(PROBE_SAMPLES, dtype=torch.float64) / PROBE_RATE
        clip = 0.5 * torch.sin(2 * torch.pi * 440 * t) + 0.25 * torch.sin(2 * torch.pi * 1250 * t)
        atomic_write_bytes(Path(folder) / PROBE_FILE, wav_bytes(clip[None].float(), PROBE_RATE))
        return PROBE_FILE

    def check(self, datasets: list[IBaseDataset], num_workers: int, progress_bar: bool | None) -> list[str]:
        """Read the header of every file of ``datasets`` (``num_workers`` threads) unless ``check_audios`` is
        false (:func:`audio_problem`); with ``show_dataset_warnings``, the dataframe's doubtful rows.

        Returns:
            The warnings.

        Raises:
            ConfigError: files that are not usable audio: counted, the first few named with their CSV rows.
        """
        found = []
        if self.show_dataset_warnings and self.data_dir is None:
            found += dataframe_warnings(self.dataframe, repr(str(self.source)))
        if not self.check_audios:
            return found
        started = time.perf_counter()
        problems = []
        for dataset in map(self._audio_dataset, datasets):
            problems += self._problems(dataset, self._rows.get(dataset), num_workers)
        if problems:
            shown = "; ".join(problems[:SHOWN_PROBLEMS])
            more = f" (and {len(problems) - SHOWN_PROBLEMS} more)" if len(problems) > SHOWN_PROBLEMS else ""
            raise ConfigError(
                f"{self.pipeline}: {str(self.source)!r}: {len(problems)} unusable audio: {shown}{more}"
            )
        n_files = sum(len(dataset) for dataset in datasets)
        log.info(
            f"Checked {n_files} audio files in {time.perf_counter() - started:.1f} s (check_audios=false skips it)"
        )
        return found

    @staticmethod
    def _problems(dataset: AudioBaseDataset, rows: np.ndarray | None, num_workers: int) -> list[str]:
        """:func:`audio_problem` of every item, prefixed by its CSV row when ``rows`` are known."""
        with ThreadPoolExecutor(max_workers=max(1, num_workers)) as pool:
            found = list(pool.map(audio_problem, dataset.paths, dataset.start_times))
        return [
            problem if rows is None else f"row {int(rows[i])}: {problem}"
            for i, problem in enumerate(found)
            if problem is not None
        ]

    def _audio_dataset(self, dataset: IBaseDataset) -> AudioBaseDataset:
        if not isinstance(dataset, AudioBaseDataset):
            raise TypeError(
                f"the audios dataset component got a {type(dataset).__name__}, not one of its datasets"
            )
        return dataset


__all__ = ["AudioData", "PROBE_FILE", "audio_problem", "find_audios", "item_name"]
