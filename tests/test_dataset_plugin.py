"""A modality is one plugin: ``vector_rows``, a real plugin distribution (:func:`fake_distribution`) that the core
knows nothing of, registers the dataset component ``vectors`` (each CSV row a short vector of numbers, read as a
tensor) and the extractor ``vector_mlp``, with their default configs; ``oml train``, ``oml validate``, ``oml
predict``, ``oml index build`` and ``oml search`` run on it through ``dataset.name=vectors``, and their numbers are
those of a naive computation with the same weights. Its items made wrong (``dataset.args.fault``) are named with the
component and the plugin before any work."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from oml_core.cli import main
from oml_core.index import GalleryIndex, GalleryIndexError, calibrate_rr
from oml_core.registry import default_registry
from oml_core.retrieval import RetrievalResults
from tests.scripts.fake_plugins import fake_distribution

VECTORS_PLUGIN = """\
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from oml_core import hookimpl
from oml_core.interfaces.datasets import IDatasetComponent, IQueryGalleryLabeledDataset
from oml_core.interfaces.models import IExtractor
from oml_core.registry import ConfigError


def faulty(item, fault):  # the item as a broken component gives it (fault None: as it is)
    if fault == "tuple":
        return tuple(item.values())
    if fault == "no_input":
        del item["input_tensors"]
    if fault == "list_input":
        item["input_tensors"] = item["input_tensors"].tolist()
    if fault == "text_label" and "labels" in item:
        item["labels"] = f"label {item['labels']}"
    return item


class VectorRows(IQueryGalleryLabeledDataset):
    def __init__(self, df, columns, fault=None):
        self.ids = df.index.tolist()  # the rows of the component's csv
        self.df = df.reset_index(drop=True)
        self.x = torch.tensor(self.df[columns].to_numpy(dtype=np.float32))
        self.fault = fault

    def __len__(self):
        return len(self.df)

    def __getitem__(self, i):
        item = {"input_tensors": self.x[i], "idx": i}
        if "label" in self.df:  # queries have none
            item["labels"] = int(self.df["label"][i])
        return faulty(item, self.fault)

    def get_labels(self):
        return self.df["label"].to_numpy()

    def get_query_ids(self):
        return torch.tensor(np.flatnonzero(self.df["is_query"].to_numpy(dtype=bool)))

    def get_gallery_ids(self):
        return torch.tensor(np.flatnonzero(self.df["is_gallery"].to_numpy(dtype=bool)))


class Vectors(IDatasetComponent):
    def __init__(self, dataset_root, dataframe_name, dim: int = 4, fault: str | None = None):
        self.csv = Path(dataset_root) / dataframe_name
        self.columns = [f"x{i}" for i in range(dim)]
        self.fault = fault

    @cached_property
    def df(self):  # read when needed: oml search builds the component for its queries only
        return pd.read_csv(self.csv)

    @property
    def source(self):
        return self.csv

    def _rows(self, split):
        return VectorRows(self.df[self.df["split"] == split], self.columns, self.fault)

    def train_dataset(self):
        return self._rows("train")

    def validation_dataset(self):
        return self._rows("validation")

    def prediction_dataset(self):
        return VectorRows(self.df, self.columns)

    def item_names(self, dataset):
        return dataset.df["name"].astype(str).tolist()

    def gallery_dataset(self, rows="all"):
        return VectorRows(self.df if rows == "all" else self.df[self.df["is_gallery"]], self.columns)

    def item_ids(self, dataset):
        return dataset.ids

    def query_dataset(self, queries, root=None):
        frames = []
        for query in queries:
            df = pd.read_csv(query)
            missing = [column for column in ["name", *self.columns] if column not in df.columns]
            if missing:
                raise ConfigError(f"{query}: a csv of query rows lacks the column(s) {missing}")
            frames.append(df)
        return VectorRows(pd.concat(frames, ignore_index=True), self.columns)

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


@hookimpl
def oml_register_config_dirs(register):
    register((Path(__file__).parent / "vector_rows_configs").as_uri())
"""
#: The plugin's default configs (``<kind>/<name>.yaml`` in its config dir), so that ``KEY.name=...`` switches to them.
DEFAULT_CONFIGS = {
    "dataset/vectors.yaml": "name: vectors\nargs:\n  dim: 4\n",
    "extractor/vector_mlp.yaml": "name: vector_mlp\nargs:\n  dim: 4\n  hidden: 16\n  out: 8\n",
}
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


def mlp_layers() -> torch.nn.Sequential:
    """The layers of the plugin's MLP, built by hand."""
    return torch.nn.Sequential(torch.nn.Linear(DIM, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))


def mlp_of(checkpoint: Path) -> torch.nn.Module:
    """The plugin's MLP with the extractor weights of an ``oml train`` checkpoint, built by hand."""
    layers = mlp_layers()
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
    for name, text in DEFAULT_CONFIGS.items():
        (site / "vector_rows_configs" / name).parent.mkdir(parents=True, exist_ok=True)
        (site / "vector_rows_configs" / name).write_text(text)
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


#: The faults of the plugin's items (its ``Vectors(fault=...)``) and what the pipelines say of them.
ITEM_FAULTS = {
    "tuple": "is a tuple, not a dict of its input, index and label",
    "no_input": "has no key 'input_tensors' (its keys: 'idx', 'labels')",
    "list_input": "holds a list under 'input_tensors', not a tensor or a dict of tensors",
    "text_label": "holds 'label 0' (str) under 'labels', not an int",
}


def test_a_dataset_component_whose_items_are_not_what_the_pipelines_take_is_named_before_any_work(
    vectors_installed, tmp_path, capsys
):
    write_vectors(vectors_installed)
    cfg = vectors_config(vectors_installed, tmp_path / "logs")
    for fault, problem in ITEM_FAULTS.items():
        cfg["dataset"]["args"]["fault"] = fault
        with pytest.warns(UserWarning, match="64 rows of 4 numbers"):  # the component's own check passed
            assert main(["train", *config_args(tmp_path, "train", cfg)]) == USAGE
        assert capsys.readouterr().err.splitlines() == [
            f"oml train: error: the dataset component 'vectors' of the plugin vector_rows (vector-rows 0.3): item 0 "
            f"of its VectorRows {problem}"
        ]
        assert not (tmp_path / "logs").exists()


def test_a_dataset_component_without_the_dataset_a_pipeline_needs_is_named(
    vectors_installed, tmp_path, capsys
):
    """A component that gives no prediction dataset (the interface's default) is a one-line error naming it."""
    from oml_core.config.data import dataset_of
    from oml_core.interfaces.datasets import IDatasetComponent
    from oml_core.registry import ConfigError

    class TrainOnly(IDatasetComponent):
        source = Path("x.csv")

    with pytest.raises(ConfigError) as raised:
        dataset_of(TrainOnly(), "prediction", "extractor_prediction_pipeline")
    assert str(raised.value) == (
        "extractor_prediction_pipeline: config key 'dataset': the dataset component TrainOnly gives no prediction "
        "dataset; this pipeline needs its prediction dataset"
    )


# ------------------------------------------------------------------------------------ a gallery index of rows
def save_mlp_checkpoint(path: Path, seed: int) -> Path:
    """A checkpoint as ``oml train`` leaves one (``state_dict``, the extractor's keys under ``extractor.``) of the
    plugin's MLP with random weights drawn from ``seed``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers = mlp_layers()
    torch.save({"state_dict": {f"extractor.layers.{k}": v for k, v in layers.state_dict().items()}}, path)
    return path


def rows_of(df: pd.DataFrame) -> torch.Tensor:
    return torch.tensor(df[[f"x{i}" for i in range(DIM)]].to_numpy(np.float32))


@pytest.fixture()
def vectors_index(vectors_installed, tmp_path, capsys) -> tuple[pd.DataFrame, Path, Path]:
    """The data, an index of its 64 rows built by ``oml index build dataset.name=vectors`` (calibrated to the best
    F1 on its validation rows) and the checkpoint of its MLP."""
    df = write_vectors(vectors_installed)
    checkpoint = save_mlp_checkpoint(tmp_path / "mlp.ckpt", seed=5)
    index_dir = tmp_path / "index"
    build = [
        "dataset.name=vectors",
        f"dataset_root={vectors_installed}",
        "extractor.name=vector_mlp",
        f"extractor.args.weights={checkpoint}",
        "transforms=null",
        "calibration.target=f1",
        f"index_dir={index_dir}",
    ]
    with pytest.warns(UserWarning, match="64 rows of 4 numbers"):  # the component's own check ran
        assert main(["index", "build", *build]) == 0
    out = capsys.readouterr().out
    assert f"Gallery index:    64 items of {vectors_installed / 'df.csv'} (knn backend 'exact', l2)" in out
    assert "Calibration:      threshold " in out
    return df, index_dir, checkpoint


def test_an_index_of_a_plugins_modality_is_built_and_searched_as_a_naive_search(
    vectors_index, vectors_installed, tmp_path, capsys
):
    """``oml search`` of a CSV of rows: the gallery's rows in the order of their distances to the query under the
    checkpoint's MLP (built by hand), named, numbered and labelled as the data's rows; the threshold is oml's
    calibration of the validation rows' naive embeddings."""
    df, index_dir, checkpoint = vectors_index
    config = json.loads((index_dir / "index.json").read_text())["config"]
    assert config["dataset"] == {"name": "vectors", "args": {"dim": DIM}}
    assert config["data"] == {"dataset_root": str(vectors_installed), "dataframe_name": "df.csv"}
    assert "probe.png" not in {p.name for p in index_dir.iterdir()}  # the component writes no probe query:
    stored = torch.load(
        index_dir / "gen-1" / "embeddings.pt", weights_only=True
    )  # the first row is the probe
    assert stored["probe_query"] is None and torch.equal(stored["probe_input"], rows_of(df)[0])

    queries = pd.DataFrame({"name": ["near-row-40", "near-row-50", "far"]})
    for i in range(DIM):
        queries[f"x{i}"] = [df[f"x{i}"][40] + 0.1, df[f"x{i}"][50] - 0.2, 9.0]
    queries.to_csv(tmp_path / "queries.csv", index=False)
    (vectors_installed / "df.csv").rename(
        tmp_path / "moved.csv"
    )  # the search reads nothing of the gallery's data
    assert (
        main(["search", str(index_dir), str(tmp_path / "queries.csv"), "--top-k", "6", "--format", "json"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)

    mlp = mlp_of(checkpoint)
    with torch.no_grad():
        gallery, asked = mlp(rows_of(df)).double(), mlp(rows_of(queries)).double()
    from vector_rows_plugin import VectorRows  # the plugin's module, importable once the fixture installed it

    validation = df["split"] == "validation"
    split = VectorRows(df[validation], [f"x{i}" for i in range(DIM)])
    embeddings = gallery[torch.tensor(validation.to_numpy())].float()
    expected_calibration = calibrate_rr(RetrievalResults.from_embeddings(embeddings, split, n_items=5), "f1")
    threshold = report["threshold"]
    assert threshold == pytest.approx(expected_calibration.threshold, abs=1e-5)
    assert [answer["query"] for answer in report["queries"]] == ["near-row-40", "near-row-50", "far"]
    for answer, query in zip(report["queries"], asked):
        distances = (gallery - query).norm(dim=1)
        nearest = torch.argsort(distances)[:6].tolist()
        assert [hit["id"] for hit in answer["results"]] == nearest
        assert [hit["path"] for hit in answer["results"]] == df["name"][nearest].tolist()
        assert [hit["label"] for hit in answer["results"]] == df["label"][nearest].tolist()
        assert [hit["distance"] for hit in answer["results"]] == pytest.approx(
            distances[nearest].tolist(), abs=1e-4
        )
        assert [hit["match"] for hit in answer["results"]] == [
            bool(d < threshold) for d in distances[nearest]
        ]
    nearest_labels = [answer["results"][0]["label"] for answer in report["queries"][:2]]
    assert nearest_labels == df["label"][[40, 50]].tolist()


def test_a_bad_query_of_a_plugins_modality_is_one_line(vectors_index, tmp_path, capsys):
    _, index_dir, _ = vectors_index
    pd.DataFrame({"name": ["q"], "x0": [1.0], "x1": [2.0], "x3": [4.0]}).to_csv(
        tmp_path / "q.csv", index=False
    )
    assert main(["search", str(index_dir), str(tmp_path / "q.csv")]) == USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"oml search: error: {tmp_path / 'q.csv'}: a csv of query rows lacks the column(s) ['x2']"
    ]


def test_an_index_of_a_plugins_modality_refuses_another_model_or_component(vectors_index, tmp_path, capsys):
    """The probe (the first gallery row's input, kept in the index) catches another model; the model JSON an
    edited dataset component."""
    df, index_dir, _ = vectors_index
    registry = default_registry()
    loaded = GalleryIndex.load(index_dir, registry=registry)
    df.head(2).to_csv(tmp_path / "rows.csv", index=False)
    rows = loaded.data.query_dataset([str(tmp_path / "rows.csv")])
    assert [hit.id for hit in loaded.search(rows, top_k=1)[0]] == [0]  # the first row finds itself

    other = registry.build("extractor", {"name": "vector_mlp", "args": {"dim": DIM}})
    with pytest.raises(GalleryIndexError) as raised:
        GalleryIndex.load(index_dir, registry=registry, extractor=other).search(rows)
    assert str(raised.value).startswith(
        f"{index_dir / 'gen-1' / 'embeddings.pt'} (its probe: a gallery item): the index's extractor and "
        f"transforms embed it "
    )

    meta = json.loads((index_dir / "index.json").read_text())
    meta["config"]["dataset"]["args"]["dim"] = 3
    (index_dir / "index.json").write_text(json.dumps(meta))
    assert main(["search", str(index_dir), str(tmp_path / "rows.csv")]) == USAGE
    assert capsys.readouterr().err.splitlines() == [
        f"oml search: error: {index_dir / 'index.json'}: its dataset.args.dim is 3, the embeddings of embeddings.pt "
        f"were built with 4: the index's config no longer matches what built its embeddings; rebuild the index "
        f"(oml index build)"
    ]
