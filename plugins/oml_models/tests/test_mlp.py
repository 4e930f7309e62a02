"""Tests of ``ExtractorWithMLP``: its head, freezing, checkpoints (local files, OML's Lightning format, the
zoo) and its building from a registry config."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import torch
from oml_models import plugin as models_plugin
from oml_models.mlp import ExtractorWithMLP, oml_checkpoint_to_extractor_with_mlp
from oml_models.resnet import ResnetExtractor
from torch import Tensor, nn

from oml_core import hookimpl
from oml_core.interfaces.models import IExtractor, IFreezable
from oml_core.registry import Registry
from oml_core.utils.checkpoints import CheckpointError
from oml_core.zoo import PretrainedModel


class TinyExtractor(IExtractor):
    """``relu(model(x.flatten(1)))``: a linear map of the flattened input, made positive."""

    def __init__(self, in_features: int = 4, feat_dim: int = 3) -> None:
        super().__init__()
        self.model = nn.Linear(in_features, feat_dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.model(x.flatten(1)).relu()

    @property
    def feat_dim(self) -> int:
        return self.model.out_features


def _tiny_with_mlp(seed: int = 0, **kwargs) -> ExtractorWithMLP:
    torch.manual_seed(seed)
    return ExtractorWithMLP(TinyExtractor(), **{"mlp_features": [5, 2], **kwargs})


X = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))


def test_the_head_is_linear_relu_linear_without_a_last_activation() -> None:
    model = _tiny_with_mlp()
    assert isinstance(model, IExtractor) and isinstance(model, IFreezable)
    assert model.feat_dim == 2 and model.mlp_features == [5, 2]
    assert list(model.state_dict()) == [
        "extractor.model.weight",
        "extractor.model.bias",
        "projection.0.weight",
        "projection.0.bias",
        "projection.3.weight",
        "projection.3.bias",
    ]
    sd = model.state_dict()
    features = (X @ sd["extractor.model.weight"].T + sd["extractor.model.bias"]).relu()
    hidden = (features @ sd["projection.0.weight"].T + sd["projection.0.bias"]).relu()
    expected = hidden @ sd["projection.3.weight"].T + sd["projection.3.bias"]
    out = model(X)
    assert out.shape == (6, 2)
    torch.testing.assert_close(out, expected)
    assert (out < 0).any()  # no activation after the last layer
    torch.testing.assert_close(model.extract(X), out)


def test_one_layer_head() -> None:
    model = _tiny_with_mlp(mlp_features=[7])
    assert model.feat_dim == 7 and model(X).shape == (6, 7)
    assert [k for k in model.state_dict() if k.startswith("projection")] == [
        "projection.0.weight",
        "projection.0.bias",
    ]


def _requires_grad(module: nn.Module) -> set[bool]:
    return {p.requires_grad for p in module.parameters()}


def test_train_backbone_freeze_and_unfreeze_set_requires_grad() -> None:
    model = _tiny_with_mlp()  # train_backbone=False by default
    assert model.train_backbone is False
    assert _requires_grad(model.extractor) == {False} and _requires_grad(model.projection) == {True}
    model.unfreeze()
    assert model.train_backbone is True and _requires_grad(model) == {True}
    model.freeze()
    assert model.train_backbone is False
    assert _requires_grad(model.extractor) == {False} and _requires_grad(model.projection) == {True}
    trained = _tiny_with_mlp(train_backbone=True)
    assert trained.train_backbone is True and _requires_grad(trained) == {True}
    trained.freeze()
    assert _requires_grad(trained.extractor) == {False}


def _grads_after_backward(model: ExtractorWithMLP, x: Tensor) -> tuple[set[bool], set[bool]]:
    model.zero_grad(set_to_none=True)
    model(x).sum().backward()
    return (
        {p.grad is not None for p in model.extractor.parameters()},
        {p.grad is not None for p in model.projection.parameters()},
    )


def test_gradients_reach_the_backbone_only_when_unfrozen() -> None:
    model = _tiny_with_mlp()
    x = X.clone().requires_grad_(True)  # even an input that asks for gradients does not reach the backbone
    assert _grads_after_backward(model, x) == ({False}, {True})
    assert x.grad is None
    model.unfreeze()
    assert _grads_after_backward(model, X) == ({True}, {True})
    model.freeze()
    assert _grads_after_backward(model, X) == ({False}, {True})


def test_no_graph_under_no_grad_even_when_training_the_backbone() -> None:
    model = _tiny_with_mlp(train_backbone=True)
    backbone_outputs: list[Tensor] = []
    model.extractor.register_forward_hook(lambda _m, _i, output: backbone_outputs.append(output))
    with torch.no_grad():
        assert model(X).grad_fn is None
    model(X)
    assert backbone_outputs[0].grad_fn is None and backbone_outputs[1].grad_fn is not None


def test_local_checkpoint_plain_and_lightning(tmp_path: Path) -> None:
    source = _tiny_with_mlp(seed=1, train_backbone=True)
    plain = tmp_path / "mlp.pth"
    torch.save(source.state_dict(), plain)
    lightning = tmp_path / "last.ckpt"  # a LightningModule's: model.* and the loss's criterion.*
    state_dict = {f"model.{k}": v for k, v in source.state_dict().items()}
    state_dict["criterion.weight"] = torch.zeros(3, 2)
    torch.save({"state_dict": state_dict, "epoch": 1}, lightning)
    for weights in (plain, str(plain), lightning):
        loaded = _tiny_with_mlp(seed=2, weights=weights)
        torch.testing.assert_close(loaded(X), source(X), rtol=0, atol=0)


def test_checkpoint_of_another_head_fails_clearly(tmp_path: Path) -> None:
    path = tmp_path / "other.pth"
    torch.save(_tiny_with_mlp(mlp_features=[5, 3]).state_dict(), path)
    with pytest.raises(CheckpointError, match=r"other\.pth.*shape mismatch.*projection\.3\.weight"):
        _tiny_with_mlp(weights=path)


def test_bad_arguments_name_themselves() -> None:
    with pytest.raises(ValueError, match="mlp_features must be a non-empty list"):
        ExtractorWithMLP(TinyExtractor(), mlp_features=[])
    with pytest.raises(ValueError, match="mlp_features must be a non-empty list"):
        ExtractorWithMLP(TinyExtractor(), mlp_features=[4, 0])
    with pytest.raises(
        TypeError, match="extractor must be an IExtractor or an extractor's {name, args} spec"
    ):
        ExtractorWithMLP(nn.Linear(4, 3), mlp_features=[2])


RESNET18 = {
    "name": "resnet",
    "args": {
        "weights": None,
        "arch": "resnet18",
        "gem_p": None,
        "remove_fc": True,
        "normalise_features": False,
    },
}


def test_registry_builds_the_nested_extractor_spec() -> None:
    registry = Registry([("oml_models", models_plugin)], load_entrypoints=False)
    model = registry.build(
        "extractor", {"name": "extractor_with_mlp", "args": {"extractor": RESNET18, "mlp_features": [16]}}
    )
    assert isinstance(model, ExtractorWithMLP) and isinstance(model.extractor, ResnetExtractor)
    assert model.projection[0].in_features == 512 and model.feat_dim == 16
    with torch.no_grad():
        assert model.eval()(torch.randn(2, 3, 32, 32)).shape == (2, 16)


def test_oml_converter_strips_the_lightning_wrapper() -> None:
    w = torch.zeros(1)
    converted = oml_checkpoint_to_extractor_with_mlp(
        {"model.extractor.model.norm.bias": w, "model.projection.0.weight": w, "criterion.fc.weight": w}
    )
    assert converted == {"extractor.model.norm.bias": w, "projection.0.weight": w}
    assert oml_checkpoint_to_extractor_with_mlp({"extractor.model.x": w}) == {"extractor.model.x": w}


def test_zoo_checkpoint_of_the_whole_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a zoo row like OML's vits16_224_mlp_384_inshop (OML's Lightning checkpoint), on a resnet18 backbone
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    row = partial(
        PretrainedModel,
        extractor="extractor_with_mlp",
        init_args={"extractor": RESNET18, "mlp_features": [8], "train_backbone": True},
        url="https://example.invalid/resnet18_mlp_8.ckpt",
        md5=None,
        filename="resnet18_mlp_8.ckpt",
        transforms={"name": "norm_resize_torch", "args": {"im_size": 32}},
        converter="oml_models.mlp:oml_checkpoint_to_extractor_with_mlp",
    )

    class Zoo:
        @hookimpl
        def oml_register_pretrained(self, register):
            register("resnet18_mlp_8", row)

    registry = Registry([("oml_models", models_plugin), Zoo()], load_entrypoints=False)
    torch.manual_seed(0)
    source = ExtractorWithMLP(
        ResnetExtractor(None, "resnet18", None, remove_fc=True, normalise_features=False), [8]
    ).eval()
    state_dict = {f"model.{k}": v for k, v in source.state_dict().items()}
    state_dict["criterion.weight"] = torch.zeros(2, 8)
    torch.save({"state_dict": state_dict, "epoch": 3}, tmp_path / "resnet18_mlp_8.ckpt")

    model = ExtractorWithMLP.from_pretrained("resnet18_mlp_8", registry=registry).eval()
    assert isinstance(model.extractor, ResnetExtractor) and model.train_backbone is True
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(x), source(x), rtol=0, atol=0)
