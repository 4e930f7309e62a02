"""Tests of the pairwise models of ``oml_models.siamese`` (hand-computed values on tiny models)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from oml_models.resnet import ResnetExtractor
from oml_models.siamese import ConcatSiamese, LinearTrivialDistanceSiamese, TrivialDistanceSiamese
from torch import Tensor, nn

from oml_core import hookimpl
from oml_core.interfaces.models import IExtractor, IFreezable, IPairwiseModel
from oml_core.registry import Registry
from oml_core.utils.checkpoints import CheckpointError


class TinyExtractor(IExtractor):
    """``model(x.flatten(1))``: a linear map of the flattened input (its attribute named like ResNet's)."""

    def __init__(self, in_features: int, feat_dim: int) -> None:
        super().__init__()
        self.model = nn.Linear(in_features, feat_dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.model(x.flatten(1))

    @property
    def feat_dim(self) -> int:
        return self.model.out_features


def _set(linear: nn.Linear, weight: list[list[float]], bias: list[float] | None = None) -> None:
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(weight))
        if bias is not None:
            linear.bias.copy_(torch.tensor(bias))


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def _images(shape: tuple[int, ...], seed: int) -> Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------------- LinearTrivialDistanceSiamese
def test_linear_identity_init_is_the_l2_distance() -> None:
    model = LinearTrivialDistanceSiamese(feat_dim=5, identity_init=True)
    x1, x2 = _images((7, 5), 0), _images((7, 5), 1)
    expected = torch.linalg.vector_norm(x1 - x2, dim=1)
    torch.testing.assert_close(model(x1, x2), expected)
    torch.testing.assert_close(model.predict(x1, x2), expected)
    assert isinstance(model, IPairwiseModel)


def test_linear_hand_computed_with_weight_and_bias() -> None:
    model = LinearTrivialDistanceSiamese(feat_dim=2, identity_init=True, output_bias=0.5)
    _set(model.proj, [[2.0, 0.0], [1.0, 1.0]])
    x1 = torch.tensor([[1.0, 2.0], [1.0, 0.0]])
    x2 = torch.tensor([[0.0, 0.0], [0.0, 1.0]])
    # W x1 = [2, 3], W x2 = [0, 0] -> sqrt(13); W x1 = [2, 1], W x2 = [0, 1] -> 2; plus 0.5
    torch.testing.assert_close(model(x1, x2), torch.tensor([math.sqrt(13) + 0.5, 2.5]))


def test_linear_without_identity_init_is_not_the_identity() -> None:
    torch.manual_seed(0)
    model = LinearTrivialDistanceSiamese(feat_dim=3, identity_init=False)
    assert not torch.equal(model.proj.weight, torch.eye(3))
    assert model.proj.bias is None


@pytest.mark.parametrize("feat_dim", [0, -2, 2.5, True, "4"])
def test_linear_rejects_bad_feat_dim(feat_dim: object) -> None:
    with pytest.raises(ValueError, match="feat_dim must be a positive int"):
        LinearTrivialDistanceSiamese(feat_dim=feat_dim, identity_init=True)  # type: ignore[arg-type]


def test_linear_rejects_bad_flags_and_inputs() -> None:
    with pytest.raises(TypeError, match="identity_init must be a bool"):
        LinearTrivialDistanceSiamese(feat_dim=2, identity_init=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="output_bias must be a real number"):
        LinearTrivialDistanceSiamese(feat_dim=2, identity_init=True, output_bias="1")  # type: ignore[arg-type]
    model = LinearTrivialDistanceSiamese(feat_dim=4, identity_init=True)
    with pytest.raises(ValueError, match=r"x2 must be \[batch_size, feat_dim=4\], got \(2, 5\)"):
        model(torch.zeros(2, 4), torch.zeros(2, 5))
    with pytest.raises(ValueError, match="one shape"):
        model(torch.zeros(2, 4), torch.zeros(3, 4))


# ------------------------------------------------------------------------------- TrivialDistanceSiamese
def test_trivial_hand_computed() -> None:
    extractor = TinyExtractor(in_features=2, feat_dim=2)
    _set(extractor.model, [[1.0, 0.0], [0.0, 2.0]], [0.0, 0.0])
    model = TrivialDistanceSiamese(extractor, output_bias=1.0)
    x1 = torch.tensor([[[[1.0, 1.0]]]])  # embedding [1, 2]
    x2 = torch.tensor([[[[4.0, -1.0]]]])  # embedding [4, -2]: difference [-3, 4]
    torch.testing.assert_close(model(x1, x2), torch.tensor([6.0]))
    torch.testing.assert_close(model.predict(x1, x2), torch.tensor([6.0]))


def test_trivial_equals_distance_of_resnet_embeddings() -> None:
    torch.manual_seed(0)
    extractor = ResnetExtractor(None, arch="resnet18", gem_p=None, remove_fc=True, normalise_features=False)
    model = TrivialDistanceSiamese(extractor).eval()
    x1, x2 = _images((3, 3, 32, 32), 1), _images((3, 3, 32, 32), 2)
    with torch.no_grad():
        expected = torch.linalg.vector_norm(extractor(x1) - extractor(x2), dim=1)
        torch.testing.assert_close(model(x1, x2), expected)
    assert model.output_bias == 0.0


def test_trivial_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match="extractor must be an instance of .*IExtractor, got Linear"):
        TrivialDistanceSiamese(nn.Linear(2, 2))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="output_bias must be a real number"):
        TrivialDistanceSiamese(TinyExtractor(2, 2), output_bias=None)  # type: ignore[arg-type]


def test_trivial_loads_a_checkpoint_of_the_whole_siamese(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TrivialDistanceSiamese(TinyExtractor(2, 3), output_bias=0.5)
    x1, x2 = _images((4, 1, 1, 2), 1), _images((4, 1, 1, 2), 2)
    expected = model(x1, x2)
    plain, lightning = tmp_path / "siamese.pth", tmp_path / "pairwise.ckpt"
    torch.save(model.state_dict(), plain)
    torch.save({"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}}, lightning)
    for path in (plain, str(lightning)):
        torch.manual_seed(1)
        loaded = TrivialDistanceSiamese(TinyExtractor(2, 3), output_bias=0.5, weights=path)
        torch.testing.assert_close(loaded(x1, x2), expected, rtol=0, atol=0)
    with pytest.raises(CheckpointError, match=r"siamese\.pth.*shape mismatch.*extractor\.model\.weight"):
        TrivialDistanceSiamese(TinyExtractor(2, 5), weights=plain)
    with pytest.raises(FileNotFoundError, match="missing.pth"):
        TrivialDistanceSiamese(TinyExtractor(2, 3), weights=tmp_path / "missing.pth")


# ---------------------------------------------------------------------------------------- ConcatSiamese
def _hand_concat(use_tta: bool = False) -> ConcatSiamese:
    """Images [B, 1, 1, 2]; the pair is [B, 1, 2, 2], flattened [a1, a2, b1, b2] -> features [a1, b2];
    head: h = f1 - f2 + 0.5, logit = 2 * sigmoid(h)."""
    extractor = TinyExtractor(in_features=4, feat_dim=2)
    _set(extractor.model, [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]], [0.0, 0.0])
    model = ConcatSiamese(extractor, mlp_hidden_dims=[1], use_tta=use_tta)
    _set(model.head[0], [[1.0, -1.0]], [0.5])
    _set(model.head[3], [[2.0]])
    return model.eval()


X1 = torch.tensor([[[[1.0, 2.0]]], [[[0.0, 0.0]]]])
X2 = torch.tensor([[[[3.0, 4.0]]], [[[0.0, 0.0]]]])
# (x1, x2): features [1, 4] -> h = -2.5; [0, 0] -> h = 0.5. (x2, x1): features [3, 2] -> h = 1.5; h = 0.5.
LOGITS = [2 * _sigmoid(-2.5), 2 * _sigmoid(0.5)]
LOGITS_SWAPPED = [2 * _sigmoid(1.5), 2 * _sigmoid(0.5)]


def test_concat_head_layout_is_omls() -> None:
    model = ConcatSiamese(TinyExtractor(4, 6), mlp_hidden_dims=[5, 3])
    layers = [type(m).__name__ for m in model.head]
    assert layers == ["Linear", "Sigmoid", "Dropout", "Linear", "Sigmoid", "Dropout", "Linear", "Identity"]
    assert (model.head[0].in_features, model.head[0].out_features) == (6, 5)
    assert (model.head[3].in_features, model.head[3].out_features) == (5, 3)
    assert (model.head[6].in_features, model.head[6].out_features, model.head[6].bias) == (3, 1, None)
    assert model.head[2].p == 0.5
    assert sorted(k for k in model.state_dict() if k.startswith("head.")) == [
        "head.0.bias",
        "head.0.weight",
        "head.3.bias",
        "head.3.weight",
        "head.6.weight",
    ]
    assert isinstance(model, IPairwiseModel) and isinstance(model, IFreezable)


def test_concat_without_hidden_layers_is_one_linear_layer() -> None:
    model = ConcatSiamese(TinyExtractor(4, 3), mlp_hidden_dims=[])
    assert [type(m).__name__ for m in model.head] == ["Linear", "Identity"]


def test_concat_forward_and_predict_hand_computed() -> None:
    model = _hand_concat()
    with torch.no_grad():
        logits = model(X1, X2)
        assert logits.shape == (2,)
        torch.testing.assert_close(logits, torch.tensor(LOGITS))
        torch.testing.assert_close(model.predict(X1, X2), torch.tensor([_sigmoid(v) for v in LOGITS]))
        torch.testing.assert_close(model.predict(X2, X1), torch.tensor([_sigmoid(v) for v in LOGITS_SWAPPED]))


def test_concat_tta_averages_both_orders_and_is_symmetric() -> None:
    model = _hand_concat(use_tta=True)
    expected = torch.tensor([(_sigmoid(a) + _sigmoid(b)) / 2 for a, b in zip(LOGITS, LOGITS_SWAPPED)])
    with torch.no_grad():
        torch.testing.assert_close(model.predict(X1, X2), expected)
        torch.testing.assert_close(model.predict(X2, X1), expected)
        torch.testing.assert_close(model(X1, X2), torch.tensor(LOGITS))  # forward is not affected


def test_concat_on_resnet_images_gives_probabilities() -> None:
    torch.manual_seed(0)
    extractor = ResnetExtractor(None, arch="resnet18", gem_p=None, remove_fc=True, normalise_features=False)
    model = ConcatSiamese(extractor, mlp_hidden_dims=[8], use_tta=True).eval()
    x1, x2 = _images((3, 3, 32, 32), 1), _images((3, 3, 32, 32), 2)
    with torch.no_grad():
        logits = model(x1, x2)
        probs = model.predict(x1, x2)
        expected_logits = model.head(extractor(torch.cat([x1, x2], dim=2))).squeeze(1)
    assert logits.shape == probs.shape == (3,)
    torch.testing.assert_close(logits, expected_logits)
    assert ((probs > 0) & (probs < 1)).all()


def _grads_after_backward(model: ConcatSiamese) -> tuple[list[Tensor | None], list[Tensor | None]]:
    model.zero_grad(set_to_none=True)
    model(_images((4, 1, 1, 2), 3), _images((4, 1, 1, 2), 4)).sum().backward()
    return [p.grad for p in model.extractor.parameters()], [p.grad for p in model.head.parameters()]


def test_concat_freeze_stops_backbone_gradients_only() -> None:
    torch.manual_seed(0)
    model = ConcatSiamese(TinyExtractor(4, 3), mlp_hidden_dims=[2]).train()
    model.freeze()
    backbone, head = _grads_after_backward(model)
    assert all(g is None for g in backbone)
    assert all(g is not None and g.abs().sum() > 0 for g in head)
    assert all(p.requires_grad for p in model.parameters())  # OML's freeze leaves the flags unchanged
    model.unfreeze()
    backbone, head = _grads_after_backward(model)
    assert all(g is not None and g.abs().sum() > 0 for g in backbone)
    assert all(g is not None for g in head)


def test_concat_records_no_backbone_graph_under_no_grad() -> None:
    model = ConcatSiamese(TinyExtractor(4, 3), mlp_hidden_dims=[2]).eval()
    seen: list[bool] = []
    model.extractor.register_forward_hook(lambda module, args, out: seen.append(out.requires_grad))
    with torch.no_grad():
        model.predict(X1, X2)
    model(X1, X2)
    assert seen == [False, True]


def test_concat_state_dict_round_trip(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = ConcatSiamese(TinyExtractor(4, 3), mlp_hidden_dims=[2]).eval()
    with torch.no_grad():
        expected = model.predict(X1, X2)
    plain, lightning = tmp_path / "siamese.pth", tmp_path / "pairwise.ckpt"
    torch.save(model.state_dict(), plain)
    torch.save(
        {"state_dict": {f"model.{k}": v for k, v in model.state_dict().items()}, "epoch": 3}, lightning
    )
    for path in (plain, str(lightning)):
        torch.manual_seed(1)
        loaded = ConcatSiamese(TinyExtractor(4, 3), mlp_hidden_dims=[2], weights=path).eval()
        with torch.no_grad():
            torch.testing.assert_close(loaded.predict(X1, X2), expected, rtol=0, atol=0)


def test_concat_weights_errors(tmp_path: Path) -> None:
    path = tmp_path / "siamese.pth"
    torch.save(ConcatSiamese(TinyExtractor(4, 3), mlp_hidden_dims=[2]).state_dict(), path)
    with pytest.raises(CheckpointError, match=r"siamese\.pth.*shape mismatch.*head\.0\.weight"):
        ConcatSiamese(TinyExtractor(4, 3), mlp_hidden_dims=[5], weights=path)
    with pytest.raises(
        CheckpointError, match=r"siamese\.pth.*unexpected keys \(2\): head\.0\.bias, head\.3\.weight"
    ):
        ConcatSiamese(TinyExtractor(4, 3), mlp_hidden_dims=[], weights=path)
    with pytest.raises(FileNotFoundError, match="missing.pth"):
        ConcatSiamese(TinyExtractor(4, 3), mlp_hidden_dims=[2], weights=tmp_path / "missing.pth")


@pytest.mark.parametrize("dims", [[0], [2.0], [True], "12", 5, None])
def test_concat_rejects_bad_hidden_dims(dims: object) -> None:
    with pytest.raises(ValueError, match="mlp_hidden_dims must"):
        ConcatSiamese(TinyExtractor(4, 3), mlp_hidden_dims=dims)  # type: ignore[arg-type]


def test_concat_rejects_bad_arguments_and_inputs() -> None:
    with pytest.raises(TypeError, match="extractor must be an instance of .*IExtractor"):
        ConcatSiamese(nn.Identity(), mlp_hidden_dims=[2])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="use_tta must be a bool"):
        ConcatSiamese(TinyExtractor(4, 3), mlp_hidden_dims=[2], use_tta="yes")  # type: ignore[arg-type]
    model = ConcatSiamese(TinyExtractor(4, 3), mlp_hidden_dims=[2])
    with pytest.raises(ValueError, match=r"x1 and x2 must be batches of images.*\(2, 2\) and \(2, 2\)"):
        model(torch.zeros(2, 2), torch.zeros(2, 2))
    with pytest.raises(ValueError, match=r"\(2, 1, 1, 2\) and \(2, 3, 1, 2\)"):
        model(torch.zeros(2, 1, 1, 2), torch.zeros(2, 3, 1, 2))


# --------------------------------------------------------------------------------------------- registry
class SiamesePlugin:
    @hookimpl
    def oml_register_extractors(self, register):
        register("tiny", TinyExtractor)

    @hookimpl
    def oml_register_pairwise_models(self, register):
        register("linear_siamese", "oml_models.siamese:LinearTrivialDistanceSiamese")
        register("concat_siamese", "oml_models.siamese:ConcatSiamese")
        register("trivial_distance_siamese", "oml_models.siamese:TrivialDistanceSiamese")


def test_registry_builds_each_pairwise_model_from_config() -> None:
    registry = Registry([("siamese", SiamesePlugin())], load_entrypoints=False)
    tiny = {"name": "tiny", "args": {"in_features": 4, "feat_dim": 3}}

    linear = registry.build(
        "pairwise_model", {"name": "linear_siamese", "args": {"feat_dim": 3, "identity_init": True}}
    )
    assert isinstance(linear, LinearTrivialDistanceSiamese)
    x1, x2 = torch.tensor([[0.0, 3.0, 0.0]]), torch.tensor([[4.0, 0.0, 0.0]])
    torch.testing.assert_close(linear.predict(x1, x2), torch.tensor([5.0]))

    trivial = registry.build(
        "pairwise_model",
        {"name": "trivial_distance_siamese", "args": {"extractor": tiny, "output_bias": 0.5}},
    )
    assert isinstance(trivial, TrivialDistanceSiamese) and isinstance(trivial.extractor, TinyExtractor)
    assert trivial.output_bias == 0.5

    concat = registry.build(
        "pairwise_model",
        {"name": "concat_siamese", "args": {"extractor": tiny, "mlp_hidden_dims": [2], "use_tta": True}},
    )
    assert isinstance(concat, ConcatSiamese) and concat.use_tta
    assert concat.extractor.feat_dim == 3 and concat.head[0].in_features == 3
    with torch.no_grad():
        probs = concat.eval().predict(_images((2, 1, 1, 2), 5), _images((2, 1, 1, 2), 6))
    assert probs.shape == (2,)
