"""Every pipeline on audio, from configs: ``oml train`` (one short epoch of a small random ECAPA-TDNN on the mock
audio), ``oml validate``, ``oml predict``, ``oml index build`` and ``oml search`` through ``dataset.name=audios``;
and the checks that refuse bad audio in one line before any work."""

from __future__ import annotations

import json
import struct
from dataclasses import fields
from pathlib import Path

import pandas as pd
import pytest
import soundfile
import torch
import yaml
from oml_audio import AudioBaseDataset, ECAPATDNNExtractor, get_mock_audios_dataset

from oml_core.cli import main
from oml_core.registry import default_registry

USAGE = 2
SMALL = {"channels": 16, "mfa_channels": 32, "attention_channels": 8, "embedding_dim": 16}
SECONDS = 0.5


@pytest.fixture()
def audio_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The mock audio dataset in ``tmp_path / "mock"``, and an isolated oml cache."""
    monkeypatch.setenv("OML_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OML_TRACEBACK", raising=False)
    default_registry.cache_clear()
    get_mock_audios_dataset(tmp_path / "mock")
    yield tmp_path / "mock"
    default_registry.cache_clear()


def write_config(folder: Path, name: str, cfg: dict) -> list[str]:
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
    return ["--config-path", str(folder), "--config-name", name]


def train_config(root: Path, logs: Path) -> dict:
    return {
        "postfix": "audio",
        "seed": 1,
        "accelerator": "cpu",
        "dataset": {"name": "audios", "args": {"max_num_seconds": SECONDS}},
        "dataset_root": str(root),
        "dataframe_name": "df.csv",
        "logs_root": str(logs),
        "sampler": {"name": "balance", "args": {"n_labels": 4, "n_instances": 4}},
        "bs_val": 24,
        "max_epochs": 1,
        "metric_args": {"cmc_top_k": [1], "map_top_k": [], "precision_top_k": [5], "pcf_variance": []},
        "metric_for_checkpointing": "OVERALL/cmc/1",
        "extractor": {
            "name": "ecapa_tdnn",
            "args": {"weights": None, "arch": "ecapa_tdnn_taoruijie", **SMALL},
        },
        "criterion": {"name": "arcface", "args": {"in_features": 16, "num_classes": 4, "s": 8.0}},
        "optimizer": {"name": "adam", "args": {"lr": 0.001}},
        "lightning_trainer_extra_args": {"enable_progress_bar": False},
    }


def metric_of(table: str, name: str) -> float:
    (row,) = [line for line in table.splitlines() if line.split()[:1] == [name]]
    return float(row.split()[-1])


@pytest.mark.slow
def test_every_pipeline_runs_on_audio(
    audio_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    cfg = train_config(audio_root, tmp_path / "logs")
    assert main(["train", *write_config(tmp_path, "train", cfg)]) == 0
    train_out = capsys.readouterr().out
    (best,) = (tmp_path / "logs").glob("*/checkpoints/best.ckpt")

    extractor = {
        "name": "ecapa_tdnn",
        "args": {"weights": str(best), "arch": "ecapa_tdnn_taoruijie", **SMALL},
    }
    validate_cfg = {
        key: cfg[key] for key in ("dataset", "dataset_root", "dataframe_name", "bs_val", "accelerator")
    }
    validate_cfg |= {
        "metric_args": cfg["metric_args"],
        "extractor": extractor,
        "logs_root": str(tmp_path / "validation"),
        "log_images": True,
        "lightning_trainer_extra_args": {"enable_progress_bar": False},
    }
    assert main(["validate", *write_config(tmp_path, "validate", validate_cfg)]) == 0
    table = capsys.readouterr().out
    cmc, precision = metric_of(table, "OVERALL/cmc/1"), metric_of(table, "OVERALL/precision/5")
    assert 0.0 <= cmc <= 1.0 and 0.0 <= precision <= 1.0
    assert list((tmp_path / "validation").rglob("*.png"))  # the worst queries, drawn as spectrograms
    assert metric_of(train_out, "OVERALL/cmc/1") == pytest.approx(
        cmc, abs=1e-4
    )  # the best epoch, validated again

    predict_cfg = {
        "dataset": cfg["dataset"],
        "dataset_root": str(audio_root),
        "dataframe_name": "df.csv",
        "accelerator": "cpu",
        "bs": 24,
        "save_dir": str(tmp_path / "predictions"),
        "extractor": extractor,
        "lightning_trainer_extra_args": {"enable_progress_bar": False},
    }
    assert main(["predict", *write_config(tmp_path, "predict", predict_cfg)]) == 0
    predictions = json.loads((tmp_path / "predictions" / "predictions.json").read_text())
    df = pd.read_csv(audio_root / "df.csv")
    names = [
        f"{audio_root / p}#t={t:g}" if t > 0 else str(audio_root / p)
        for p, t in zip(df["path"], df["start_time"])
    ]
    assert list(predictions) == names
    model = ECAPATDNNExtractor(weights=str(best), arch="ecapa_tdnn_taoruijie", **SMALL).eval()
    items = AudioBaseDataset(
        df["path"].tolist(), audio_root, max_num_seconds=SECONDS, start_times=df["start_time"]
    )
    with torch.no_grad():
        expected = model(torch.stack([items[i]["input_tensors"] for i in (0, 40)]))
    torch.testing.assert_close(
        torch.tensor([predictions[names[0]], predictions[names[40]]]), expected, atol=1e-4, rtol=0
    )

    index_dir = tmp_path / "index"
    build = [
        "dataset.name=audios",
        f"dataset.args.max_num_seconds={SECONDS}",
        f"dataset_root={audio_root}",
        "extractor.name=ecapa_tdnn",
        f"extractor.args.weights={best}",
        *(f"+extractor.args.{key}={value}" for key, value in SMALL.items()),
        "transforms=null",
        f"index_dir={index_dir}",
    ]
    assert main(["index", "build", *build]) == 0
    assert f"Gallery index:    48 items of {audio_root / 'df.csv'}" in capsys.readouterr().out
    assert (index_dir / "probe.wav").is_file()
    queries = df.iloc[[30, 41]].assign(path=lambda q: [str(audio_root / p) for p in q["path"]])
    queries[["path", "start_time"]].to_csv(tmp_path / "queries.csv", index=False)
    assert (
        main(["search", str(index_dir), str(tmp_path / "queries.csv"), "--top-k", "3", "--format", "json"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert [answer["query"] for answer in report["queries"]] == [names[30], names[41]]
    for answer, row in zip(report["queries"], (30, 41)):  # each item finds itself first, at distance 0
        first = answer["results"][0]
        assert (first["id"], first["path"], first["label"]) == (row, names[row], int(df["label"][row]))
        assert first["distance"] == pytest.approx(0.0, abs=1e-3)


def test_a_non_audio_file_is_refused_in_one_line_before_work(
    audio_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    df = pd.read_csv(audio_root / "df.csv")
    (audio_root / df["path"][7]).write_text("this is not audio")
    assert (
        main(["train", *write_config(tmp_path, "train", train_config(audio_root, tmp_path / "logs"))])
        == USAGE
    )
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"oml train: error: extractor_training_pipeline: '{audio_root / 'df.csv'}': 1 unusable audio: row 7: "
        f"'{audio_root / df['path'][7]}' cannot be read as audio: Error opening '{audio_root / df['path'][7]}': "
        "Format not recognised."
    ]
    assert not (tmp_path / "logs").exists()


def test_a_float_wav_with_nan_and_infinite_samples_is_refused_in_one_line_naming_the_file_and_row(
    audio_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    df = pd.read_csv(audio_root / "df.csv")
    path = audio_root / df["path"][12]
    samples, rate = soundfile.read(str(path), dtype="float32")
    samples[[800, 801, 900]] = [float("nan"), float("inf"), float("-inf")]
    soundfile.write(str(path), samples, rate, subtype="FLOAT")  # a real float WAV: libsndfile keeps the NaN
    assert soundfile.info(str(path)).subtype == "FLOAT"
    written = path.read_bytes()
    assert (
        main(["train", *write_config(tmp_path, "train", train_config(audio_root, tmp_path / "logs"))])
        == USAGE
    )
    assert capsys.readouterr().err.splitlines() == [
        f"oml train: error: extractor_training_pipeline: '{audio_root / 'df.csv'}': 1 unusable audio: row 12: "
        f"'{path}' has 3 NaN or infinite samples, the first at {800 / rate:.3f} s (sample 800, channel 0)"
    ]
    assert not (tmp_path / "logs").exists() and path.read_bytes() == written


def test_a_file_with_a_sample_rate_of_0_is_refused_in_one_line_before_work(
    audio_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    df = pd.read_csv(audio_root / "df.csv")
    path = audio_root / df["path"][40]
    data = bytearray(path.read_bytes())
    assert (
        soundfile.info(str(path)).samplerate == struct.unpack("<I", data[24:28])[0]
    )  # the WAV header's rate
    data[24:28] = data[28:32] = struct.pack("<I", 0)  # the rate and the byte rate
    path.write_bytes(bytes(data))
    cfg = train_config(audio_root, tmp_path / "logs")
    keys = ("dataset", "dataset_root", "dataframe_name", "bs_val", "extractor", "logs_root", "accelerator")
    validate_cfg = {key: cfg[key] for key in keys}
    assert main(["validate", *write_config(tmp_path, "validate", validate_cfg)]) == USAGE
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        f"oml validate: error: extractor_validation_pipeline: '{audio_root / 'df.csv'}': 1 unusable audio: row 40: "
        f"'{path}' cannot be read as audio: "
    )
    assert not (tmp_path / "logs").exists()


def test_a_sample_rate_of_0_in_the_config_is_refused_in_one_line(
    audio_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    cfg = train_config(audio_root, tmp_path / "logs")
    cfg["dataset"]["args"]["sample_rate"] = 0
    assert main(["train", *write_config(tmp_path, "train", cfg)]) == USAGE
    assert capsys.readouterr().err.splitlines() == [
        "oml train: error: extractor_training_pipeline: config key 'dataset' ('audios'): sample_rate must be a "
        "positive integer (Hz), got 0"
    ]
    assert not (tmp_path / "logs").exists()


def test_the_readmes_training_config_is_a_whole_config_of_the_mock_audio(audio_root, tmp_path):
    """The README's ``train_audio.yaml`` as written, with ``logs_folder`` (a key it lacks) on the command line:
    its config passes the checks before training, and its ArcFace has a class per training label of the mock."""
    from oml_core.cli.pipelines import check_before_lightning
    from oml_core.config.compose import compose_config
    from oml_core.config.schemas import schema_of
    from oml_core.registry import Registry

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    (block,) = [b for b in readme.split("```yaml\n")[1:] if b.startswith("# train_audio.yaml")]
    (tmp_path / "train_audio.yaml").write_text(block.split("```")[0])
    registry = Registry()
    pipeline = "extractor_training_pipeline"
    cfg = compose_config(
        "train_audio",
        ["logs_folder=run1", f"dataset_root={audio_root}"],
        str(tmp_path),
        registry,
        [field.name for field in fields(schema_of(pipeline))],
    )
    assert cfg.logs_folder == "run1"
    check_before_lightning(pipeline, cfg, registry)
    df = pd.read_csv(audio_root / "df.csv")
    assert cfg.criterion.args.num_classes == df[df["split"] == "train"]["label"].nunique()
