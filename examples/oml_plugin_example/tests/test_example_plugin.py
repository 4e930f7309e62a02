"""Tests of the example plugin: hand-computed contrastive losses, extractor shapes, registration."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch
from oml_plugin_example import plugin as example_plugin
from oml_plugin_example.extractor import TinyConvExtractor
from oml_plugin_example.loss import ContrastiveLoss

from oml_core.interfaces.models import IExtractor
from oml_core.registry import Registry


def _registry() -> Registry:
    return Registry(plugins=[("oml_plugin_example", example_plugin)], load_entrypoints=False)


def test_contrastive_loss_hand_computed() -> None:
    features = torch.tensor([[0.0], [1.0], [3.0]])
    labels = torch.tensor([0, 0, 1])
    # pairs: (0,1) same, d=1 -> 1^2 = 1; (0,2) diff, d=3; (1,2) diff, d=2
    # margin 2:   (1 + relu(2-3)^2 + relu(2-2)^2) / 3 = 1/3
    torch.testing.assert_close(ContrastiveLoss(margin=2.0)(features, labels), torch.tensor(1 / 3))
    # margin 2.5: (1 + 0 + 0.5^2) / 3 = 1.25 / 3
    torch.testing.assert_close(ContrastiveLoss(margin=2.5)(features, labels), torch.tensor(1.25 / 3))
    # margin 4:   (1 + 1^2 + 2^2) / 3 = 2
    torch.testing.assert_close(ContrastiveLoss(margin=4.0)(features, labels.tolist()), torch.tensor(2.0))


def test_contrastive_loss_default_margin_and_identical_points() -> None:
    features = torch.tensor([[0.0], [0.0], [0.2], [0.9]], requires_grad=True)
    labels = [1, 2, 1, 1]
    # margin 0.5; pairs (i,j): (0,1) diff d=0 -> 0.25; (0,2) same d=.2 -> .04; (0,3) same d=.9 -> .81;
    # (1,2) diff d=.2 -> .09; (1,3) diff d=.9 -> 0; (2,3) same d=.7 -> .49; mean = 1.68 / 6
    loss = ContrastiveLoss()(features, labels)
    torch.testing.assert_close(loss, torch.tensor(1.68 / 6))
    loss.backward()
    assert torch.isfinite(features.grad).all()


def test_contrastive_loss_2d_and_degenerate_batches() -> None:
    features = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
    torch.testing.assert_close(ContrastiveLoss(margin=6.0)(features, [0, 1]), torch.tensor(1.0))  # (6-5)^2
    torch.testing.assert_close(ContrastiveLoss(margin=6.0)(features, [7, 7]), torch.tensor(25.0))  # 5^2
    torch.testing.assert_close(ContrastiveLoss()(features[:1], [0]), torch.tensor(0.0))
    with pytest.raises(ValueError, match="N labels"):
        ContrastiveLoss()(features, [0, 1, 2])
    with pytest.raises(ValueError, match="margin"):
        ContrastiveLoss(margin=-1.0)


@pytest.mark.parametrize("shape", [(2, 3, 32, 32), (1, 3, 7, 13), (3, 3, 1, 1)])
def test_tiny_conv_extractor_shapes(shape: tuple[int, int, int, int]) -> None:
    torch.manual_seed(0)
    model = TinyConvExtractor(feat_dim=8).eval()
    assert isinstance(model, IExtractor)
    assert model.feat_dim == 8
    with torch.no_grad():
        out = model(torch.randn(*shape))
    assert out.shape == (shape[0], 8)
    torch.testing.assert_close(out.norm(dim=1), torch.ones(shape[0]))
    torch.testing.assert_close(model.extract(torch.ones(*shape)), model(torch.ones(*shape)))


def test_tiny_conv_extractor_without_normalisation() -> None:
    torch.manual_seed(0)
    model = TinyConvExtractor(normalise_features=False)
    out = model(torch.randn(4, 3, 16, 16))
    assert out.shape == (4, 32)
    assert not torch.allclose(out.norm(dim=1), torch.ones(4))


def test_registry_builds_both_components() -> None:
    registry = _registry()
    assert "tiny_conv" in registry.names("extractor")
    assert "contrastive_example" in registry.names("loss")
    model = registry.build("extractor", {"name": "tiny_conv", "args": {"feat_dim": 32}})
    assert isinstance(model, TinyConvExtractor) and model.feat_dim == 32
    loss = registry.build("loss", {"name": "contrastive_example", "args": {"margin": 2.0}})
    assert isinstance(loss, ContrastiveLoss) and loss.margin == 2.0
    assert registry.provided_by("oml_plugin_example") == {
        "extractor": ["tiny_conv"],
        "loss": ["contrastive_example"],
    }


def test_entry_point_when_installed() -> None:
    try:
        dist = importlib.metadata.distribution("oml-plugin-example")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("oml-plugin-example is not pip-installed")
    (ep,) = [ep for ep in dist.entry_points if ep.group == "oml"]
    assert (ep.name, ep.value) == ("oml_plugin_example", "oml_plugin_example.plugin")
    entry = Registry().get("extractor", "tiny_conv")
    assert entry.plugin.distribution == "oml-plugin-example"
