"""The oml_pml plugin's registration: names, aliases, lazy imports, signatures and the coverage of PML."""

from __future__ import annotations

import inspect
import subprocess
import sys

import oml_pml
import pytest
import torch
from oml_pml import losses as pml_losses
from oml_pml import miners as pml_miners
from oml_pml.components import constructor_parameters
from oml_pml.names import LEFT_OUT, LOSS_NAMES, LOSSES, MINER_NAMES, MINERS, NO_MINER, pml_name
from pytorch_metric_learning import losses, miners

from oml_core.registry import Registry

pytestmark = pytest.mark.filterwarnings("ignore:__array_wrap__ must accept context:DeprecationWarning")


def test_plugin_module_imports_neither_torch_nor_pml() -> None:
    code = (
        "import sys, oml_pml.plugin; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pytorch_metric_learning') "
        "or m in ('oml_pml.losses', 'oml_pml.miners', 'oml_pml.components')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    ("class_name", "name"),
    [
        ("ArcFaceLoss", "pml_arcface"),
        ("SubCenterArcFaceLoss", "pml_sub_center_arcface"),
        ("NTXentLoss", "pml_ntxent"),
        ("ProxyNCALoss", "pml_proxy_nca"),
        ("NPairsLoss", "pml_n_pairs"),
        ("P2SGradLoss", "pml_p2sgrad"),
        ("SmoothAPLoss", "pml_smooth_ap"),
        ("SignalToNoiseRatioContrastiveLoss", "pml_signal_to_noise_ratio_contrastive"),
        ("CrossBatchMemory", "pml_cross_batch_memory"),
        ("HDCMiner", "pml_hdc"),
        ("MultiSimilarityMiner", "pml_multi_similarity"),
    ],
)
def test_naming_rule(class_name: str, name: str) -> None:
    assert pml_name(class_name) == name


def test_every_pml_loss_and_miner_is_registered_or_left_out_with_a_reason() -> None:
    pml_loss_classes = {
        n for n, c in vars(losses).items() if inspect.isclass(c) and issubclass(c, torch.nn.Module)
    }
    assert pml_loss_classes - {"EmbeddingRegularizerMixin", "WeightRegularizerMixin"} == set(LOSSES) | (
        set(LEFT_OUT) - {"EmbeddingsAlreadyPackagedAsTriplets", "BaseMiner"}
    )
    pml_miner_classes = {n for n, c in vars(miners).items() if inspect.isclass(c)}
    assert pml_miner_classes == set(MINERS) | {"EmbeddingsAlreadyPackagedAsTriplets", "BaseMiner"}
    assert all(LEFT_OUT.values())


def test_names_aliases_and_descriptions(registry: Registry) -> None:
    assert registry.provided_by("oml_pml") == {"loss": sorted(LOSS_NAMES), "miner": sorted(MINER_NAMES)}
    for kind, table, module in (("loss", LOSS_NAMES, "losses"), ("miner", MINER_NAMES, "miners")):
        for name, class_name in table.items():
            entry = registry.get(kind, class_name)  # the PML class name is an alias
            assert entry.name == name and entry.aliases == (class_name,)
            info = registry.describe(kind, name)
            assert info["factory"] == f"oml_pml.{module}:{name}" and info["distribution"] == "oml-pml"
            assert class_name in info["description"]


def test_module_docstrings_list_every_name_with_its_class() -> None:
    for module, table in ((pml_losses, LOSS_NAMES), (pml_miners, MINER_NAMES)):
        rows = {tuple(line.split()[:2]) for line in module.__doc__.splitlines() if line.startswith("pml_")}
        assert rows == set(table.items())
    for class_name in (
        "ManifoldLoss",
        "VICRegLoss",
        "SelfSupervisedLoss",
        "MultipleLosses",
        "GenericPairLoss",
    ):
        assert class_name in pml_losses.__doc__


def test_every_name_has_a_default_config(registry: Registry) -> None:
    for kind, table in (("loss", LOSS_NAMES), ("miner", MINER_NAMES)):
        for name in table:
            cfg = registry.default_config(kind, name)
            assert cfg is not None and cfg["name"] == name, name


@pytest.mark.parametrize("name", sorted(set(LOSS_NAMES) - {"pml_cross_batch_memory"}))
def test_loss_factory_signature_is_the_pml_constructor_plus_miner(name: str) -> None:
    cls = getattr(losses, LOSS_NAMES[name])
    factory = getattr(pml_losses, name)
    params = inspect.signature(factory).parameters
    expected = [p.name for p in constructor_parameters(cls)] + ([] if cls.__name__ in NO_MINER else ["miner"])
    assert list(params) == expected
    assert {"distance", "reducer", "embedding_regularizer"} <= set(params)
    assert ("weight_regularizer" in params) == issubclass(cls, losses.WeightRegularizerMixin)
    own = inspect.signature(cls.__init__).parameters
    for arg, param in own.items():
        if param.default is not inspect.Parameter.empty:
            assert params[arg].default == param.default  # PML's own defaults


@pytest.mark.parametrize("class_name", sorted(set(LOSSES) - {"CrossBatchMemory"}) + sorted(MINERS))
def test_every_argument_can_be_given_explicitly(class_name: str) -> None:
    """No collected argument is one that the class sets itself (which would raise 'multiple values')."""
    module = miners if class_name in MINERS else losses
    required = {"num_classes": 5, "embedding_size": 8, "descriptors_dim": 8, "margin": 0.4, "Tn": 1}
    kwargs = {
        p.name: required[p.name] if p.default is inspect.Parameter.empty else p.default
        for p in constructor_parameters(getattr(module, class_name))
    }
    assert isinstance(getattr(module, class_name)(**kwargs), torch.nn.Module)


@pytest.mark.parametrize("class_name", sorted(NO_MINER))
def test_losses_without_miner_refuse_indices_in_pml_too(class_name: str) -> None:
    args = {"num_classes": 5, "descriptors_dim": 8} if class_name == "P2SGradLoss" else {}
    args |= {"margin": 0.4, "Tn": 1} if class_name == "RankedListLoss" else {}
    loss = getattr(losses, class_name)(**args)
    features, labels = torch.randn(4, 8), torch.tensor([0, 0, 1, 1])
    with pytest.raises(ValueError, match="indices_tuple is not supported"):
        loss(features, labels, (torch.tensor([0]), torch.tensor([1]), torch.tensor([2])))


def test_top_level_exports_are_lazy_and_complete() -> None:
    assert set(oml_pml.__all__) <= set(dir(oml_pml))
    for name in oml_pml.__all__:
        assert getattr(oml_pml, name) is not None
    with pytest.raises(AttributeError):
        oml_pml.NotAThing  # noqa: B018
    with pytest.raises(AttributeError):
        pml_losses.pml_not_a_loss  # noqa: B018
