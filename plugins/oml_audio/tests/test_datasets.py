"""OML's audio datasets against hand-computed waveforms: real WAV files written with soundfile, read back
resampled (lengths), down-mixed (the mean of the channels), cropped from their start times and padded in front."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile
import torch
from oml_audio import (
    AudioBaseDataset,
    AudioLabeledDataset,
    AudioQueryGalleryDataset,
    AudioQueryGalleryLabeledDataset,
    get_mock_audios_dataset,
)
from oml_audio.data import audio_problem
from oml_audio.waveform import AudioReadError, resample


def write_pcm16(path: Path, samples: np.ndarray, rate: int) -> Path:
    """``samples`` ``[frames]`` or ``[frames, channels]`` of integers, stored exactly as 16-bit PCM."""
    soundfile.write(path, samples.astype(np.int16), rate, subtype="PCM_16")
    return path


def ramp(n: int) -> np.ndarray:
    """``0, 1, ..., n - 1`` as 16-bit integers: read back as ``k / 32768``."""
    return np.arange(n, dtype=np.int16)


def test_a_second_at_44100_hz_is_16000_samples_of_the_same_tone(tmp_path: Path) -> None:
    t = np.arange(44_100) / 44_100
    tone = np.round(10_000 * np.sin(2 * np.pi * 440 * t))
    path = write_pcm16(tmp_path / "a.wav", tone, 44_100)
    dataset = AudioBaseDataset([path], max_num_seconds=1.0)
    audio = dataset[0]["input_tensors"]
    assert audio.shape == (1, 16_000) and audio.dtype == torch.float32
    expected = 10_000 / 32_768 * np.sin(2 * np.pi * 440 * np.arange(16_000) / 16_000)
    # polyphase filtering: exact away from the edges, where the filter sees zeros beyond the signal
    np.testing.assert_allclose(audio[0, 200:-200].numpy(), expected[200:-200], atol=2e-3)
    assert len(resample(torch.zeros(1, 22_050), 22_050, 16_000)[0]) == 16_000
    assert len(resample(torch.zeros(1, 1001), 8_000, 16_000)[0]) == 2002  # ceil(1001 * 2)
    assert len(resample(torch.zeros(1, 10), 48_000, 16_000)[0]) == 4  # ceil(10 / 3)


def test_the_channels_are_averaged(tmp_path: Path) -> None:
    left, right = ramp(1600), 3 * ramp(1600)
    path = write_pcm16(tmp_path / "stereo.wav", np.stack([left, right], axis=1), 16_000)
    mono = AudioBaseDataset([path], max_num_seconds=0.1)[0]["input_tensors"]
    torch.testing.assert_close(mono, torch.arange(1600, dtype=torch.float32)[None] * 2 / 32_768)
    stereo = AudioBaseDataset([path], max_num_seconds=0.1, convert_to_mono=False)[0]["input_tensors"]
    assert stereo.shape == (2, 1600)
    torch.testing.assert_close(stereo[1], 3 * torch.arange(1600, dtype=torch.float32) / 32_768)


def test_crops_start_at_the_start_time_and_short_ones_are_padded_in_front(tmp_path: Path) -> None:
    path = write_pcm16(tmp_path / "ramp.wav", ramp(16_000), 16_000)  # 1 s
    df = pd.DataFrame(
        {
            "label": [0, 0, 1],
            "path": ["ramp.wav"] * 3,
            "start_time": [0.25, 0.9, np.nan],  # an empty cell starts at 0
            "is_query": [True, True, True],
            "is_gallery": [True, True, False],
        }
    )
    dataset = AudioQueryGalleryLabeledDataset(df, dataset_root=tmp_path, max_num_seconds=0.2)
    assert path.exists() and len(dataset) == 3
    first, second, third = (dataset[i]["input_tensors"][0] * 32_768 for i in range(3))
    torch.testing.assert_close(first, torch.arange(4000, 7200, dtype=torch.float32))  # 0.25 s = sample 4000
    # from 0.9 s only 1600 samples are left: 1600 zeros, then samples 14400..15999
    torch.testing.assert_close(second[:1600], torch.zeros(1600))
    torch.testing.assert_close(second[1600:], torch.arange(14_400, 16_000, dtype=torch.float32))
    torch.testing.assert_close(third, torch.arange(0, 3200, dtype=torch.float32))
    assert [dataset[i]["labels"] for i in range(3)] == [0, 0, 1]
    assert dataset.get_query_ids().tolist() == [0, 1, 2] and dataset.get_gallery_ids().tolist() == [0, 1]
    # a start time converted at the dataset's rate: 0.25 s at 8 kHz is sample 2000 of the resampled ramp
    resampled = AudioLabeledDataset(df, dataset_root=tmp_path, max_num_seconds=0.2, sample_rate=8_000)
    assert resampled[0]["input_tensors"].shape == (1, 1600)
    full = resample(torch.arange(16_000, dtype=torch.float32)[None] / 32_768, 16_000, 8_000)
    torch.testing.assert_close(resampled[0]["input_tensors"], full[:, 2000:3600])


def test_labelled_items_carry_their_category_and_sequence(tmp_path: Path) -> None:
    write_pcm16(tmp_path / "a.wav", ramp(800), 16_000)
    df = pd.DataFrame(
        {
            "label": [3, 5],
            "path": ["a.wav", "a.wav"],
            "category": ["x", "y"],
            "sequence": ["s1", "s2"],
            "is_query": [True, False],
            "is_gallery": [False, True],
        }
    )
    dataset = AudioLabeledDataset(df, dataset_root=tmp_path, max_num_seconds=0.1)
    item = dataset[1]
    assert (item["labels"], item["category"], item["sequence"], item["idx"]) == (5, "y", "s2", 1)
    assert dataset.get_labels().tolist() == [3, 5] and dataset.get_label2category() == {3: "x", 5: "y"}
    unlabelled = AudioQueryGalleryDataset(
        df.drop(columns="label"), dataset_root=tmp_path, max_num_seconds=0.1
    )
    assert "labels" not in unlabelled[0] and unlabelled.get_gallery_ids().tolist() == [1]


def test_bad_arguments_and_unreadable_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"sample_rate must be a positive integer \(Hz\), got 0"):
        AudioBaseDataset([tmp_path / "a.wav"], sample_rate=0)
    with pytest.raises(ValueError, match=r"not an audio file .*'.*notes\.txt'"):
        AudioBaseDataset([tmp_path / "notes.txt"])
    (tmp_path / "fake.wav").write_text("not audio at all")
    with pytest.raises(AudioReadError, match=r"fake\.wav' cannot be read as audio: .*Format not recognised"):
        AudioBaseDataset([tmp_path / "fake.wav"])[0]
    write_pcm16(tmp_path / "short.wav", ramp(160), 16_000)
    df = pd.DataFrame({"label": [0], "path": ["short.wav"], "start_time": [0.5]})
    with pytest.raises(ValueError, match=r"the start time 0.5 s is past its end \(0.010 s\)"):
        AudioLabeledDataset(df, dataset_root=tmp_path)[0]
    with pytest.raises(ValueError, match=r"column 'start_time': not a number of seconds >= 0 at row"):
        AudioLabeledDataset(df.assign(start_time=["soon"]), dataset_root=tmp_path)


def test_nan_and_infinite_samples_of_a_float_wav_are_refused_naming_the_file(tmp_path: Path) -> None:
    stereo = np.zeros((1600, 2), dtype=np.float32)
    stereo[400, 1] = np.inf
    soundfile.write(str(tmp_path / "inf.wav"), stereo, 16_000, subtype="DOUBLE")
    with pytest.raises(AudioReadError) as raised:
        AudioBaseDataset([tmp_path / "inf.wav"])[0]
    assert str(raised.value) == (
        f"'{tmp_path / 'inf.wav'}' has 1 NaN or infinite samples, the first at 0.025 s (sample 400, channel 1)"
    )
    assert audio_problem(tmp_path / "inf.wav", 0.0) == str(raised.value)
    soundfile.write(str(tmp_path / "fine.wav"), stereo[:, :1] * 0, 16_000, subtype="FLOAT")
    assert audio_problem(tmp_path / "fine.wav", 0.0) is None


def test_items_are_drawn_as_framed_spectrograms_and_html_players(tmp_path: Path) -> None:
    t = np.arange(16_000) / 16_000
    write_pcm16(tmp_path / "tone.wav", np.round(8000 * np.sin(2 * np.pi * 1000 * t)), 16_000)
    dataset = AudioBaseDataset([tmp_path / "tone.wav"], max_num_seconds=1.0)
    picture = dataset.visualize(0, color=(0, 255, 0))
    assert picture.shape == (128, 128, 3) and picture.dtype == np.uint8
    assert (picture[:4] == (0, 255, 0)).all() and (picture[:, -4:] == (0, 255, 0)).all()
    inside = picture[4:-4, 4:-4].astype(int).sum(axis=(1, 2))
    # 1 kHz sits in the lower part of a 0..8 kHz mel axis (drawn bottom-up): the brightest row is below the middle
    assert 64 < int(np.argmax(inside)) < 124
    html = dataset.visualize_as_html(0, title="Query #0", color=(0, 0, 255))
    assert "Query #0" in html and "border: 5px solid rgb(0, 0, 255)" in html
    assert html.count("data:image/png;base64,") == 1 and html.count("data:audio/wav;base64,") == 1


def test_the_mock_dataset_is_labelled_clips_in_omls_format(tmp_path: Path) -> None:
    df_train, df_val = get_mock_audios_dataset(tmp_path / "mock", global_paths=True)
    assert (len(df_train), len(df_val)) == (24, 24)
    assert sorted(df_train["label"].unique()) == [0, 1, 2, 3] and sorted(df_val["label"].unique()) == [
        4,
        5,
        6,
        7,
    ]
    assert df_val["is_query"].all() and df_val["is_gallery"].all()
    assert set(df_train["category"]) == {"tone", "chirp", "noise"}
    assert df_train["start_time"].between(0, 0.25).all()
    infos = [soundfile.info(p) for p in df_train["path"]]
    assert {i.samplerate for i in infos} == {16_000, 22_050} and {i.channels for i in infos} == {1, 2}
    assert all(abs(i.duration - 1.0) < 1e-9 for i in infos)
    again = get_mock_audios_dataset(tmp_path / "again", global_paths=False)[0]  # seeded: byte-identical files
    assert (tmp_path / "mock" / again["path"][5]).read_bytes() == (
        tmp_path / "again" / again["path"][5]
    ).read_bytes()
    # a tone's energy is at its label's frequency: 220 * 2^(label / 4) Hz (+-3 %), label 0 -> 220 Hz
    audio, rate = soundfile.read(df_train["path"][0])
    spectrum = np.abs(np.fft.rfft(audio if audio.ndim == 1 else audio.mean(axis=1)))
    assert abs(np.argmax(spectrum) * rate / len(audio) - 220) < 220 * 0.031
