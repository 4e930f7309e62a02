"""Tests of Grad-CAM (``oml_models.gradcam``) on tiny conv nets whose maps are computed by hand, and of
``ResnetExtractor.draw_gradcam``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oml_models.gradcam import grad_cam, overlay_heatmap
from oml_models.resnet import ResnetExtractor
from PIL import Image
from torch import nn

X = torch.tensor([[[[1.0, 2.0], [3.0, -4.0]]]])  # [1, 1, 2, 2]


def tiny_net(downsample: bool = False) -> tuple[nn.Sequential, nn.Conv2d]:
    """``[avgpool 2x2] -> conv 1x1 (A0 = x, A1 = -x) -> global average -> Linear(W = [[2, 1], [1, 3]])``."""
    conv = nn.Conv2d(1, 2, kernel_size=1, bias=False)
    linear = nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        conv.weight.copy_(torch.tensor([1.0, -1.0]).view(2, 1, 1, 1))
        linear.weight.copy_(torch.tensor([[2.0, 1.0], [1.0, 3.0]]))
    layers = [conv, nn.AdaptiveAvgPool2d(1), nn.Flatten(), linear]
    return nn.Sequential(*([nn.AvgPool2d(2)] if downsample else []), *layers), conv


# By hand for X: the pooled features are (mean x, -mean x) = (0.5, -0.5), the outputs
# (2 * 0.5 - 0.5, 0.5 - 1.5) = (0.5, -1): the top one is output 0. d y0 / d A_c[i, j] = W[0, c] / 4, so
# alpha = (0.5, 0.25) and cam = relu(0.5 x - 0.25 x) = relu(0.25 x) = [[0.25, 0.5], [0.75, 0]];
# scaled by its maximum 0.75: [[1/3, 2/3], [1, 0]].
CAM_X = torch.tensor([[1 / 3, 2 / 3], [1.0, 0.0]])


def test_grad_cam_of_a_hand_built_net() -> None:
    net, conv = tiny_net()
    torch.testing.assert_close(grad_cam(net, conv, X), CAM_X[None])


def test_the_target_is_the_top_output_of_each_row() -> None:
    # -X: pooled (-0.5, 0.5), outputs (-0.5, 1): the top one is output 1, alpha = (1, 3) / 4,
    # cam = relu(0.25 * (-x) - 0.75 * (-x)) = relu(0.5 x) = [[0.5, 1], [1.5, 0]] -> [[1/3, 2/3], [1, 0]];
    # 2X: the same target and map as X. A batch gives every row its own map.
    net, conv = tiny_net()
    maps = grad_cam(net, conv, torch.cat([X, -X, 2 * X]))
    torch.testing.assert_close(maps, CAM_X.expand(3, 2, 2))
    # with W = [[1, 1], [1, 3]] the outputs of X are (0, -1): the top one is 0 with alpha = (0.25, 0.25),
    # cam = relu(0.25 x - 0.25 x) = 0, which stays 0 when scaled
    with torch.no_grad():
        net[-1].weight.copy_(torch.tensor([[1.0, 1.0], [1.0, 3.0]]))
    torch.testing.assert_close(grad_cam(net, conv, X), torch.zeros(1, 2, 2))


def test_the_map_is_resized_to_the_input_bilinearly() -> None:
    # the 4x4 input averaged by 2x2 blocks is X: the 2x2 map is CAM_X, upsampled with half-pixel centres:
    # along each axis the output pixels weigh the input ones by U (rows), out = U @ CAM_X @ U^T
    net, conv = tiny_net(downsample=True)
    x = X.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)
    u = torch.tensor([[1.0, 0.0], [0.75, 0.25], [0.25, 0.75], [0.0, 1.0]])
    expected = u @ CAM_X @ u.T  # its min (0) and max (1) are at the corners: already scaled
    torch.testing.assert_close(grad_cam(net, conv, x), expected[None])
    assert expected[1].tolist() == pytest.approx([0.5, 0.5, 0.5, 0.5])


def test_grad_cam_leaves_the_mode_and_the_gradients_alone() -> None:
    net, conv = tiny_net()
    net.train()
    grad_cam(net, conv, X)
    assert net.training
    assert all(p.grad is None for p in net.parameters())
    net.eval()
    with torch.no_grad():  # works inside no_grad, and with frozen parameters
        net.requires_grad_(False)
        torch.testing.assert_close(grad_cam(net, conv, X), CAM_X[None])
    assert not net.training


def test_grad_cam_errors() -> None:
    net, conv = tiny_net()
    with pytest.raises(ValueError, match=r"x must be a \[B, C, H, W\]"):
        grad_cam(net, conv, X[0])
    with pytest.raises(ValueError, match="layer Conv2d must be called once"):
        grad_cam(net, nn.Conv2d(1, 1, 1), X)
    with pytest.raises(ValueError, match=r"output must be \[B, K\]"):
        grad_cam(net[:1], conv, X)


def test_overlay_heatmap_blends_jet_into_the_image() -> None:
    image = np.full((1, 2, 3), 102, dtype=np.uint8)  # 102 / 255 = 0.4
    mask = np.array([[0.0, 1.0]])
    # jet(0) = (0, 0, 0.5), jet(1) = (0.5, 0, 0); blends: (0.2, 0.2, 0.45) and (0.45, 0.2, 0.2); max 0.45
    out = overlay_heatmap(image, mask)
    expected = np.floor(255 * np.array([[[0.2, 0.2, 0.45], [0.45, 0.2, 0.2]]]) / 0.45 + 1e-9)
    np.testing.assert_array_equal(out, expected.astype(np.uint8))
    assert out.dtype == np.uint8
    with pytest.raises(ValueError, match="mask must have the image's shape"):
        overlay_heatmap(image, np.zeros((2, 2)))
    with pytest.raises(ValueError, match="image must be an HxWx3 uint8"):
        overlay_heatmap(image.astype(np.float32), mask)


@pytest.fixture(scope="module")
def resnet() -> ResnetExtractor:
    torch.manual_seed(0)
    return ResnetExtractor(None, arch="resnet18", gem_p=None, remove_fc=False, normalise_features=True)


def _image(height: int = 48, width: int = 40) -> np.ndarray:
    generator = np.random.default_rng(0)
    return generator.integers(0, 256, size=(height, width, 3), dtype=np.uint8)


def test_resnet_grad_cam_matches_a_computation_without_autograd(resnet: ResnetExtractor) -> None:
    # with average pooling, d fc_k / d A_c[i, j] = W_fc[k, c] / (h w): alpha needs no autograd
    model = resnet.model.eval()
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        trunk = nn.Sequential(
            model.conv1, model.bn1, model.relu, model.maxpool, model.layer1, model.layer2, model.layer3
        )
        acts = model.layer4(trunk(x))  # [2, 512, 2, 2]
        top = model.fc(acts.mean(dim=(2, 3))).argmax(dim=1)
        alpha = model.fc.weight[top] / 4
        cam = torch.einsum("bc,bchw->bhw", alpha, acts).relu()
        cam = nn.functional.interpolate(cam[:, None], size=(64, 64), mode="bilinear")[:, 0]
        cam = cam - cam.amin(dim=(1, 2), keepdim=True)
        expected = cam / cam.amax(dim=(1, 2), keepdim=True)
    torch.testing.assert_close(grad_cam(model, model.layer4[-1], x), expected, atol=1e-5, rtol=1e-4)


def test_draw_gradcam_returns_the_image_with_the_heat_map(resnet: ResnetExtractor) -> None:
    resnet.train()
    image = _image()
    drawn = resnet.draw_gradcam(image)
    assert isinstance(drawn, np.ndarray) and drawn.shape == image.shape and drawn.dtype == np.uint8
    assert resnet.training and all(p.grad is None for p in resnet.parameters())
    # the same as the heat map of the normalised image at layer4's last block, blended in
    x = (torch.tensor(image).permute(2, 0, 1) / 255 - torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)) / (
        torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    )
    mask = grad_cam(resnet.model, resnet.model.layer4[-1], x[None])[0].numpy()
    np.testing.assert_array_equal(drawn, overlay_heatmap(image, mask))
    # a PIL image gives a PIL image of its size
    pil = resnet.draw_gradcam(Image.fromarray(image))
    assert isinstance(pil, Image.Image) and pil.size == (40, 48)
    np.testing.assert_array_equal(np.asarray(pil), drawn)


def test_draw_gradcam_needs_fc_and_an_image() -> None:
    model = ResnetExtractor(None, arch="resnet18", gem_p=None, remove_fc=True, normalise_features=False)
    with pytest.raises(ValueError, match="remove_fc=False"):
        model.draw_gradcam(_image())
    model = ResnetExtractor(None, arch="resnet18", gem_p=None, remove_fc=False, normalise_features=False)
    with pytest.raises(TypeError, match="image must be a PIL image or an HxWx3 uint8 array"):
        model.draw_gradcam(_image().astype(np.float32))
