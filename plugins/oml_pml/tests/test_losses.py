"""The PML losses built through the registry against PML's classes called directly (the independent reference)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from oml_pml import PMLLoss, PMLMiner
from oml_pml import losses as pml_losses
from oml_pml import miners as pml_miners
from oml_pml.names import LOSS_NAMES, MINER_NAMES
from pytorch_metric_learning import distances, losses, miners, reducers, regularizers

from oml_core.interfaces.miners import ITripletsMinerInBatch
from oml_core.lightning.pipelines.shared.training import check_criterion_fits
from oml_core.registry import (
    SELF_BUILT_ARGS_ATTR,
    ConfigError,
    Registry,
    UnexpectedArgumentError,
    UnknownNameError,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore:Values of Tp or Tn are too high"),
    pytest.mark.filterwarnings("ignore:__array_wrap__ must accept context:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Using a non-tuple sequence for multidimensional indexing"),
]

Batch = Callable[..., tuple[torch.Tensor, torch.Tensor]]


def seeded(build: Callable[[], Any], seed: int = 0) -> Any:
    """``build()`` with the global RNG seeded (PML initialises class weights and proxies from it), restored
    afterwards."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return build()


def loss_and_grad(
    loss_fn: Callable[..., torch.Tensor], features: torch.Tensor, *args: Any
) -> tuple[Any, Any]:
    """The loss of a fresh leaf copy of ``features`` and its gradient, the forward pass under a fixed seed."""
    leaf = features.detach().clone().requires_grad_(True)
    loss = seeded(lambda: loss_fn(leaf, *args), seed=1)
    loss.backward()
    return loss.detach(), leaf.grad


def reference(name: str, args: dict[str, Any]) -> torch.nn.Module:
    """PML's class of the registered loss ``name`` built directly from the default config's ``args``."""
    args = {k: v for k, v in args.items() if k != "miner"}
    if name == "pml_cross_batch_memory":
        inner = args.pop("loss")
        return losses.CrossBatchMemory(getattr(losses, LOSS_NAMES[inner["name"]])(**inner["args"]), **args)
    return getattr(losses, LOSS_NAMES[name])(**args)


@pytest.mark.parametrize("name", sorted(LOSS_NAMES))
def test_default_config_equals_pml_called_directly(name: str, registry: Registry, batch: Batch) -> None:
    cfg = registry.default_config("loss", name)
    criterion = seeded(lambda: registry.build("loss", cfg))
    expected_module = seeded(lambda: reference(name, dict(cfg["args"])))
    assert isinstance(criterion, PMLLoss) and type(criterion.loss) is type(expected_module)
    features, labels = batch()
    loss, grad = loss_and_grad(criterion, features, labels.tolist())  # the wrapper takes a list too
    expected, expected_grad = loss_and_grad(expected_module, features, labels)
    assert loss.ndim == 0 and torch.isfinite(loss)
    torch.testing.assert_close(loss, expected)
    assert torch.isfinite(grad).all() and grad.abs().sum() > 0
    torch.testing.assert_close(grad, expected_grad)
    assert criterion.last_logs == {}  # no miner
    # the PML loss's learnable parameters (class weights, proxies) are the criterion's, for the optimizer
    assert [id(p) for p in criterion.parameters()] == [id(p) for p in criterion.loss.parameters()]


def test_smooth_ap_needs_as_many_labels_as_instances(registry: Registry, batch: Batch) -> None:
    """What the config's comment says: PML's SmoothAPLoss views the batch as instances x labels."""
    criterion = registry.build("loss", registry.default_config("loss", "pml_smooth_ap"))
    features, labels = batch(n_labels=3, n_instances=3, dim=8)
    assert torch.isfinite(criterion(features, labels))
    with pytest.raises(ValueError, match="same number of elements"):
        criterion(features[:5], labels[:5])


def test_learnable_parameters_go_to_the_criterion(registry: Registry) -> None:
    arcface = registry.build(
        "loss", {"name": "pml_arcface", "args": {"num_classes": 10, "embedding_size": 8}}
    )
    assert [tuple(p.shape) for p in arcface.parameters()] == [(8, 10)]
    margin = registry.build("loss", {"name": "pml_margin", "args": {"learn_beta": True, "num_classes": 6}})
    assert [tuple(p.shape) for p in margin.parameters()] == [(6,)] and margin.num_classes == 6
    assert list(registry.build("loss", "pml_contrastive").parameters()) == []


def test_miner_and_distance_specs_equal_pml_by_hand(registry: Registry, batch: Batch) -> None:
    features, labels = batch()
    spec = {"name": "TripletMarginMiner", "args": {"margin": 0.1, "type_of_triplets": "semihard"}}
    # called directly: every component as a {name, args} spec
    direct = pml_losses.pml_triplet_margin(
        margin=0.1,
        distance={"name": "CosineSimilarity", "args": {}},
        miner={**spec, "args": {**spec["args"], "distance": {"name": "CosineSimilarity"}}},
    )
    # through the registry: the miner by its PML class name (an oml miner), the distances by class name
    built = registry.build(
        "loss",
        {
            "name": "pml_triplet_margin",
            "args": {
                "margin": 0.1,
                "distance": "CosineSimilarity",
                "miner": {"name": spec["name"], "args": {**spec["args"], "distance": "CosineSimilarity"}},
            },
        },
    )
    ref_miner = miners.TripletMarginMiner(
        margin=0.1, type_of_triplets="semihard", distance=distances.CosineSimilarity()
    )
    ref_loss = losses.TripletMarginLoss(margin=0.1, distance=distances.CosineSimilarity())
    expected, expected_grad = loss_and_grad(lambda f, y: ref_loss(f, y, ref_miner(f, y)), features, labels)
    assert ref_miner.num_triplets > 0
    for criterion in (direct, built):
        assert isinstance(criterion.miner, miners.TripletMarginMiner)
        assert isinstance(criterion.miner.distance, distances.CosineSimilarity)
        loss, grad = loss_and_grad(criterion, features, labels)
        torch.testing.assert_close(loss, expected)
        torch.testing.assert_close(grad, expected_grad)
        assert criterion.last_logs == {"num_triplets": ref_miner.num_triplets}


def test_pair_miner_logs_pair_counts(registry: Registry, batch: Batch) -> None:
    features, labels = batch()
    criterion = registry.build(
        "loss",
        {
            "name": "pml_multi_similarity",
            "args": {"miner": {"name": "MultiSimilarityMiner", "args": {"epsilon": 0.1}}},
        },
    )
    ref_miner, ref_loss = miners.MultiSimilarityMiner(epsilon=0.1), losses.MultiSimilarityLoss()
    expected, _ = loss_and_grad(lambda f, y: ref_loss(f, y, ref_miner(f, y)), features, labels)
    loss, _ = loss_and_grad(criterion, features, labels)
    torch.testing.assert_close(loss, expected)
    assert criterion.last_logs == {
        "num_pos_pairs": ref_miner.num_pos_pairs,
        "num_neg_pairs": ref_miner.num_neg_pairs,
    }
    assert 0 < ref_miner.num_pos_pairs <= 4 * 4 * 3


def test_reducer_and_regularizer_specs(batch: Batch) -> None:
    features, labels = batch()
    criterion = pml_losses.pml_contrastive(
        pos_margin=0.1,
        reducer={"name": "ThresholdReducer", "args": {"low": 0.5}},
        embedding_regularizer="LpRegularizer",
        embedding_reg_weight=0.01,
        miner="pml_batch_hard",  # a registered pml_ miner name works too
    )
    ref_miner = miners.BatchHardMiner()
    ref_loss = losses.ContrastiveLoss(
        pos_margin=0.1,
        reducer=reducers.ThresholdReducer(low=0.5),
        embedding_regularizer=regularizers.LpRegularizer(),
        embedding_reg_weight=0.01,
    )
    expected, expected_grad = loss_and_grad(lambda f, y: ref_loss(f, y, ref_miner(f, y)), features, labels)
    loss, grad = loss_and_grad(criterion, features, labels)
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(grad, expected_grad)
    assert criterion.last_logs == {"num_triplets": 16}  # one hardest triplet per anchor


def test_weight_regularizer_spec(batch: Batch) -> None:
    features, labels = batch(dim=8)
    args = {"num_classes": 4, "embedding_size": 8, "weight_reg_weight": 0.5}
    criterion = seeded(
        lambda: pml_losses.pml_cosface(**args, weight_regularizer={"name": "RegularFaceRegularizer"})
    )
    expected_module = seeded(
        lambda: losses.CosFaceLoss(**args, weight_regularizer=regularizers.RegularFaceRegularizer())
    )
    torch.testing.assert_close(
        loss_and_grad(criterion, features, labels), loss_and_grad(expected_module, features, labels)
    )


class FirstTriplets(ITripletsMinerInBatch):
    """An oml in-batch miner: the triplets (0, 1, 4) and (5, 4, 0)."""

    def _sample(self, features: torch.Tensor, labels: list[int]) -> tuple[list[int], list[int], list[int]]:
        return [0, 5], [1, 4], [4, 0]


def test_an_oml_in_batch_miner_gives_triplet_indices(batch: Batch) -> None:
    features, labels = batch()
    criterion = pml_losses.pml_triplet_margin(margin=0.5, miner=FirstTriplets())
    ref = losses.TripletMarginLoss(margin=0.5)
    indices = (torch.tensor([0, 5]), torch.tensor([1, 4]), torch.tensor([4, 0]))
    expected, _ = loss_and_grad(lambda f, y: ref(f, y, indices), features, labels)
    loss, _ = loss_and_grad(criterion, features, labels)
    torch.testing.assert_close(loss, expected)
    assert criterion.last_logs == {"num_triplets": 2}


@pytest.mark.parametrize("name", sorted(MINER_NAMES))
def test_every_miner_from_its_default_config_equals_pml_and_is_an_oml_triplet_miner(
    name: str, registry: Registry, batch: Batch
) -> None:
    features, labels = batch(dim=8)
    cfg = registry.default_config("miner", name)
    miner = registry.build("miner", cfg)
    assert isinstance(miner, PMLMiner) and isinstance(miner, ITripletsMinerInBatch)
    expected = seeded(lambda: getattr(miners, MINER_NAMES[name])(**cfg["args"])(features, labels))
    indices = seeded(lambda: miner(features, labels))  # PML's own indices tuple
    assert len(indices) == len(expected) and all(torch.equal(i, e) for i, e in zip(indices, expected))
    ids_a, ids_p, ids_n = seeded(lambda: miner._sample(features, labels.tolist()))
    assert len(ids_a) > 0
    assert bool((labels[ids_a] == labels[ids_p]).all()) and bool((labels[ids_a] != labels[ids_n]).all())
    anchors, positives, negatives = seeded(lambda: miner.sample(features, labels))
    torch.testing.assert_close(anchors, features[ids_a])
    torch.testing.assert_close(negatives, features[ids_n])
    assert positives.shape == (len(ids_a), 8)


def test_cross_batch_memory_with_a_miner(registry: Registry, batch: Batch) -> None:
    cfg = {
        "name": "pml_cross_batch_memory",
        "args": {
            "loss": {"name": "pml_contrastive", "args": {}},
            "embedding_size": 384,
            "memory_size": 32,
            "miner": {"name": "MultiSimilarityMiner", "args": {"epsilon": 0.1}},
        },
    }
    criterion = registry.build("loss", cfg)
    ref_miner = miners.MultiSimilarityMiner(epsilon=0.1)
    ref = losses.CrossBatchMemory(
        losses.ContrastiveLoss(), embedding_size=384, memory_size=32, miner=ref_miner
    )
    for seed in (0, 1, 2):  # the second and third batches are compared with the memory of the first ones
        features, labels = batch(seed=seed)
        torch.testing.assert_close(
            loss_and_grad(criterion, features, labels), loss_and_grad(ref, features, labels)
        )
        assert criterion.last_logs == {
            "num_pos_pairs": ref_miner.num_pos_pairs,
            "num_neg_pairs": ref_miner.num_neg_pairs,
        }
    assert criterion.in_features == 384 and not hasattr(criterion, "num_classes")
    direct = pml_losses.pml_cross_batch_memory(loss="ContrastiveLoss", embedding_size=384)
    assert isinstance(direct.loss.loss, losses.ContrastiveLoss)


@pytest.mark.parametrize(
    ("name", "args", "in_features", "num_classes"),
    [
        ("pml_arcface", {"num_classes": 16, "embedding_size": 384}, 384, 16),
        ("pml_sub_center_arcface", {"num_classes": 16, "embedding_size": 384, "sub_centers": 2}, 384, 16),
        ("pml_proxy_anchor", {"num_classes": 16, "embedding_size": 384}, 384, 16),
        ("pml_proxy_nca", {"num_classes": 16, "embedding_size": 384}, 384, 16),
        ("pml_normalized_softmax", {"num_classes": 16, "embedding_size": 384}, 384, 16),
        ("pml_softtriple", {"num_classes": 16, "embedding_size": 384, "centers_per_class": 2}, 384, 16),
        ("pml_p2sgrad", {"num_classes": 16, "descriptors_dim": 384}, 384, 16),
        ("pml_contrastive", {}, None, None),
        ("pml_multi_similarity", {}, None, None),
        ("pml_margin", {}, None, None),
    ],
)
def test_in_features_and_num_classes(
    name: str, args: dict[str, Any], in_features: int | None, num_classes: int | None, registry: Registry
) -> None:
    criterion = registry.build("loss", {"name": name, "args": args})
    assert getattr(criterion, "in_features", None) == in_features
    assert getattr(criterion, "num_classes", None) == num_classes
    if in_features is None:
        assert not hasattr(criterion, "in_features") and not hasattr(criterion, "num_classes")
    check_criterion_fits(criterion, 384, list(range(16)), "test")  # fits
    if in_features is not None:
        argument = "descriptors_dim" if name == "pml_p2sgrad" else "embedding_size"
        with pytest.raises(
            ConfigError, match=rf"^test: criterion.args.{argument}=384, but the extractor gives 128"
        ):
            check_criterion_fits(criterion, 128, list(range(16)), "test")
        with pytest.raises(ConfigError, match="num_classes=16"):
            check_criterion_fits(criterion, 384, list(range(17)), "test")


def test_wrong_embedding_size_is_rejected_by_the_pipeline_check(registry: Registry) -> None:
    criterion = registry.build(
        "loss", {"name": "pml_cosface", "args": {"num_classes": 5, "embedding_size": 64}}
    )
    with pytest.raises(
        ConfigError,
        match="criterion.args.embedding_size=64, but the extractor gives 384-dimensional features: set "
        "criterion.args.embedding_size=384",
    ):
        check_criterion_fits(criterion, 384, [0, 1, 2, 3, 4], "extractor_training_pipeline")


def test_unknown_class_in_a_nested_spec_names_the_argument_and_the_close_name(registry: Registry) -> None:
    with pytest.raises(ValueError, match=r"distance: 'CosineSimilarty' .* Did you mean: CosineSimilarity\?"):
        pml_losses.pml_contrastive(distance={"name": "CosineSimilarty", "args": {}})
    with pytest.raises(
        ValueError, match=r"reducer: 'MeanReduce' .* Did you mean: MeanReducer.* Known names: .*SumReducer"
    ):
        registry.build("loss", {"name": "pml_contrastive", "args": {"reducer": "MeanReduce"}})
    with pytest.raises(ValueError, match=r"miner\.args\.distance: 'LpDistanc' .* Did you mean: LpDistance"):
        pml_losses.pml_contrastive(
            miner={"name": "PairMarginMiner", "args": {"distance": {"name": "LpDistanc"}}}
        )
    with pytest.raises(
        ValueError, match=r"miner: 'MultiSimilarityMinr' .* Did you mean: MultiSimilarityMiner"
    ):
        pml_losses.pml_contrastive(miner={"name": "MultiSimilarityMinr"})
    with pytest.raises(
        UnknownNameError, match=r"Unknown miner 'MultiSimilarityMinr'.*Did you mean: MultiSimilarityMiner"
    ):
        registry.build(
            "loss", {"name": "pml_contrastive", "args": {"miner": {"name": "MultiSimilarityMinr"}}}
        )


def test_malformed_components() -> None:
    with pytest.raises(ValueError, match="distance: expected a class name or"):
        pml_losses.pml_contrastive(distance={"name": "LpDistance", "kwargs": {}})
    with pytest.raises(TypeError, match="distance: expected a BaseDistance"):
        pml_losses.pml_contrastive(distance=3)
    with pytest.raises(TypeError, match="miner: expected a PML miner"):
        pml_losses.pml_contrastive(miner=3)
    with pytest.raises(TypeError, match="pml_cross_batch_memory: loss must be a pml_ loss"):
        pml_losses.pml_cross_batch_memory(loss=torch.nn.MSELoss(), embedding_size=8)
    with pytest.raises(ValueError, match="give the miner to the cross-batch memory"):
        pml_losses.pml_cross_batch_memory(
            loss=pml_losses.pml_contrastive(miner="BatchHardMiner"), embedding_size=8
        )
    with pytest.raises(TypeError, match="wraps a loss of pytorch_metric_learning"):
        PMLLoss(torch.nn.MSELoss())


def test_unknown_constructor_argument_lists_the_accepted_ones(registry: Registry) -> None:
    with pytest.raises(
        UnexpectedArgumentError, match=r"\['alpah'\]; it accepts: alpha, beta, base, .*distance.*miner"
    ):
        registry.build("loss", {"name": "pml_multi_similarity", "args": {"alpah": 2}})
    with pytest.raises(UnexpectedArgumentError, match=r"\['miner'\]; it accepts: b, alpha, anneal, variant"):
        registry.build("loss", {"name": "pml_pnp", "args": {"miner": {"name": "BatchHardMiner"}}})
    with pytest.raises(TypeError, match=r"pml_contrastive: .*'margin'.*; it accepts: pos_margin, neg_margin"):
        pml_losses.pml_contrastive(margin=1)
    with pytest.raises(TypeError, match="pml_arcface: missing a required argument: 'num_classes'"):
        pml_losses.pml_arcface(embedding_size=8)
    with pytest.raises(UnexpectedArgumentError, match="it accepts: epsilon, distance, collect_stats"):
        registry.build("miner", {"name": "MultiSimilarityMiner", "args": {"eps": 0.1}})


def test_factories_declare_the_arguments_they_build_themselves() -> None:
    assert getattr(pml_losses.pml_arcface, SELF_BUILT_ARGS_ATTR) == {
        "distance",
        "reducer",
        "embedding_regularizer",
        "weight_regularizer",
    }
    assert getattr(pml_losses.pml_contrastive, SELF_BUILT_ARGS_ATTR) == {
        "distance",
        "reducer",
        "embedding_regularizer",
    }
    assert getattr(pml_miners.pml_batch_hard, SELF_BUILT_ARGS_ATTR) == {"distance"}
    assert "miner" not in getattr(
        pml_losses.pml_contrastive, SELF_BUILT_ARGS_ATTR
    )  # an oml kind: the registry's


def test_distance_reducer_and_regularizer_specs_through_the_registry(
    registry: Registry, batch: Batch
) -> None:
    features, labels = batch()
    criterion = registry.build(
        "loss",
        {
            "name": "pml_contrastive",
            "args": {
                "distance": {"name": "LpDistance", "args": {"p": 1, "normalize_embeddings": False}},
                "reducer": {"name": "AvgNonZeroReducer", "args": {}},
                "embedding_regularizer": {"name": "LpRegularizer", "args": {"p": 2}},
                "miner": {
                    "name": "PairMarginMiner",
                    "args": {"distance": {"name": "CosineSimilarity", "args": {}}},
                },
            },
        },
    )
    assert isinstance(criterion.loss.distance, distances.LpDistance) and criterion.loss.distance.p == 1
    assert isinstance(criterion.miner.distance, distances.CosineSimilarity)
    assert torch.isfinite(criterion(features, labels))


def test_string_specs_through_the_registry_today(registry: Registry) -> None:
    """With the current core, a component of the default arguments can be named by its class name."""
    criterion = registry.build(
        "loss",
        {
            "name": "pml_multi_similarity",
            "args": {"distance": "DotProductSimilarity", "reducer": "SumReducer"},
        },
    )
    assert isinstance(criterion.loss.distance, distances.DotProductSimilarity)
    assert isinstance(criterion.loss.reducer, reducers.SumReducer)


def test_labels_move_to_the_features_device_and_dtype(batch: Batch) -> None:
    features, labels = batch()
    criterion = pml_losses.pml_supcon()
    for given in (labels, labels.tolist(), labels.to(torch.int32)):
        torch.testing.assert_close(criterion(features, given), losses.SupConLoss()(features, labels))
