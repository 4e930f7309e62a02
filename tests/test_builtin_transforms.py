"""The core's basic transforms, checked against hand-computed pixels."""

import numpy as np
import pytest
import torch
from PIL import Image

from oml_core.builtins.transforms import NormaliseResize, RandomFlipNormaliseResize, get_normalisation_resize
from oml_core.registry import Registry


def _image() -> np.ndarray:
    array = np.zeros((4, 4, 3), dtype=np.uint8)
    array[:, :2] = (255, 0, 51)  # left half
    array[:, 2:] = (0, 102, 255)  # right half
    return array


def test_normalise_without_resize_is_exact_per_pixel():
    out = NormaliseResize(4, mean=(0.5, 0.5, 0.5), std=(0.5, 0.25, 0.5))(_image())
    assert out.shape == (3, 4, 4) and out.dtype == torch.float32
    # red channel: (1 - 0.5) / 0.5 = 1 on the left, (0 - 0.5) / 0.5 = -1 on the right
    assert torch.allclose(out[0, :, :2], torch.tensor(1.0)) and torch.allclose(
        out[0, :, 2:], torch.tensor(-1.0)
    )
    # green channel on the right: (102/255 - 0.5) / 0.25 = -0.4
    assert torch.allclose(out[1, :, 2:], torch.tensor(-0.4), atol=1e-6)


def test_resize_matches_pil_bilinear_and_accepts_pil_images():
    image = Image.fromarray(_image())
    out = NormaliseResize(8, mean=(0, 0, 0), std=(1, 1, 1))(image)
    expected = np.asarray(image.resize((8, 8), Image.BILINEAR), dtype=np.float32) / 255
    assert out.shape == (3, 8, 8)
    assert torch.allclose(out, torch.from_numpy(expected).permute(2, 0, 1))


def test_flip_with_probability_one_mirrors_the_image():
    plain = NormaliseResize(4)(_image())
    flipped = RandomFlipNormaliseResize(4, p=1.0)(_image())
    assert torch.equal(flipped, plain.flip(-1))
    assert torch.equal(RandomFlipNormaliseResize(4, p=0.0)(_image()), plain)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="im_size must be positive"):
        get_normalisation_resize(0)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\]"):
        RandomFlipNormaliseResize(4, p=2)
    with pytest.raises(TypeError, match="expected a PIL image or an HxWx3 uint8 array"):
        NormaliseResize(4)(np.zeros((4, 4), dtype=np.float32))


def test_registered_as_transforms():
    registry = Registry(load_entrypoints=False)
    transform = registry.build("transforms", {"name": "norm_resize", "args": {"im_size": 16}})
    assert transform(_image()).shape == (3, 16, 16)
    assert registry.build("transforms", {"name": "augs_flip", "args": {"im_size": 8, "p": 1.0}}).p == 1.0
