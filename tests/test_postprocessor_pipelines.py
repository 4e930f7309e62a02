"""`oml train-postprocessor` and `oml validate-postprocessor`: the chain train an extractor -> train a pairwise
re-ranker on it -> validate with re-ranking on the mock dataset, the embeddings cache, PairwiseModule's
training step, and the one-line errors of a bad config."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from omegaconf import OmegaConf
from torch import Tensor, nn

from oml_core import hookimpl
from oml_core.cli import main
from oml_core.config.compose import compose_config
from oml_core.config.schemas import PostprocessorValidationConfig
from oml_core.config.typed import validate_config
from oml_core.datasets import ImageQueryGalleryLabeledDataset
from oml_core.datasets.dataframe_format import read_dataframe
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.interfaces.miners import IPairsMiner
from oml_core.interfaces.models import IExtractor, IPairwiseModel
from oml_core.lightning.modules.pairwise_postprocessing import PairwiseModule
from oml_core.lightning.pipelines.shared.embeddings_cache import CachedEmbeddings, EmbeddingsSource
from oml_core.lightning.pipelines.shared.inference import TRAINER_DEFAULTS
from oml_core.lightning.pipelines.train_postprocessor import (
    build_pairs_miner,
    postprocessor_training_pipeline,
)
from oml_core.lightning.pipelines.validate_postprocessor import postprocessor_validation_pipeline
from oml_core.registry import Registry
from oml_core.reports.pipelines import AFTER_TITLE, BEFORE_TITLE

NO_PROGRESS_BAR = "lightning_trainer_extra_args.enable_progress_bar=false"
METRIC_ROW = re.compile(r"^(OVERALL/\S+)\s+(\d+\.\d{4})$", re.MULTILINE)
#: A row of a table with a column per stage (`oml train`'s: start, best, last): the metric and its last value.
LAST_VALUE_ROW = re.compile(r"^(OVERALL/\S+)(?:\s+\d+\.\d{4})*\s+(\d+\.\d{4})$", re.MULTILINE)
TINY = "32"


def _ok(result) -> str:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def _before_and_after(stdout: str) -> tuple[dict[str, str], dict[str, str]]:
    """The metric tables before and after post-processing that a post-processing pipeline printed."""
    before, _, after = stdout.partition(AFTER_TITLE)
    before = before.partition(BEFORE_TITLE)[2]
    return dict(METRIC_ROW.findall(before)), dict(METRIC_ROW.findall(after))


@pytest.mark.slow
def test_train_extractor_then_postprocessor_twice_then_validate(tiny_trained_run, run_oml, tmp_path):
    train, extractor_ckpt = tiny_trained_run.stdout, tiny_trained_run.best_checkpoint
    extractor_metrics = dict(LAST_VALUE_ROW.findall(train))  # one epoch: the last is the best, in best.ckpt
    assert len(extractor_metrics) == 5

    postprocessing = [
        "train-postprocessor",
        "max_epochs=1",
        f"logs_root={tmp_path / 'postprocessing'}",
        NO_PROGRESS_BAR,
        f"transforms_train.args.im_size={TINY}",
        f"transforms_extraction.args.im_size={TINY}",
        f"extractor.args.weights={extractor_ckpt}",
    ]
    first = _ok(run_oml(*postprocessing))
    cache_dir = tmp_path / "postprocessing" / "embeddings_cache"
    cache_files = sorted(cache_dir.iterdir())
    assert [p.name.rpartition("_")[0] for p in cache_files] == ["embeddings_train", "embeddings_validation"]
    for path, split, n in zip(cache_files, ("train", "validation"), (128, 64)):
        assert f"Embeddings of the {split} split ({n} items) computed and cached to {path}" in first
        assert torch.load(path, weights_only=True)["embeddings"].shape == (n, 512)
    before, after = _before_and_after(first)
    # the same weights, transforms and data as the extractor's own validation: its metrics
    assert before == extractor_metrics
    # re-ranking the top 5 reorders them only: what depends on the set of the top 5 (or on no ranking) is kept
    assert set(after) == set(before)
    for key in ("OVERALL/cmc/5", "OVERALL/precision/5", "OVERALL/pcf/0.5"):
        assert after[key] == before[key]
    (run_dir,) = [p for p in (tmp_path / "postprocessing").iterdir() if p.name.endswith("_postprocessing")]
    best, last = run_dir / "checkpoints" / "best.ckpt", run_dir / "checkpoints" / "last.ckpt"
    assert best.is_file() and last.is_file()
    assert f"Best checkpoint:  {best}" in first
    state = torch.load(best, map_location="cpu", weights_only=True)["state_dict"]
    # the default re-ranker, a trivial_distance_siamese: its own ResNet18 only, fine-tuned
    assert all(key.startswith("model.extractor.model.") for key in state)
    assert state["model.extractor.model.conv1.weight"].shape == (64, 3, 7, 7)
    assert list(run_dir.rglob("events.out.tfevents.*"))

    # a second run reads the cache (the extractor does not run) and trains exactly as the first did
    modified = [p.stat().st_mtime_ns for p in cache_files]
    second = _ok(run_oml(*postprocessing))
    for path, split, n in zip(cache_files, ("train", "validation"), (128, 64)):
        assert f"Embeddings of the {split} split ({n} items) loaded from the cache {path}" in second
    assert "computed" not in second
    assert [p.stat().st_mtime_ns for p in sorted(cache_dir.iterdir())] == modified
    assert _before_and_after(second) == (before, after)

    validate = _ok(
        run_oml(
            "validate-postprocessor",
            f"logs_root={tmp_path / 'postprocessing'}",  # the same embeddings_cache_dir
            NO_PROGRESS_BAR,
            "log_images=true",
            f"transforms_val.args.im_size={TINY}",
            f"extractor.args.weights={extractor_ckpt}",
            f"postprocessor.args.pairwise_model.args.weights={best}",
        )
    )
    assert f"Embeddings of the validation split (64 items) loaded from the cache {cache_files[1]}" in validate
    # the trained model re-ranks as it did in the validation of its (single) epoch
    assert _before_and_after(validate) == (before, after)
    (validation_dir,) = (tmp_path / "postprocessing").glob("*_postprocessor_validation")
    figures = sorted(p.name for p in (validation_dir / "figures").glob("*.png"))
    assert figures == [f"top_5_worst_by_OVERALL_{m}.png" for m in ("cmc_1", "cmc_5", "map_5", "precision_5")]


@pytest.mark.slow
def test_the_default_demo_improves_cmc_1_over_the_extractor(tmp_path, oml_cache_dir, monkeypatch):
    """`oml train-postprocessor` as it is (random extractor weights, 64 px images, 2 epochs): re-ranking the top 5
    with the trained re-ranker lifts cmc@1 (0.4844 -> 0.6094; 0.4531 -> 0.5938 with seed 1 or 2). The former
    default, a concat_siamese that learns nothing in 2 epochs on a CPU, shuffled the top 5 (0.4844 -> 0.2812)."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    cfg = compose_config("postprocessor_training_pipeline", [f"logs_root={tmp_path}", NO_PROGRESS_BAR])
    result = postprocessor_training_pipeline(cfg)
    before, after = result.metrics_before, result.metrics
    assert after["OVERALL/cmc/1"] > before["OVERALL/cmc/1"], (before, after)
    assert after["OVERALL/cmc/5"] == before["OVERALL/cmc/5"]  # the top 5 reordered only


# --------------------------------------------------------------------------------- the embeddings cache
#: The number of images every ``CountingExtractor`` has embedded, across instances.
EMBEDDED: list[int] = []


class CountingExtractor(IExtractor):
    """Embeds an image as its mean per channel times a scale read from ``weights`` (1 without); counts."""

    def __init__(self, weights: str | None = None) -> None:
        super().__init__()
        scale = torch.load(weights, weights_only=True) if weights is not None else torch.ones(())
        self.scale = nn.Parameter(scale)

    @property
    def feat_dim(self) -> int:
        return 3

    def forward(self, x: Tensor) -> Tensor:
        EMBEDDED.append(len(x))
        return x.mean(dim=(2, 3)) * self.scale


class CountingPlugin:
    @hookimpl
    def oml_register_extractors(self, register):
        register("counting", CountingExtractor)


def test_cached_embeddings_are_read_back_until_weights_or_transforms_change(tmp_path, oml_cache_dir):
    registry = Registry([CountingPlugin()])
    root = get_mock_dataset_root(oml_cache_dir)
    df = read_dataframe(root, "df.csv")
    df_val = df[df["split"] == "validation"].reset_index(drop=True)
    transforms = {"name": "norm_resize", "args": {"im_size": 8}}
    dataset = ImageQueryGalleryLabeledDataset(
        df_val, dataset_root=root, transform=registry.build("transforms", transforms)
    )
    weights = tmp_path / "scale.pt"
    torch.save(torch.tensor(1.0), weights)
    trainer_args = {**TRAINER_DEFAULTS, "accelerator": "cpu", "devices": 1, "enable_progress_bar": False}

    def embeddings(weights_path, transforms_spec=transforms, cache_dir=tmp_path / "cache"):
        cfg = {
            "dataframe_name": "df.csv",
            "bs_val": 16,
            "postprocessor": "pairwise_reranker",
            "extractor": {"name": "counting", "args": {"weights": str(weights_path)}},
            "seed": 0,
            "precision": 32,
            "num_workers": 0,
            "embeddings_cache_dir": cache_dir,
        }
        config = validate_config(cfg, "postprocessor_validation_pipeline")
        cache = CachedEmbeddings(registry, config, transforms_spec, root / "df.csv", trainer_args, 16, "test")
        return cache(dataset, "validation"), cache.sources[0]

    EMBEDDED.clear()
    computed, source = embeddings(weights)
    assert sum(EMBEDDED) == 64 and not source.from_cache and source.cache_file.is_file()
    expected = torch.stack([dataset[i]["input_tensors"].mean(dim=(1, 2)) for i in range(64)])
    assert torch.allclose(computed, expected, atol=1e-6)

    EMBEDDED.clear()
    loaded, again = embeddings(weights)
    assert EMBEDDED == [] and again.from_cache and again.cache_file == source.cache_file
    assert torch.equal(loaded, computed)

    copy = tmp_path / "elsewhere" / "scale.pt"  # the same content under another path: the same key
    copy.parent.mkdir()
    copy.write_bytes(weights.read_bytes())
    assert embeddings(copy)[1].from_cache and EMBEDDED == []

    torch.save(torch.tensor(2.0), weights)  # the checkpoint rewritten in place: a new key
    doubled, rewritten = embeddings(weights)
    assert not rewritten.from_cache and rewritten.cache_file != source.cache_file and sum(EMBEDDED) == 64
    assert torch.allclose(doubled, 2 * computed)

    EMBEDDED.clear()
    other_transforms = {"name": "norm_resize", "args": {"im_size": 4}}
    assert not embeddings(weights, other_transforms)[1].from_cache and sum(EMBEDDED) == 64

    EMBEDDED.clear()
    rewritten.cache_file.write_bytes(b"not a torch file")
    with pytest.warns(UserWarning, match="unreadable embeddings cache"):
        recomputed, _ = embeddings(weights)
    assert sum(EMBEDDED) == 64 and torch.equal(recomputed, doubled)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert embeddings(weights)[1].from_cache  # written again, readable again

    EMBEDDED.clear()
    for _ in range(2):  # embeddings_cache_dir null: computed every time, written nowhere
        assert embeddings(weights, cache_dir=None)[1] == EmbeddingsSource(
            "validation", None, from_cache=False
        )
    assert EMBEDDED and sum(EMBEDDED) == 2 * 64


def test_the_typed_config_validates_as_the_dict_and_shares_its_embeddings_cache(tmp_path, oml_cache_dir):
    """The config enters once: the object ``validate_config`` makes of the dict gives the same metrics, before
    and after re-ranking, and the same cache key (its run reads the embeddings the dict's run cached)."""
    registry = Registry()
    tiny = {"name": "tiny_conv", "args": {"feat_dim": 16}}
    cfg = OmegaConf.to_container(
        compose_config(
            "postprocessor_validation_pipeline",
            [f"logs_root={tmp_path}", NO_PROGRESS_BAR, f"transforms_val.args.im_size={TINY}", "bs_val=16"],
            registry=registry,
        ),
        resolve=True,
    )
    cfg["dataset_root"] = str(get_mock_dataset_root(oml_cache_dir))
    cfg["extractor"] = tiny
    cfg["postprocessor"]["args"]["pairwise_model"]["args"]["extractor"] = tiny
    config = validate_config(cfg, "postprocessor_validation_pipeline")
    assert isinstance(config, PostprocessorValidationConfig)
    assert config.embeddings_cache_dir == str(tmp_path / "embeddings_cache")
    from_dict = postprocessor_validation_pipeline(cfg, registry=registry)
    from_object = postprocessor_validation_pipeline(config, registry=registry)
    assert not from_dict.embeddings.from_cache and from_object.embeddings.from_cache
    assert from_object.embeddings.cache_file == from_dict.embeddings.cache_file
    assert from_object.metrics_before == from_dict.metrics_before
    assert from_object.metrics == from_dict.metrics and "OVERALL/cmc/1" in from_object.metrics


# ----------------------------------------------------------------------------------------- the module
class ScaledDistance(IPairwiseModel):
    """Logits ``w * mean|x1 - x2|``; remembers its last inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(0.1))
        self.inputs: tuple[Tensor, Tensor] | None = None

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        self.inputs = (x1, x2)
        return self.w * (x1 - x2).abs().mean(dim=(1, 2, 3))

    def predict(self, x1: Tensor, x2: Tensor) -> Tensor:
        return torch.sigmoid(self.forward(x1, x2))


class FixedPairs:
    """Returns the given pairs whatever the batch; remembers what it was given."""

    def __init__(self, ids1: list[int], ids2: list[int], is_negative: list[bool]) -> None:
        self.pairs = (torch.tensor(ids1), torch.tensor(ids2), torch.tensor(is_negative))
        self.given: tuple[Tensor, Tensor] | None = None

    def sample(self, features: Tensor, labels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        self.given = (features, labels)
        return self.pairs


@pytest.mark.filterwarnings("ignore:You are trying to `self.log\\(\\)` but the `self.trainer`")
def test_pairwise_module_feeds_the_images_of_the_pairs_mined_on_the_embeddings_to_bce():
    images = torch.arange(4 * 3 * 2 * 2, dtype=torch.float32).reshape(4, 3, 2, 2)
    batch = {
        "input_tensors": images,
        "embeddings": torch.randn(4, 5),
        "labels": torch.tensor([0, 0, 1, 1]),
        "idx": torch.arange(4),
    }
    model, miner = ScaledDistance(), FixedPairs([0, 0, 1], [1, 2, 3], [False, True, True])
    module = PairwiseModule(model, miner, nn.BCEWithLogitsLoss(), torch.optim.SGD(model.parameters(), lr=0.1))
    loss = module.training_step(batch, 0)

    assert miner.given[0] is batch["embeddings"] and miner.given[1] is batch["labels"]
    assert torch.equal(model.inputs[0], images[[0, 0, 1]]) and torch.equal(model.inputs[1], images[[1, 2, 3]])
    # |images[i] - images[j]| is 12 * |i - j| everywhere: logits 0.1 * 12 * [1, 2, 2] = [1.2, 2.4, 2.4];
    # targets [0, 1, 1]: (log(1 + e^1.2) + 2 * log(1 + e^-2.4)) / 3
    assert torch.isclose(loss, torch.tensor(0.5457), atol=1e-4)

    assert module.validation_step(batch, 0) == {"embeddings": batch["embeddings"], "idx": batch["idx"]}
    no_pairs = PairwiseModule(model, FixedPairs([], [], []), nn.BCEWithLogitsLoss())
    assert no_pairs.training_step(batch, 0) is None  # no optimisation step on a batch without pairs


class FirstPairMiner(IPairsMiner):
    """A plugin's pair miner: the pair (0, 1) only, negative when their labels differ."""

    def __init__(self, negative_label_offset: int = 0) -> None:
        self.offset = negative_label_offset

    def sample(self, features: Tensor, labels: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return (
            torch.tensor([0]),
            torch.tensor([1]),
            torch.tensor([bool(labels[0] != labels[1] + self.offset)]),
        )


class PairMinerPlugin:
    @hookimpl
    def oml_register_pairs_miners(self, register):
        register("first_pair", FirstPairMiner)


def test_the_pair_miner_is_the_configs_or_pairs_with_hard_pairs_mining():
    from oml_losses import PairsMiner

    registry = Registry([PairMinerPlugin()], allow=["oml_losses"])
    default = build_pairs_miner(None, False, registry)
    assert type(default) is PairsMiner and default.hard_mining is False
    spec = {"name": "first_pair", "args": {"negative_label_offset": 1}}
    own = build_pairs_miner(spec, True, registry)
    assert type(own) is FirstPairMiner and own.offset == 1
    ids1, ids2, is_negative = own.sample(torch.zeros(2, 3), torch.tensor([4, 3]))
    assert (ids1.tolist(), ids2.tolist(), is_negative.tolist()) == ([0], [1], [False])  # 4 == 3 + 1


# ---------------------------------------------------------------------------------------- bad configs
@pytest.mark.parametrize(
    "command, overrides, message",
    [
        (
            "train-postprocessor",
            ["+hard_pair_mining=false"],
            "postprocessor_training_pipeline: unknown config key 'hard_pair_mining'; did you mean "
            "'hard_pairs_mining'?",
        ),
        (
            "train-postprocessor",
            ["pairwise_model.name=concat_siames"],
            "Unknown pairwise_model 'concat_siames'. Did you mean: concat_siamese",
        ),
        (
            "train-postprocessor",
            ["pairwise_model.args.weights=/no/such/siamese.ckpt"],
            "postprocessor_training_pipeline: config key 'pairwise_model' ('trivial_distance_siamese'): "
            "Checkpoint file not found: '/no/such/siamese.ckpt'",
        ),
        (
            "train-postprocessor",
            [
                "postprocessor.args.pairwise_model={name: linear_siamese, args: {feat_dim: 8, identity_init: true}}"
            ],
            "postprocessor_training_pipeline: postprocessor.args.pairwise_model differs from pairwise_model",
        ),
        (
            "train-postprocessor",
            ["postprocessor.name=constant_thresholding"],
            "postprocessor_training_pipeline: config key 'postprocessor' must name a pairwise post-processor",
        ),
        (
            "train-postprocessor",
            ["hard_pairs_mining=hard"],
            "hard_pairs_mining: expected true or false, got 'hard'",
        ),
        (
            "train-postprocessor",
            ["pairs_miner={name: pair, args: {}}"],
            "Unknown pairs_miner 'pair'. Did you mean: pairs",
        ),
        (
            "train-postprocessor",
            ["pairs_miner={name: pairs, args: {hard: true}}"],
            "pairs_miner 'pairs' (oml_losses.miners.pairs:PairsMiner, from oml_losses (oml-losses 0.1.0)) got "
            "unexpected argument(s) ['hard']; it accepts: hard_mining",
        ),
        (
            "train-postprocessor",
            ["devices=2"],
            "postprocessor_training_pipeline: devices=2, but this pipeline runs on one device",
        ),
        (
            "validate-postprocessor",
            ["extractor.args.weights=/no/such/best.ckpt"],
            "postprocessor_validation_pipeline: config key 'extractor' ('resnet'): Checkpoint file not found: "
            "'/no/such/best.ckpt'",
        ),
        (
            "validate-postprocessor",
            ["postprocessor.args.pairwise_model.args.weights=/no/such/siamese.ckpt"],
            "postprocessor_validation_pipeline: config key 'postprocessor.args.pairwise_model' "
            "('trivial_distance_siamese'): Checkpoint file not found: '/no/such/siamese.ckpt'",
        ),
        (
            "validate-postprocessor",
            ["~postprocessor.args.pairwise_model"],
            "postprocessor_validation_pipeline: postprocessor.args.pairwise_model is missing",
        ),
    ],
)
def test_bad_configs_exit_2_with_one_line(
    tmp_path, oml_cache_dir, monkeypatch, capsys, command, overrides, message
):
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    assert main([command, f"logs_root={tmp_path}", NO_PROGRESS_BAR, *overrides]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"oml {command}: error: ") and message in err
    assert err.count("\n") == 1
    assert not any(tmp_path.iterdir())  # no run directory, no cache file
