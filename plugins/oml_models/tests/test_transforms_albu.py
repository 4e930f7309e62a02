"""OML's albumentations transforms (``norm_albu``, ``norm_resize_albu``, ``norm_resize_albu_clip``) built with the
real library, and ``unicom_transforms``, against values computed by hand: ``(pixel / 255 - mean[c]) / std[c]``."""

from __future__ import annotations

from pathlib import Path

import albumentations as albu
import numpy as np
import pandas as pd
import pytest
import torch
from oml_models import transforms as tr
from oml_models import transforms_albu as ta
from PIL import Image

from oml_core.datasets import ImageLabeledDataset
from oml_core.registry import Registry
from oml_core.utils.images import imread_cv2, imread_pil

IMAGENET = (
    torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1),
    torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1),
)
CLIP = (
    torch.tensor([0.48145466, 0.4578275, 0.40821073]).view(3, 1, 1),
    torch.tensor([0.26862954, 0.26130258, 0.27577711]).view(3, 1, 1),
)
# a 2x4 RGB image (H x W): every pixel different
PIXELS = np.arange(2 * 4 * 3, dtype=np.uint8).reshape(2, 4, 3) * 10


def normalised(pixels: np.ndarray, mean_std: tuple[torch.Tensor, torch.Tensor] = IMAGENET) -> torch.Tensor:
    """The hand formula: HxWx3 uint8 -> [3, H, W] float."""
    mean, std = mean_std
    return (torch.tensor(pixels, dtype=torch.float32).permute(2, 0, 1) / 255 - mean) / std


def padded_to_square(pixels: np.ndarray) -> np.ndarray:
    """The 2x4 image in a 4x4 white square: one white row above and one below."""
    white = np.full((1, 4, 3), 255, dtype=np.uint8)
    return np.concatenate([white, pixels, white])


def test_norm_albu_normalises_a_pil_image_and_an_array_positionally_and_by_name() -> None:
    transform = ta.get_normalisation_albu()
    assert isinstance(transform, albu.Compose)
    expected = normalised(PIXELS)
    torch.testing.assert_close(transform(Image.fromarray(PIXELS)), expected)
    torch.testing.assert_close(transform(PIXELS), expected)
    torch.testing.assert_close(transform(image=PIXELS)["image"], expected)  # albumentations' own call


def test_norm_resize_albu_pads_with_white_to_a_square() -> None:
    # the longer side is 4 already (LongestMaxSize leaves it), PadIfNeeded adds a white row above and below
    expected = normalised(padded_to_square(PIXELS))
    torch.testing.assert_close(ta.get_normalisation_resize_albu(4)(PIXELS), expected)
    # the torchvision counterpart the zoo uses gives the same tensor when no resize is involved
    torch.testing.assert_close(tr.get_normalisation_resize_pad(4)(Image.fromarray(PIXELS)), expected)
    clip = ta.get_normalisation_resize_albu_clip(4)(Image.fromarray(PIXELS))
    torch.testing.assert_close(clip, normalised(padded_to_square(PIXELS), CLIP))


def test_norm_resize_albu_resizes_the_longer_side() -> None:
    out = ta.get_normalisation_resize_albu(8)(
        np.zeros((3, 6, 3), dtype=np.uint8)
    )  # to 4 x 8, padded to 8 x 8
    assert out.shape == (3, 8, 8)
    white, black = (
        normalised(np.full((1, 1, 3), 255, np.uint8))[:, 0, 0],
        normalised(np.zeros((1, 1, 3), np.uint8)),
    )
    torch.testing.assert_close(out[:, 0, 0], white)  # rows 0-1 and 6-7 padding
    torch.testing.assert_close(out[:, 2:6, :], black[:, :1, :1].expand(3, 4, 8))


def test_bad_calls_and_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="one image positionally, or its targets by name"):
        ta.get_normalisation_albu()(PIXELS, image=PIXELS)
    with pytest.raises(ValueError, match="im_size must be a positive int, got 0"):
        ta.get_normalisation_resize_albu(0)


def test_an_albumentations_transform_saves_as_albumentations_yaml(tmp_path: Path) -> None:
    path = tmp_path / "transforms.yaml"
    albu.save(ta.get_normalisation_resize_albu(4), str(path), data_format="yaml")
    text = path.read_text()
    assert "LongestMaxSize" in text and "PadIfNeeded" in text and "Normalize" in text


def test_unicom_transforms_is_a_bicubic_centre_crop_with_clips_statistics() -> None:
    square = PIXELS[:, :2]  # 2x2: the resize and the crop leave it
    torch.testing.assert_close(tr.get_unicom_transforms(2)(Image.fromarray(square)), normalised(square, CLIP))
    assert tr.get_unicom_transforms(224)(Image.new("RGB", (300, 250))).shape == (3, 224, 224)


@pytest.mark.parametrize(
    "name", ["norm_albu", "norm_resize_albu", "norm_resize_albu_clip", "unicom_transforms"]
)
def test_the_registered_names_build_and_transform_a_datasets_images(tmp_path: Path, name: str) -> None:
    Image.fromarray(PIXELS).save(tmp_path / "a.png")
    df = pd.DataFrame(
        {"path": ["a.png"], "label": [0], "split": ["train"], "is_query": [None], "is_gallery": [None]}
    )
    registry = Registry(allow=["oml_models"], strict=True)
    args = {} if name == "norm_albu" else {"im_size": 4}
    transform = registry.build("transforms", {"name": name, "args": args})
    # the datasets' default reader (PIL), and OML's one for albumentations (torchvision's transforms take PIL only)
    for reader in (None, imread_cv2) if "albu" in name else (None,):
        dataset = ImageLabeledDataset(df, dataset_root=tmp_path, transform=transform, f_imread=reader)
        tensor = dataset[0][dataset.input_tensors_key]
        assert tensor.shape == ((3, 2, 4) if name == "norm_albu" else (3, 4, 4))


def test_omls_transforms_modules_resolve_and_pair_readers_as_oml() -> None:
    from oml_core.transforms.images.albumentations import (
        get_normalisation_albu,
        get_normalisation_resize_albu,
    )
    from oml_core.transforms.images.utils import get_im_reader_for_transforms

    assert get_normalisation_albu is ta.get_normalisation_albu
    assert get_normalisation_resize_albu is ta.get_normalisation_resize_albu
    assert get_im_reader_for_transforms(ta.get_normalisation_albu()) is imread_cv2
    assert get_im_reader_for_transforms(albu.Compose([albu.HorizontalFlip()])) is imread_cv2
    assert get_im_reader_for_transforms(tr.get_normalisation_torch()) is imread_pil
    assert get_im_reader_for_transforms(None) is imread_pil
