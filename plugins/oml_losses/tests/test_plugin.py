"""The oml_losses plugin through the registry."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from oml_losses import AllTripletsMiner, TripletLoss, TripletLossPlain, TripletLossWithMiner

from oml_core.interfaces.miners import IPairsMiner, ITripletsMinerInBatch
from oml_core.registry import Registry


def make_registry() -> Registry:
    return Registry(allow=["oml_losses"], strict=True)


def test_names_and_descriptions() -> None:
    registry = make_registry()
    assert {"triplet", "triplet_plain", "triplet_with_miner"} <= set(registry.names("loss"))
    assert "all_triplets" in registry.names("miner")
    for kind, name in [("loss", "triplet"), ("loss", "triplet_plain"), ("loss", "triplet_with_miner")]:
        info = registry.describe(kind, name)
        assert info["distribution"] == "oml-losses" and info["description"]
    assert (
        registry.describe("miner", "all_triplets")["factory"]
        == "oml_losses.miners.inbatch_all_tri:AllTripletsMiner"
    )


def test_build_triplet_with_miner_from_nested_spec() -> None:
    cfg = {
        "name": "triplet_with_miner",
        "args": {"margin": 0.1, "miner": {"name": "all_triplets", "args": {}}},
    }
    loss = make_registry().build("loss", cfg)
    assert isinstance(loss, TripletLossWithMiner)
    assert isinstance(loss.miner, AllTripletsMiner)
    assert loss.tri_loss.margin == 0.1


def test_build_miner_with_args_and_plain_losses() -> None:
    registry = make_registry()
    miner = registry.build("miner", {"name": "all_triplets", "args": {"max_output_triplets": 100, "seed": 3}})
    assert miner.max_output_triplets == 100
    assert isinstance(registry.build("loss", {"name": "triplet", "args": {"margin": None}}), TripletLoss)
    plain = registry.build("loss", {"name": "triplet_plain", "args": {"margin": 0.2, "reduction": "sum"}})
    assert isinstance(plain, TripletLossPlain)


def test_plugin_module_imports_no_loss_module() -> None:
    code = (
        "import sys, oml_losses.plugin; "
        "print(sorted(m for m in sys.modules if m.startswith('oml_losses.') and m != 'oml_losses.plugin'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


LOSS_NAMES = [
    "triplet",
    "triplet_plain",
    "triplet_with_miner",
    "surrogate_precision",
    "arcface",
    "mlp_arcface",
    "contrastive",
    "multi_similarity",
    "proxy_anchor",
    "supcon",
]
MINER_NAMES = [
    "all_triplets",
    "hard_triplets",
    "n_hard_triplets",
    "hard_cluster",
    "triplets_with_memory",
    "miner_with_bank",
]


def test_every_oml_name_is_registered_and_exported() -> None:
    import oml_losses

    registry = make_registry()
    assert registry.names("loss") == sorted(LOSS_NAMES)
    assert registry.names("miner") == sorted(MINER_NAMES)
    assert registry.names("pairs_miner") == ["pairs"]
    for kind in ("loss", "miner", "pairs_miner"):
        for name in registry.names(kind):
            factory = registry.get(kind, name).load()
            assert getattr(oml_losses, factory.__name__) is factory  # exported at the top level
    assert oml_losses.label_smoothing.__module__ == "oml_core.functional.label_smoothing"


def _batch(n_labels: int = 4, n_instances: int = 4, dim: int = 384) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(n_labels * n_instances, dim, generator=generator, requires_grad=True)
    return features, torch.arange(n_labels).repeat_interleave(n_instances)


@pytest.mark.parametrize("name", MINER_NAMES)
def test_every_miner_builds_from_its_default_config_and_mines(name: str) -> None:
    registry = make_registry()
    miner = registry.build("miner", registry.default_config("miner", name))
    features, labels = _batch()
    anchor, positive, negative, *is_original = miner.sample(features, labels)
    assert anchor.shape == positive.shape == negative.shape and anchor.shape[1] == 384 and len(anchor) > 0
    if isinstance(miner, ITripletsMinerInBatch):  # index triplets: positives share the anchor's label
        ids_a, ids_p, ids_n = miner._sample(features, labels)
        assert bool((labels[ids_a] == labels[ids_p]).all()) and bool((labels[ids_a] != labels[ids_n]).all())


def test_the_pair_miner_builds_from_its_default_config_and_mines_hard_pairs() -> None:
    registry = make_registry()
    miner = registry.build("pairs_miner", registry.default_config("pairs_miner", "pairs"))
    assert isinstance(miner, IPairsMiner) and miner.hard_mining is True
    # labels [0, 0, 1, 1] on a line at 0, 1, 3, 7: hardest triplets (0, 1, 2), (1, 0, 2), (2, 3, 1), (3, 2, 1)
    features = torch.tensor([[0.0], [1.0], [3.0], [7.0]])
    ids1, ids2, is_negative = miner.sample(features, torch.tensor([0, 0, 1, 1]))
    assert list(zip(ids1.tolist(), ids2.tolist(), is_negative.tolist())) == [
        (0, 1, False),
        (2, 3, False),
        (0, 2, True),
        (1, 2, True),
        (1, 3, True),
    ]
    all_pairs = registry.build("pairs_miner", {"name": "pairs", "args": {"hard_mining": False}})
    assert len(all_pairs.sample(features, [0, 0, 1, 1])[0]) == 2 + 4  # every positive and negative pair


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_every_loss_builds_from_its_default_config_and_trains(name: str) -> None:
    registry = make_registry()
    cfg = registry.default_config("loss", name)
    loss_fn = registry.build("loss", cfg)
    features, labels = _batch(dim=cfg["args"].get("in_features", 384))
    if name == "triplet":
        loss = loss_fn(features[0::3][:5], features[1::3][:5], features[2::3][:5])
    elif name == "triplet_plain":
        loss = loss_fn(features[:15])
    else:
        labels = labels % cfg["args"]["num_classes"] if "num_classes" in cfg["args"] else labels
        loss = loss_fn(features, labels)
    loss.backward()
    assert loss.ndim == 0 and torch.isfinite(loss) and float(loss.detach()) > 0
    assert features.grad is not None and torch.isfinite(features.grad).all() and features.grad.abs().sum() > 0
