"""The oml_losses plugin through the registry."""

from __future__ import annotations

import subprocess
import sys

from oml_losses import AllTripletsMiner, TripletLoss, TripletLossPlain, TripletLossWithMiner

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
