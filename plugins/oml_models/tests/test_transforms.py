"""Tests of OML's torchvision transforms (``oml_models.transforms``) on hand-made images, against values
computed by hand: ``(pixel / 255 - mean[c]) / std[c]`` with ImageNet's mean and std."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from oml_models import transforms as tr
from oml_models.zoo import resnet as resnet_zoo
from PIL import Image

import oml_core.zoo
from oml_core import hookimpl
from oml_core.registry import Registry
from oml_core.utils.images import imread_pil

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)

# a 2x2 RGB image: every pixel and channel different
PIXELS = np.array([[[0, 128, 255], [10, 20, 30]], [[255, 0, 0], [1, 2, 3]]], dtype=np.uint8)


def normalised(pixels: np.ndarray) -> torch.Tensor:
    """The hand formula: HxWx3 uint8 -> [3, H, W] float."""
    return (torch.tensor(pixels, dtype=torch.float32).permute(2, 0, 1) / 255 - MEAN) / STD


def test_the_hand_formula_on_one_pixel() -> None:
    # (128 / 255 - 0.456) / 0.224 = (0.50196 - 0.456) / 0.224 = 0.20518
    assert normalised(PIXELS)[1, 0, 0].item() == pytest.approx(0.205182, abs=1e-5)
    # (0 / 255 - 0.485) / 0.229 = -2.11790
    assert normalised(PIXELS)[0, 0, 0].item() == pytest.approx(-2.117904, abs=1e-5)


def test_norm_torch_keeps_the_size_and_normalises() -> None:
    out = tr.get_normalisation_torch()(Image.fromarray(PIXELS))
    torch.testing.assert_close(out, normalised(PIXELS))
    # an HxWx3 uint8 array is accepted as well
    torch.testing.assert_close(tr.get_normalisation_torch()(PIXELS), normalised(PIXELS))
    custom = tr.get_normalisation_torch(mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))(PIXELS)
    torch.testing.assert_close(custom, torch.tensor(PIXELS, dtype=torch.float32).permute(2, 0, 1) / 255)


def test_norm_resize_torch_at_the_same_size_only_normalises() -> None:
    out = tr.get_normalisation_resize_torch(im_size=2)(Image.fromarray(PIXELS))
    assert out.shape == (3, 2, 2) and out.dtype == torch.float32
    torch.testing.assert_close(out, normalised(PIXELS))


def test_norm_resize_torch_downscales_bilinearly_with_antialias() -> None:
    # 4x4: columns 0-1 black, 2-3 white, to 2x2. PIL's antialiased bilinear filter has a support of 2 input
    # pixels at this scale: output column 0 (centre 1.0) weighs input columns 0, 1, 2 by 0.75, 0.75, 0.25,
    # so it is 255 * 0.25 / 1.75 = 36.4 -> 36, and column 1 is 255 * 1.5 / 1.75 = 218.6 -> 219.
    image = np.zeros((4, 4, 3), dtype=np.uint8)
    image[:, 2:] = 255
    out = tr.get_normalisation_resize_torch(im_size=2)(Image.fromarray(image))
    expected = np.array([[36, 219], [36, 219]], dtype=np.uint8)[..., None].repeat(3, axis=2)
    torch.testing.assert_close(out, normalised(expected))


def test_norm_resize_torch_makes_a_square_of_any_image() -> None:
    image = Image.fromarray(np.full((30, 50, 3), 200, dtype=np.uint8))
    out = tr.get_normalisation_resize_torch(im_size=16)(image)
    assert out.shape == (3, 16, 16)
    # a uniform image stays uniform
    torch.testing.assert_close(out, normalised(np.full((16, 16, 3), 200, dtype=np.uint8)))


def test_norm_resize_hypvit_resizes_the_shorter_side_then_crops_the_centre() -> None:
    # 2x6: the shorter side is already 2, so the resize keeps it; the 2x2 centre crop takes columns 2 and 3
    image = np.arange(2 * 6 * 3, dtype=np.uint8).reshape(2, 6, 3) * 5
    out = tr.get_normalisation_resize_hypvit(im_size=2, crop_size=2)(Image.fromarray(image))
    torch.testing.assert_close(out, normalised(image[:, 2:4]))
    big = Image.fromarray(np.zeros((300, 400, 3), dtype=np.uint8))
    assert tr.get_normalisation_resize_hypvit(im_size=256, crop_size=224)(big).shape == (3, 224, 224)


def _augs(seed: int, im_size: int = 2) -> torch.Tensor:
    torch.manual_seed(seed)
    return tr.get_augs_torch(im_size=im_size)(Image.fromarray(PIXELS))


def test_augs_torch_flips_by_the_seed_and_keeps_the_colours() -> None:
    # RandomHorizontalFlip draws torch.rand(1) first: 0.4963 < 0.5 with seed 0 (flip), 0.7576 with seed 1
    torch.testing.assert_close(_augs(seed=0), normalised(PIXELS[:, ::-1].copy()))
    torch.testing.assert_close(_augs(seed=1), normalised(PIXELS))
    assert not torch.equal(_augs(seed=0), _augs(seed=1))
    torch.testing.assert_close(_augs(seed=0), _augs(seed=0), rtol=0, atol=0)


def test_augs_torch_resizes_to_a_square() -> None:
    torch.manual_seed(0)
    out = tr.get_augs_torch(im_size=8)(Image.fromarray(np.zeros((12, 20, 3), dtype=np.uint8)))
    assert out.shape == (3, 8, 8)


def test_augs_hypvit_crops_randomly_and_reproducibly() -> None:
    image = Image.fromarray(np.arange(32 * 32 * 3, dtype=np.uint8).reshape(32, 32, 3))

    def run(seed: int) -> torch.Tensor:
        torch.manual_seed(seed)
        return tr.get_augs_hypvit(im_size=8, min_scale=0.2)(image)

    assert run(0).shape == (3, 8, 8)
    torch.testing.assert_close(run(3), run(3), rtol=0, atol=0)
    assert not torch.equal(run(3), run(4))


@pytest.mark.parametrize(
    ("factory", "kwargs", "name"),
    [
        (tr.get_normalisation_resize_torch, {"im_size": 0}, "im_size"),
        (tr.get_augs_torch, {"im_size": 2.5}, "im_size"),
        (tr.get_normalisation_resize_hypvit, {"im_size": 8, "crop_size": -1}, "crop_size"),
        (tr.get_augs_hypvit, {"im_size": 8, "min_scale": 0.0}, "min_scale"),
    ],
)
def test_bad_sizes_name_the_argument(factory, kwargs, name) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be"):
        factory(**kwargs)


def test_transforms_for_pretrained_resnets_through_a_registry() -> None:
    assert tr.get_transforms_for_pretrained is oml_core.zoo.get_transforms_for_pretrained

    class Plugin:
        @hookimpl
        def oml_register_transforms(self, register):
            register("norm_resize_hypvit_torch", "oml_models.transforms:get_normalisation_resize_hypvit")

        @hookimpl
        def oml_register_pretrained(self, register):
            for key, row in resnet_zoo.ZOO.items():
                register(key, row)

    registry = Registry([Plugin()], load_entrypoints=False)
    transform, imread = tr.get_transforms_for_pretrained("resnet50_moco_v2", registry)
    assert imread is imread_pil
    out = transform(Image.fromarray(np.full((300, 400, 3), 255, dtype=np.uint8)))
    assert out.shape == (3, 224, 224)
    torch.testing.assert_close(out, normalised(np.full((224, 224, 3), 255, dtype=np.uint8)))


def test_resize_pad_keeps_the_aspect_ratio_and_pads_white_in_the_centre() -> None:
    image = Image.new("RGB", (8, 4), (10, 20, 30))  # wide: 8 x 4
    assert tr.LongestMaxSize(4)(image).size == (4, 2)
    assert tr.LongestMaxSize(16)(Image.new("RGB", (3, 4))).size == (12, 16)
    padded = np.asarray(tr.PadToSquare(4)(tr.LongestMaxSize(4)(image)))
    assert padded.shape == (4, 4, 3)
    assert (padded[0] == 255).all() and (padded[3] == 255).all()  # one white row above, one below
    assert (padded[1:3] == (10, 20, 30)).all()  # a uniform image stays uniform when resized
    assert tr.PadToSquare(2)(image) is image  # large enough already

    tensor = tr.get_normalisation_resize_pad(4)(image)
    expected_image = (torch.tensor([10, 20, 30]) / 255 - MEAN.view(3)) / STD.view(3)
    expected_white = (1 - MEAN.view(3)) / STD.view(3)
    torch.testing.assert_close(tensor[:, 1, 0], expected_image)
    torch.testing.assert_close(tensor[:, 0, 2], expected_white)
    clip = tr.get_normalisation_resize_pad_clip(4)(image)
    torch.testing.assert_close(clip[:, 0, 0], (1 - torch.tensor(tr.CLIP_MEAN)) / torch.tensor(tr.CLIP_STD))
    with pytest.raises(ValueError, match="max_size must be a positive int"):
        tr.LongestMaxSize(0)
