"""A modality is one plugin: ``vector_rows``, a real plugin distribution (:func:`fake_distribution`) that the core
knows nothing of, registers the dataset component ``vectors`` (each CSV row a short vector of numbers, read as a
tensor) and the extractor ``vector_mlp``; ``oml train``, ``oml validate`` and ``oml predict`` run on it through
``dataset.name=vectors``, and their numbers are those of a naive computation with the same weights."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from oml_core.cli import main
from oml_core.registry import default_registry
from tests.scripts.fake_plugins import fake_distribution

VECTORS_PLUGIN = """\
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from oml_core import hookimpl
from oml_core.interfaces.datasets import IDatasetComponent, IQueryGalleryLabeledDataset
from oml_core.interfaces.models import IExtractor
from oml_core.registry import ConfigError


class VectorRows(IQueryGalleryLabeledDataset):
    def __init__(self, df, columns):
        self.df = df.reset_index(drop=True)
        self.x = torch.tensor(self.df[columns].to_numpy(dtype=np.float32))

    def __len__(self):
        return len(self.df)

    def __getitem__(self, i):
        return {"input_tensors": self.x[i], "idx": i, "labels": int(self.df["label"][i])}

    def get_labels(self):
        return self.df["label"].to_numpy()

    def get_query_ids(self):
        return torch.tensor(np.flatnonzero(self.df["is_query"].to_numpy(dtype=bool)))

    def get_gallery_ids(self):
        return torch.tensor(np.flatnonzero(self.df["is_gallery"].to_numpy(dtype=bool)))


class Vectors(IDatasetComponent):
    def __init__(self, dataset_root, dataframe_name, dim: int = 4):
        self.csv = Path(dataset_root) / dataframe_name
        self.columns = [f"x{i}" for i in range(dim)]
        self.df = pd.read_csv(self.csv)

    @property
    def source(self):
        return self.csv

    def _rows(self, split):
        return VectorRows(self.df[self.df["split"] == split], self.columns)

    def train_dataset(self):
        return self._rows("train")

    def validation_dataset(self):
        return self._rows("validation")

    def prediction_dataset(self):
        return VectorRows(self.df, self.columns)

    def item_names(self, dataset):
        return dataset.df["name"].astype(str).tolist()

    def check(self, datasets, num_workers, progress_bar):
        for column in self.columns:
            bad = np.flatnonzero(~np.isfinite(pd.to_numeric(self.df[column], errors="coerce")))
            if len(bad):
                raise ConfigError(f"{self.csv}: column {column!r} is not a finite number in the rows {bad.tolist()}")
        return [f"{self.csv}: {len(self.df)} rows of {len(self.columns)} numbers"]


class VectorMLP(IExtractor):
    def __init__(self, dim: int = 4, hidden: int = 16, out: int = 8):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, out))
        self.out = out

    @property
    def feat_dim(self):
        return self.out

    def forward(self, x):
        return self.layers(x)


@hookimpl
def oml_register_datasets(register):
    register("vectors", Vectors, description="rows of numbers")


@hookimpl
def oml_register_extractors(register):
    register("vector_mlp", VectorMLP, description="an MLP on rows of numbers")
"""
N_LABELS, PER_SPLIT, DIM = 8, 4, 4
USAGE = 2


def write_vectors(root: Path) -> pd.DataFrame:
    """``root/df.csv``: 8 labels, each a random centre in 4-d with 4 noisy rows per split (validation rows are
    queries and gallery items both); the columns ``name, label, split, is_query, is_gallery, x0..x3``."""
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 3, (N_LABELS, DIM))
    rows = []
    for split in ("train", "validation"):
        for label in range(N_LABELS):
            for k in range(PER_SPLIT):
                x = centres[label] + rng.normal(0, 0.7, DIM)
                validation = split == "validation"
                rows.append(
                    {
                        "name": f"{split}-{label}-{k}",
                        "label": label,
                        "split": split,
                        "is_query": validation,
                        "is_gallery": validation,
                        **{f"x{i}": x[i] for i in range(DIM)},
                    }
                )
    df = pd.DataFrame(rows)
    root.mkdir(parents=True, exist_ok=True)
    df.to_csv(root / "df.csv", index=False)
    return df


def vectors_config(root: Path, logs: Path) -> dict:
    """An ``oml train`` config without images: no transforms, the dataset and extractor of the plugin."""
    return {
        "postfix": "vectors",
        "seed": 3,
        "accelerator": "cpu",
        "dataset": {"name": "vectors", "args": {"dim": DIM}},
        "dataset_root": str(root),
        "dataframe_name": "df.csv",
        "logs_root": str(logs),
        "sampler": {"name": "balance", "args": {"n_labels": 4, "n_instances": 4}},
        "bs_val": 8,
        "max_epochs": 2,
        "metric_args": {"cmc_top_k": [1], "map_top_k": [], "precision_top_k": [], "pcf_variance": []},
        "metric_for_checkpointing": "OVERALL/cmc/1",
        "extractor": {"name": "vector_mlp", "args": {"dim": DIM}},
        "criterion": {"name": "arcface", "args": {"in_features": 8, "num_classes": N_LABELS, "s": 8.0}},
        "optimizer": {"name": "adam", "args": {"lr": 0.01}},
        "lightning_trainer_extra_args": {"enable_progress_bar": False},
    }


def naive_cmc_at_1(embeddings: np.ndarray, labels: np.ndarray) -> float:
    """cmc@1 of every item as a query against all the others: 1 when its nearest other item (Euclidean) has its
    label."""
    hits = []
    for q in range(len(embeddings)):
        distances = [
            np.linalg.norm(embeddings[q] - embeddings[g]) if g != q else np.inf
            for g in range(len(embeddings))
        ]
        hits.append(labels[int(np.argmin(distances))] == labels[q])
    return float(np.mean(hits))


def mlp_of(checkpoint: Path) -> torch.nn.Module:
    """The plugin's MLP with the extractor weights of an ``oml train`` checkpoint, built by hand."""
    layers = torch.nn.Sequential(torch.nn.Linear(DIM, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    state = torch.load(checkpoint, weights_only=True)["state_dict"]
    prefix = "extractor.layers."
    layers.load_state_dict({k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)})
    return layers.eval()


@pytest.fixture()
def vectors_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, oml_cache_dir: Path) -> Path:
    """The plugin ``vector_rows`` installed in this process; returns the folder of its data."""
    site = tmp_path / "site"
    site.mkdir()
    fake_distribution(site, "vector-rows", "vector_rows", "vector_rows_plugin", VECTORS_PLUGIN)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    monkeypatch.setenv("OML_PLUGIN_SLOW_SECONDS", "0")
    for name in ("OML_LOAD_PLUGINS", "OML_STRICT_PLUGINS", "OML_TRACEBACK"):
        monkeypatch.delenv(name, raising=False)
    default_registry.cache_clear()
    yield tmp_path / "data"
    default_registry.cache_clear()


def config_args(folder: Path, name: str, cfg: dict) -> list[str]:
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(cfg))
    return ["--config-path", str(folder), "--config-name", name]


@pytest.mark.slow
def test_train_validate_and_predict_run_on_a_plugins_modality(vectors_installed, tmp_path, capsys):
    df = write_vectors(vectors_installed)
    cfg = vectors_config(vectors_installed, tmp_path / "logs")
    with pytest.warns(UserWarning, match="64 rows of 4 numbers"):  # the component's own check ran
        assert main(["train", *config_args(tmp_path, "train", cfg)]) == 0
    (best,) = (tmp_path / "logs").glob("*/checkpoints/best.ckpt")

    validation = df[df["split"] == "validation"]
    mlp = mlp_of(best)
    with torch.no_grad():
        expected_embeddings = mlp(
            torch.tensor(validation[[f"x{i}" for i in range(DIM)]].to_numpy(np.float32))
        )
    expected_cmc = naive_cmc_at_1(expected_embeddings.numpy(), validation["label"].to_numpy())

    validate_cfg = {
        key: cfg[key]
        for key in ("dataset", "dataset_root", "dataframe_name", "bs_val", "metric_args", "accelerator")
    }
    validate_cfg |= {
        "extractor": {"name": "vector_mlp", "args": {"dim": DIM, "weights": str(best)}},
        "logs_root": str(tmp_path / "validation"),
        "lightning_trainer_extra_args": {"enable_progress_bar": False},
    }
    capsys.readouterr()
    with pytest.warns(UserWarning, match="64 rows of 4 numbers"):
        assert main(["validate", *config_args(tmp_path, "validate", validate_cfg)]) == 0
    table = capsys.readouterr().out
    assert expected_cmc > 0.5  # the weights learnt the clusters
    (row,) = [line for line in table.splitlines() if "cmc/1" in line]
    assert row.split()[-1] == f"{expected_cmc:.4f}"

    predict_cfg = {
        "dataset": cfg["dataset"],
        "dataset_root": cfg["dataset_root"],
        "dataframe_name": "df.csv",
        "accelerator": "cpu",
        "bs": 16,
        "save_dir": str(tmp_path / "predictions"),
        "extractor": validate_cfg["extractor"],
        "lightning_trainer_extra_args": {"enable_progress_bar": False},
    }
    with pytest.warns(UserWarning, match="64 rows of 4 numbers"):
        assert main(["predict", *config_args(tmp_path, "predict", predict_cfg)]) == 0
    predictions = json.loads((tmp_path / "predictions" / "predictions.json").read_text())
    assert list(predictions) == df["name"].tolist()  # items named by the component, in its order
    with torch.no_grad():
        every = mlp(torch.tensor(df[[f"x{i}" for i in range(DIM)]].to_numpy(np.float32)))
    torch.testing.assert_close(torch.tensor(list(predictions.values())), every, atol=1e-5, rtol=0)


def test_the_components_check_refuses_bad_data_before_any_work(vectors_installed, tmp_path, capsys):
    df = write_vectors(vectors_installed)
    df.loc[5, "x2"] = np.inf
    df.to_csv(vectors_installed / "df.csv", index=False)
    assert (
        main(["train", *config_args(tmp_path, "train", vectors_config(vectors_installed, tmp_path / "logs"))])
        == USAGE
    )
    line = capsys.readouterr().err.splitlines()[-1]
    assert (
        line
        == f"oml train: error: {vectors_installed / 'df.csv'}: column 'x2' is not a finite number in the rows [5]"
    )
    assert not (tmp_path / "logs").exists()


def test_a_dataset_component_without_the_dataset_a_pipeline_needs_is_named(
    vectors_installed, tmp_path, capsys
):
    """A component that gives no prediction dataset (the interface's default) is a one-line error naming it."""
    from oml_core.interfaces.datasets import IDatasetComponent
    from oml_core.lightning.pipelines.shared.data import dataset_of
    from oml_core.registry import ConfigError

    class TrainOnly(IDatasetComponent):
        source = Path("x.csv")

    with pytest.raises(ConfigError) as raised:
        dataset_of(TrainOnly(), "prediction", "extractor_prediction_pipeline")
    assert str(raised.value) == (
        "extractor_prediction_pipeline: config key 'dataset': the dataset component TrainOnly gives no prediction "
        "dataset; this pipeline needs its prediction dataset"
    )
