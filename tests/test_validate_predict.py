"""The validation and prediction pipelines in process: their outputs on tiny cases whose values are known,
and their one-line errors for bad configs and bad files."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf
from PIL import Image

from oml_core import hookimpl
from oml_core.config.compose import compose_config
from oml_core.config.schemas import ExtractorPredictionConfig, ExtractorValidationConfig
from oml_core.config.typed import validate_config
from oml_core.datasets import pil_to_tensor
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.interfaces.knn import IKnnIndex, KnnSearchResult
from oml_core.interfaces.models import IExtractor
from oml_core.lightning.callbacks.run_record import plain
from oml_core.lightning.pipelines import extractor_prediction_pipeline, extractor_validation_pipeline
from oml_core.lightning.pipelines.shared.inference import in_dataset_order
from oml_core.registry import ConfigError, Registry, UnknownNameError

NO_PROGRESS_BAR = "lightning_trainer_extra_args.enable_progress_bar=false"
VALIDATION = "extractor_validation_pipeline"
PREDICTION = "extractor_prediction_pipeline"


class MeanPixelExtractor(IExtractor):
    """The 1-d embedding ``mean(x)`` over channels and pixels: known values for known images."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(1, 2, 3)).unsqueeze(1)

    @property
    def feat_dim(self) -> int:
        return 1


def unit_pixels():
    """The transform that only scales the pixels to [0, 1]."""
    return pil_to_tensor


class KnownValues:
    @hookimpl
    def oml_register_extractors(self, register):
        register("mean_pixel", MeanPixelExtractor)

    @hookimpl
    def oml_register_transforms(self, register):
        register("unit_pixels", unit_pixels)


MEAN_PIXEL = {"name": "mean_pixel", "args": {}}
UNIT_PIXELS = {"name": "unit_pixels", "args": {}}


@pytest.fixture()
def registry(oml_cache_dir, monkeypatch) -> Registry:
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    return Registry([KnownValues()])


def _config(name: str, registry: Registry, tmp_path: Path, *overrides: str) -> dict:
    """The default config of a pipeline with tiny images, no progress bars and logs under ``tmp_path``."""
    size_key = "transforms_val" if name == VALIDATION else "transforms_predict"
    base = [
        f"logs_root={tmp_path / 'logs'}",
        NO_PROGRESS_BAR,
        f"{size_key}.args.im_size=32",
    ]
    return OmegaConf.to_container(compose_config(name, [*base, *overrides], registry=registry))


def _grey(path: Path, level: int, size: int = 8) -> None:
    Image.new("RGB", (size, size), (level, level, level)).save(path)


# ------------------------------------------------------------------------------------------- validation
@pytest.fixture()
def four_greys(tmp_path) -> Path:
    """Validation rows of grey levels 0, 51 (label 0), 128, 230 (label 1); everyone a query and a gallery."""
    root = tmp_path / "greys"
    root.mkdir()
    levels = [0, 51, 128, 230]
    for i, level in enumerate(levels):
        _grey(root / f"{i}.png", level)
    df = pd.DataFrame(
        {
            "label": [0, 0, 1, 1],
            "path": [f"{i}.png" for i in range(4)],
            "split": ["validation"] * 4,
            "is_query": [True] * 4,
            "is_gallery": [True] * 4,
        }
    )
    df.to_csv(root / "df.csv", index=False)
    return root


def _validate_greys(registry, tmp_path, root, postprocessor) -> dict[str, float]:
    cfg = _config(VALIDATION, registry, tmp_path, f"dataset_root={root}")
    cfg.update(extractor=MEAN_PIXEL, transforms_val=UNIT_PIXELS, postprocessor=postprocessor)
    cfg["metric_args"] = {"cmc_top_k": [1, 2], "precision_top_k": [], "map_top_k": [], "pcf_variance": []}
    return extractor_validation_pipeline(cfg, registry=registry).metrics


def test_constant_thresholding_cuts_the_retrieved_items_beyond_the_threshold(registry, tmp_path, four_greys):
    # embeddings 0, 0.2, 0.502, 0.902; the closest other items of each query, with their distances:
    # q0: q1 .2 (label 0, relevant), q2 .502 ...       -> cmc@1 = 1
    # q1: q0 .2 (relevant), q2 .302 ...           -> cmc@1 = 1
    # q2: q1 .302 (label 0, not), q3 .4 (relevant) ...  -> cmc@1 = 0, cmc@2 = 1
    # q3: q2 .4 (relevant) ...                    -> cmc@1 = 1
    plain = _validate_greys(registry, tmp_path, four_greys, None)
    assert plain == pytest.approx({"OVERALL/cmc/1": 0.75, "OVERALL/cmc/2": 1.0})
    # th=0.25 keeps only q0 -> q1 and q1 -> q0: q2 and q3 retrieve nothing
    cut = _validate_greys(
        registry, tmp_path, four_greys, {"name": "constant_thresholding", "args": {"th": 0.25}}
    )
    assert cut == pytest.approx({"OVERALL/cmc/1": 0.5, "OVERALL/cmc/2": 0.5})


def test_validation_through_a_knn_backend_of_the_config(registry, tmp_path, four_greys):
    """``metric_args.knn_backend`` picks the backend; the exact one gives the hand-computed values above, and an
    unknown one is the registry's error, with the close names (oml-faiss is installed with the project)."""
    cfg = _config(VALIDATION, registry, tmp_path, f"dataset_root={four_greys}")
    cfg.update(extractor=MEAN_PIXEL, transforms_val=UNIT_PIXELS, postprocessor=None)
    cfg["metric_args"] = {"cmc_top_k": [1, 2], "precision_top_k": [], "map_top_k": [], "pcf_variance": []}
    cfg["metric_args"]["knn_backend"] = {"name": "exact", "args": {"chunk_size": 1}}
    metrics = extractor_validation_pipeline(cfg, registry=registry).metrics
    assert metrics == pytest.approx({"OVERALL/cmc/1": 0.75, "OVERALL/cmc/2": 1.0})
    cfg["metric_args"]["knn_backend"] = "faiss_hsnw"
    with pytest.raises(UnknownNameError, match=r"Unknown knn_backend 'faiss_hsnw'. Did you mean: faiss_hnsw"):
        extractor_validation_pipeline(cfg, registry=registry)


class NaiveKnnIndex(IKnnIndex):
    """A third party's backend: l2 distances one pair at a time, sorted by (distance, position)."""

    def __init__(self, distance: str = "l2") -> None:
        self.distance, self.items, self.groups = distance, [], []

    def __len__(self) -> int:
        return len(self.items)

    def add(self, embeddings, ids=None, groups=None):
        ids = range(len(self), len(self) + len(embeddings)) if ids is None else ids.tolist()
        groups = ids if groups is None else groups.tolist()
        self.items += [(int(i), row) for i, row in zip(ids, embeddings)]
        self.groups += [int(g) for g in groups]

    def search(self, queries, k, exclude=None):
        distances = torch.full((len(queries), k), float("inf"))
        found = torch.full((len(queries), k), -1)
        for q, query in enumerate(queries):
            kept = [
                (float(torch.dist(query, row)), position, item)
                for position, (item, row) in enumerate(self.items)
                if exclude is None or self.groups[position] != int(exclude[q])
            ]
            for j, (distance, _, item) in enumerate(sorted(kept)[:k]):
                distances[q, j], found[q, j] = distance, item
        return KnnSearchResult(distances, found)

    def save(self, folder):
        items = [(item, row.tolist()) for item, row in self.items]
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "naive.json").write_text(json.dumps({"items": items, "groups": self.groups}))

    @classmethod
    def load(cls, folder):
        saved = json.loads((Path(folder) / "naive.json").read_text())
        index = cls()
        index.items = [(item, torch.tensor(row)) for item, row in saved["items"]]
        index.groups = saved["groups"]
        return index


class NaiveBackend:
    @hookimpl
    def oml_register_knn_backends(self, register):
        register("naive", NaiveKnnIndex)


def test_validation_through_a_plugins_knn_backend(oml_cache_dir, monkeypatch, tmp_path, four_greys):
    """A backend registered by a plugin is used by the pipeline: the hand-computed metrics of the four greys."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    registry = Registry([KnownValues(), NaiveBackend()])
    calls = []
    monkeypatch.setattr(NaiveKnnIndex, "search", _recorded(NaiveKnnIndex.search, calls))
    cfg = _config(
        VALIDATION, registry, tmp_path, f"dataset_root={four_greys}", "metric_args.knn_backend=naive"
    )
    cfg.update(extractor=MEAN_PIXEL, transforms_val=UNIT_PIXELS, postprocessor=None)
    cfg["metric_args"].update(cmc_top_k=[1, 2], precision_top_k=[], map_top_k=[], pcf_variance=[])
    metrics = extractor_validation_pipeline(cfg, registry=registry).metrics
    assert metrics == pytest.approx({"OVERALL/cmc/1": 0.75, "OVERALL/cmc/2": 1.0})
    assert calls == [4]  # the four queries, searched once through the plugin's index
    index = NaiveKnnIndex()
    index.add(torch.tensor([[0.0], [2.0]]))
    index.save(tmp_path / "naive")
    assert NaiveKnnIndex.load(tmp_path / "naive").search(torch.tensor([[1.5]]), 1).ids.tolist() == [[1]]


def _recorded(search, calls):
    def recording(self, queries, k, exclude=None):
        calls.append(len(queries))
        return search(self, queries, k, exclude)

    return recording


def test_validation_writes_the_worst_queries_and_the_config(registry, tmp_path, four_greys):
    overrides = [f"dataset_root={four_greys}", "log_images=true", "logs_folder=greys"]
    cfg = _config(VALIDATION, registry, tmp_path, *overrides)
    cfg.update(extractor=MEAN_PIXEL, transforms_val=UNIT_PIXELS)
    cfg["metric_args"] = {"cmc_top_k": [1], "map_top_k": [2], "precision_top_k": [], "pcf_variance": [0.5]}
    result = extractor_validation_pipeline(cfg, registry=registry)
    assert result.run_dir == tmp_path / "logs" / "greys"
    assert result.figures == [
        result.run_dir / "figures" / "top_5_worst_by_OVERALL_cmc_1.png",
        result.run_dir / "figures" / "top_5_worst_by_OVERALL_map_2.png",
    ]
    for figure in result.figures:
        with Image.open(figure) as image:
            assert image.format == "PNG" and image.width > 100
    assert (result.log_dir / "config.yaml").is_file()
    assert set(result.metrics) == {"OVERALL/cmc/1", "OVERALL/map/2", "OVERALL/pcf/0.5"}


def test_the_typed_config_runs_as_the_dict_and_the_logger_gets_every_key_of_it(
    registry, tmp_path, four_greys
):
    """The config enters once: the object ``validate_config`` makes of the dict runs as the dict does (the
    hand-computed metrics of ``test_constant_thresholding_...``), and either way the logger is given the typed
    config, every key of the pipeline with its value (the defaults of the keys the dict leaves out included)."""
    cfg = _config(VALIDATION, registry, tmp_path, f"dataset_root={four_greys}")
    cfg.update(extractor=MEAN_PIXEL, transforms_val=UNIT_PIXELS)
    cfg["metric_args"] = {"cmc_top_k": [1, 2], "precision_top_k": [], "map_top_k": [], "pcf_variance": []}
    del cfg["tags"], cfg["postfix"]  # left to their defaults
    config = validate_config(cfg, VALIDATION)
    assert isinstance(config, ExtractorValidationConfig)
    from_dict = extractor_validation_pipeline({**cfg, "logs_folder": "dict"}, registry=registry)
    typed = replace(config, logs_folder="typed")
    from_object = extractor_validation_pipeline(typed, registry=registry)
    expected = {"OVERALL/cmc/1": 0.75, "OVERALL/cmc/2": 1.0}
    assert from_dict.metrics == pytest.approx(expected) and from_object.metrics == pytest.approx(expected)
    assert from_object.run_dir == tmp_path / "logs" / "typed"
    logged = OmegaConf.to_container(OmegaConf.load(from_object.log_dir / "config.yaml"))
    assert logged == plain(typed) and logged["tags"] == [] and logged["postfix"] == "validation"
    assert logged["extractor"] == MEAN_PIXEL and logged["dataset"] == {"name": "images", "args": {}}
    logged_from_dict = OmegaConf.to_container(OmegaConf.load(from_dict.log_dir / "config.yaml"))
    assert logged_from_dict == {**logged, "logs_folder": "dict"}


def test_bad_metric_args_name_the_key(registry, tmp_path, four_greys):
    cfg = _config(VALIDATION, registry, tmp_path, f"dataset_root={four_greys}")
    cfg["metric_args"] = {"cmc_topk": [1]}
    with pytest.raises(
        ConfigError, match=r"^metric_args: unknown config key 'cmc_topk'; did you mean 'cmc_top_k'\?"
    ):
        extractor_validation_pipeline(cfg, registry=registry)


# ------------------------------------------------------------------------------------------- prediction
def test_prediction_of_a_folder_is_sorted_recursive_and_in_omls_format(registry, tmp_path):
    data_dir = tmp_path / "images"
    (data_dir / "a").mkdir(parents=True)
    (data_dir / "b").mkdir()
    levels = {"a/0.jpeg": 10, "a/1.jpg": 100, "b/2.PNG": 200}
    for name, level in levels.items():
        _grey(data_dir / name, level)
    (data_dir / "notes.txt").write_text("not an image")
    cfg = _config(PREDICTION, registry, tmp_path, f"data_dir={data_dir}", f"save_dir={tmp_path / 'out'}")
    cfg.update(extractor=MEAN_PIXEL, transforms_predict=UNIT_PIXELS)
    result = extractor_prediction_pipeline(cfg, registry=registry)

    assert result.predictions_path == tmp_path / "out" / "predictions.json"
    predictions = json.loads(result.predictions_path.read_text())
    expected_keys = [str(data_dir / name) for name in levels]
    assert list(predictions) == expected_keys == result.paths
    for key, name in zip(expected_keys, levels):
        with Image.open(data_dir / name) as image:  # a JPEG's pixels are what its decoder gives
            mean = np.asarray(image.convert("RGB"), dtype=np.float64).mean() / 255
        assert predictions[key] == [pytest.approx(mean, abs=1e-6)]
    assert result.feat_dim == 1


def test_prediction_of_the_typed_config_writes_what_the_dicts_does(registry, tmp_path):
    data_dir = tmp_path / "images"
    data_dir.mkdir()
    for name, level in {"0.png": 10, "1.png": 200}.items():
        _grey(data_dir / name, level)
    cfg = _config(PREDICTION, registry, tmp_path, f"data_dir={data_dir}", f"save_dir={tmp_path / 'dict'}")
    cfg.update(extractor=MEAN_PIXEL, transforms_predict=UNIT_PIXELS)
    config = validate_config({**cfg, "save_dir": tmp_path / "typed"}, PREDICTION)
    assert isinstance(config, ExtractorPredictionConfig) and config.save_dir == str(tmp_path / "typed")
    from_dict = extractor_prediction_pipeline(cfg, registry=registry)
    from_object = extractor_prediction_pipeline(config, registry=registry)
    assert from_object.predictions_path == tmp_path / "typed" / "predictions.json"
    predictions = json.loads(from_object.predictions_path.read_text())
    assert predictions == json.loads(from_dict.predictions_path.read_text())
    assert predictions == {
        str(data_dir / "0.png"): [pytest.approx(10 / 255, abs=1e-6)],
        str(data_dir / "1.png"): [pytest.approx(200 / 255, abs=1e-6)],
    }


def test_prediction_of_a_dataframe_takes_every_row_and_its_box(registry, tmp_path, oml_cache_dir):
    root = get_mock_dataset_root(oml_cache_dir)
    # crops differ in size and the transform keeps them so: one image per batch
    cfg = _config(PREDICTION, registry, tmp_path, "dataframe_name=df_with_bboxes.csv", "bs=1")
    cfg.update(extractor=MEAN_PIXEL, transforms_predict=UNIT_PIXELS)
    result = extractor_prediction_pipeline(cfg, registry=registry)

    assert result.predictions_path.parent.parent == tmp_path / "logs"  # a new run dir under logs_root
    df = pd.read_csv(root / "df_with_bboxes.csv")
    predictions = json.loads(result.predictions_path.read_text())
    assert list(predictions) == [str(root / path) for path in df["path"]]
    for row in df.itertuples():
        with Image.open(root / row.path) as image:
            crop = np.asarray(image.convert("RGB"), dtype=np.float64)[row.y_1 : row.y_2, row.x_1 : row.x_2]
        assert predictions[str(root / row.path)] == [pytest.approx(crop.mean() / 255, abs=1e-6)]


def test_prediction_never_overwrites_predictions(registry, tmp_path):
    save_dir = tmp_path / "out"
    save_dir.mkdir()
    (save_dir / "predictions.json").write_text("kept")
    cfg = _config(PREDICTION, registry, tmp_path, f"save_dir={save_dir}")
    with pytest.raises(
        ConfigError, match=re.escape(f"'{save_dir / 'predictions.json'}' exists and is never")
    ):
        extractor_prediction_pipeline(cfg, registry=registry)
    assert (save_dir / "predictions.json").read_text() == "kept"


def test_an_unreadable_image_is_named_before_anything_is_written(registry, tmp_path):
    data_dir = tmp_path / "images"
    data_dir.mkdir()
    _grey(data_dir / "good.png", 50)
    (data_dir / "broken.png").write_bytes(b"\x89PNG but not really")
    cfg = _config(PREDICTION, registry, tmp_path, f"data_dir={data_dir}", f"save_dir={tmp_path / 'out'}")
    with pytest.raises(ConfigError) as error:
        extractor_prediction_pipeline(cfg, registry=registry)
    message = str(error.value)
    assert message.startswith(f"{PREDICTION}: 1 of 2 image files cannot be read: '{data_dir / 'broken.png'}'")
    assert "\n" not in message and "good.png" not in message
    assert not (tmp_path / "out").exists()


def test_a_folder_without_images_is_an_error(registry, tmp_path):
    (tmp_path / "empty").mkdir()
    cfg = _config(PREDICTION, registry, tmp_path, f"data_dir={tmp_path / 'empty'}")
    with pytest.raises(ConfigError, match=r"no image files \(\.jpg, \.jpeg, \.png\) under data_dir"):
        extractor_prediction_pipeline(cfg, registry=registry)


def test_data_dir_and_dataframe_are_exclusive(registry, tmp_path):
    cfg = _config(PREDICTION, registry, tmp_path, f"data_dir={tmp_path}", "dataframe_name=df.csv")
    with pytest.raises(ConfigError, match="give either data_dir .* or dataframe_name .*, not both"):
        extractor_prediction_pipeline(cfg, registry=registry)


def test_duplicate_paths_of_a_dataframe_are_an_error(registry, tmp_path):
    _grey(tmp_path / "x.png", 9)
    pd.DataFrame({"path": ["x.png", "x.png"]}).to_csv(tmp_path / "twice.csv", index=False)
    cfg = _config(PREDICTION, registry, tmp_path, f"dataset_root={tmp_path}", "dataframe_name=twice.csv")
    with pytest.raises(ConfigError, match=r"twice\.csv'.*column 'path' repeats \['x\.png'\]"):
        extractor_prediction_pipeline(cfg, registry=registry)


# ------------------------------------------------------------------------------------ both: bad configs
@pytest.mark.parametrize(
    "pipeline, run, key, closest",
    [
        (VALIDATION, extractor_validation_pipeline, "bs_vall", "bs_val"),
        (PREDICTION, extractor_prediction_pipeline, "transforms_predikt", "transforms_predict"),
    ],
)
def test_an_unknown_key_is_named_with_the_closest_known_one(registry, tmp_path, pipeline, run, key, closest):
    cfg = {**_config(pipeline, registry, tmp_path), key: 1}
    with pytest.raises(
        ConfigError, match=f"^{pipeline}: unknown config key '{key}'; did you mean '{closest}'"
    ):
        run(cfg, registry=registry)


@pytest.mark.parametrize(
    "pipeline, run",
    [(VALIDATION, extractor_validation_pipeline), (PREDICTION, extractor_prediction_pipeline)],
)
def test_an_unknown_extractor_fails_before_any_work(registry, tmp_path, pipeline, run):
    cfg = _config(pipeline, registry, tmp_path)
    cfg["extractor"]["name"] = "resnett"
    with pytest.raises(UnknownNameError, match="Unknown extractor 'resnett'. Did you mean: resnet"):
        run(cfg, registry=registry)
    # on the command line the name is checked when the config is composed (extractor.name=OTHER)
    with pytest.raises(UnknownNameError, match="Unknown extractor 'resnett'. Did you mean: resnet"):
        _config(pipeline, registry, tmp_path, "extractor.name=resnett")
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize(
    "pipeline, run",
    [(VALIDATION, extractor_validation_pipeline), (PREDICTION, extractor_prediction_pipeline)],
)
def test_bad_weights_are_one_line_naming_the_file(registry, tmp_path, pipeline, run):
    missing = tmp_path / "missing.ckpt"
    cfg = _config(pipeline, registry, tmp_path, f"extractor.args.weights={missing}")
    with pytest.raises(ConfigError) as error:
        run(cfg, registry=registry)
    assert str(error.value) == (
        f"{pipeline}: config key 'extractor' ('resnet'): Checkpoint file not found: '{missing}'"
    )

    corrupt = tmp_path / "corrupt.ckpt"
    corrupt.write_text("not a checkpoint\nat all")
    cfg = _config(pipeline, registry, tmp_path, f"extractor.args.weights={corrupt}")
    with pytest.raises(ConfigError) as error:
        run(cfg, registry=registry)
    assert str(error.value).endswith(
        f"'{corrupt}' is not a checkpoint written by torch.save (neither a zip archive nor a pickle): it begins "
        "with b'not a checkpoint\\nat all'"
    )
    assert not (tmp_path / "logs").exists()


def test_embeddings_gathered_from_processes_are_put_in_dataset_order_once_each():
    # two processes' shares of a 5-item dataset, the second padded with item 0 (DDP's padding)
    indices = torch.tensor([0, 1, 2, 3, 4, 0])
    features = torch.tensor([[0.0], [1.0], [2.0], [3.0], [4.0], [0.5]])
    assert in_dataset_order(indices[[3, 4, 5, 0, 1, 2]], features[[3, 4, 5, 0, 1, 2]], 5).tolist() == [
        [0.5],  # the first of index 0 in the gathered order
        [1.0],
        [2.0],
        [3.0],
        [4.0],
    ]
    with pytest.raises(RuntimeError, match=re.escape("for 4 distinct dataset indices of 5; missing: [3]")):
        in_dataset_order(torch.tensor([0, 1, 2, 4]), torch.zeros(4, 1), 5)
    with pytest.raises(RuntimeError, match=re.escape("missing: [], out of range: [5]")):
        in_dataset_order(torch.tensor([0, 1, 2, 3, 4, 5]), torch.zeros(6, 1), 5)
