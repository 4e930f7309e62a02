"""``oml train`` / ``validate`` / ``predict`` / ``index build`` / ``search --text`` on the mock texts with the genuine
all-MiniLM-L6-v2 (``dataset.name=texts``, ``extractor.name=hf_text``), and bad texts refused in one line before
any work. The commands run in this process (``oml_core.cli.main``), as the core's tests of a plugin's modality."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import torch
from oml_texts import TextBaseDataset, get_mock_texts_dataset
from oml_texts.extractors import HFTextExtractor

from oml_core.cli import main
from oml_core.registry import default_registry

USAGE = 2
#: cmc@1 of zero-shot MiniLM on the mock validation split, measured: 1.0 (every text's nearest other text is of
#: its product); the test asks at least this much.
ZERO_SHOT_CMC1 = 0.95


@pytest.fixture()
def texts_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated oml cache (the mock texts are written there) and a fresh registry; returns the mock's folder."""
    from oml_texts import get_mock_texts_dataset_root

    monkeypatch.setenv("OML_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("OML_TRACEBACK", raising=False)
    default_registry.cache_clear()
    yield get_mock_texts_dataset_root()
    default_registry.cache_clear()


def texts_args(model: Path) -> list[str]:
    """The overrides of any pipeline that runs MiniLM on the mock texts."""
    return ["dataset@dataset=texts", "extractor@extractor=hf_text", f"extractor.args.model={model}"]


QUIET = "lightning_trainer_extra_args={enable_progress_bar: false}"


@pytest.mark.slow
def test_every_command_runs_on_the_mock_texts_with_minilm(texts_env, minilm_folder, tmp_path, capsys):
    args = texts_args(minilm_folder)
    assert main(["validate", *args, "transforms_val=null", f"logs_root={tmp_path / 'v'}", QUIET]) == 0
    table = capsys.readouterr().out
    (cmc,) = [float(line.split()[-1]) for line in table.splitlines() if line.startswith("OVERALL/cmc/1 ")]
    (precision,) = [
        float(line.split()[-1]) for line in table.splitlines() if line.startswith("OVERALL/precision/5")
    ]
    assert ZERO_SHOT_CMC1 <= cmc <= 1 and 0 <= precision <= 1

    train = [
        *args,
        "transforms_train=null",
        "transforms_val=null",
        "loss@criterion=triplet_with_miner",
        "sampler.args.n_labels=2",
        "sampler.args.n_instances=2",
        "max_epochs=1",
        "validate_before_training=false",
        f"logs_root={tmp_path / 'logs'}",
        "lightning_trainer_extra_args={enable_progress_bar: false, limit_train_batches: 2}",
    ]
    assert main(["train", *train]) == 0
    (best,) = (tmp_path / "logs").glob("*/checkpoints/best.ckpt")
    capsys.readouterr()

    predict = [
        *args,
        "transforms_predict=null",
        f"save_dir={tmp_path / 'pred'}",
        f"extractor.args.weights={best}",
    ]
    assert main(["predict", *predict, QUIET]) == 0
    predictions = json.loads((tmp_path / "pred" / "predictions.json").read_text())
    df = pd.read_csv(texts_env / "df.csv")
    assert list(predictions) == df["text"].tolist()
    tuned = HFTextExtractor(
        model=str(minilm_folder), pooling="mean", normalise_features=True, weights=str(best)
    ).eval()
    tokens = TextBaseDataset(df["text"][:3], tuned_tokenizer(minilm_folder))
    with torch.no_grad():
        expected = tuned(next(iter(torch.utils.data.DataLoader(tokens, batch_size=3)))["input_tensors"])
    torch.testing.assert_close(torch.tensor(list(predictions.values())[:3]), expected, atol=1e-5, rtol=0)

    index_dir = tmp_path / "index"
    build = [*args, f"index_dir={index_dir}", "transforms=null", f"logs_root={tmp_path}"]
    assert main(["index", "build", *build]) == 0
    assert "Gallery index:    120 items" in capsys.readouterr().out
    query = df["text"][100]  # a validation text: its own row is its nearest item
    (tmp_path / "queries.txt").write_text(f"{df['text'][3]}\n\n")
    assert (
        main(
            [
                "search",
                str(index_dir),
                "--text",
                query,
                "--text",
                "a device to brew coffee",
                "--format",
                "json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert [answer["query"] for answer in report["queries"]] == [query, "a device to brew coffee"]
    first = report["queries"][0]["results"][0]
    assert (first["id"], first["path"], first["label"]) == (100, query, int(df["label"][100]))
    assert first["distance"] == pytest.approx(0.0, abs=1e-3)
    coffee = report["queries"][1]["results"][0]
    assert df["text"][coffee["id"]] == coffee["path"] and "espresso machine" in coffee["path"].lower()
    assert main(["search", str(index_dir), str(tmp_path / "queries.txt"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["queries"][0]["results"][0]["id"] == 3

    new = "a hand grinder for coffee beans"  # oml index add reads a text file as oml search does
    (tmp_path / "new.txt").write_text(f"{new}\n")
    assert main(["index", "add", str(index_dir), str(tmp_path / "new.txt")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "added 1, updated 0, generation 2"
    assert main(["search", str(index_dir), "--text", new, "--format", "json"]) == 0
    first = json.loads(capsys.readouterr().out)["queries"][0]["results"][0]
    assert (first["id"], first["path"], first["label"]) == (120, new, None)


def tuned_tokenizer(folder: Path):
    from oml_texts.hub import load_tokenizer

    return load_tokenizer(str(folder))


def write_csv(folder: Path, df: pd.DataFrame) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    df.to_csv(folder / "df.csv", index=False)
    return folder


def train_args(root: Path, model: Path, logs: Path) -> list[str]:
    return [
        *texts_args(model),
        f"dataset_root={root}",
        "transforms_train=null",
        "transforms_val=null",
        f"logs_root={logs}",
    ]


def test_a_csv_without_a_text_column_is_one_line_before_any_work(texts_env, minilm_folder, tmp_path, capsys):
    df = pd.concat(get_mock_texts_dataset()).rename(columns={"text": "description"})
    root = write_csv(tmp_path / "data", df)
    assert main(["train", *train_args(root, minilm_folder, tmp_path / "logs")]) == USAGE
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"oml train: error: {str(root / 'df.csv')!r}: has no column 'text' (columns: label, description, split, "
        f"is_query, is_gallery, category)"
    ]
    assert not (tmp_path / "logs").exists()


def test_an_empty_text_is_one_line_naming_its_row(texts_env, minilm_folder, tmp_path, capsys):
    df = pd.concat(get_mock_texts_dataset(), ignore_index=True)
    df.loc[7, "text"] = "   "
    root = write_csv(tmp_path / "data", df)
    assert main(["train", *train_args(root, minilm_folder, tmp_path / "logs")]) == USAGE
    assert capsys.readouterr().err.splitlines() == [
        f"oml train: error: {str(root / 'df.csv')!r}: 'text': an empty text at row 7"
    ]
    assert not (tmp_path / "logs").exists()


def test_a_model_folder_that_does_not_exist_is_one_line_before_any_work(texts_env, tmp_path, capsys):
    missing = tmp_path / "no_such_model"
    assert (
        main(["validate", *texts_args(missing), "transforms_val=null", f"logs_root={tmp_path / 'logs'}"])
        == USAGE
    )
    assert (
        capsys.readouterr().err.splitlines()[-1].endswith(f"the model folder {str(missing)!r} does not exist")
    )
    assert not (tmp_path / "logs").exists()


def test_an_empty_query_text_and_an_index_of_images_given_texts_are_one_line(texts_env, tmp_path, capsys):
    from oml_texts.data import TextData

    from oml_core.index.errors import GalleryIndexError
    from oml_core.index.queries import collect_queries
    from oml_core.registry import ConfigError

    data = TextData(tokenizer=str(tmp_path / "never_read"))
    with pytest.raises(ConfigError, match=r"^query text 2 \(--text\) is empty$"):
        collect_queries(data, [], texts=["fine", " "])
    images = default_registry().build("dataset", {"name": "images"})
    with pytest.raises(GalleryIndexError) as raised:
        collect_queries(images, [], texts=["a text"])
    assert str(raised.value) == (
        "the dataset component ImageData takes no query texts: give its queries as QUERY arguments"
    )
    with pytest.raises(
        GalleryIndexError, match="^give the queries as QUERY arguments or as --text, not both$"
    ):
        collect_queries(data, ["q.txt"], texts=["a text"])
