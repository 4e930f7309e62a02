"""OML's image modules at their paths: ``oml_core.utils.images.images`` (the readers, ``imread_cv2`` on OpenCV)
and ``oml_core.utils.images.images_resize`` (keep-aspect-ratio resizing), with hand-computed values."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import oml_core.utils.images as images_package
from oml_core.utils.images import images as images_module
from oml_core.utils.images.images import (
    draw_bbox,
    imread_cv2,
    imread_pil,
    imread_pillow,
    square_pad,
    tensor_to_numpy_image,
)
from oml_core.utils.images.images_resize import (
    get_karesize_param,
    inverse_karesize_bboxes,
    inverse_karesize_image,
    karesize_bboxes,
    karesize_image,
    resize_ndarray,
    resize_tensor,
)

PIXELS = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 10


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_the_package_keeps_the_module_names_and_oml_names_resolve():
    assert images_package.imread_pil is images_module.imread_pil
    assert (
        images_package.imread_pillow is images_module.imread_pillow is imread_pillow
    )  # OML's parameter name
    assert images_package.imread_cv2 is imread_cv2
    assert images_package.to_rgb8 is images_module.to_rgb8
    assert set(images_package.__all__) == set(images_module.__all__)


# ------------------------------------------------------------------------------------------------ imread_cv2
def test_imread_cv2_reads_rgb_as_pil_does_from_a_path_and_from_bytes(tmp_path: Path):
    path = tmp_path / "rgb.png"
    Image.fromarray(PIXELS).save(path)
    from_path = imread_cv2(path)
    assert from_path.dtype == np.uint8 and from_path.shape == (2, 3, 3)
    assert np.array_equal(from_path, PIXELS)  # RGB, not OpenCV's BGR
    assert np.array_equal(imread_cv2(str(path)), PIXELS)
    assert np.array_equal(imread_cv2(path.read_bytes()), PIXELS)
    assert np.array_equal(np.asarray(imread_pillow(path)), PIXELS)


def test_imread_cv2_drops_alpha_and_puts_grey_on_three_channels():
    rgba = np.dstack([PIXELS, np.full((2, 3), 7, dtype=np.uint8)])
    assert np.array_equal(imread_cv2(png_bytes(Image.fromarray(rgba, mode="RGBA"))), PIXELS)
    grey = np.array([[0, 100, 255]], dtype=np.uint8)
    assert np.array_equal(
        imread_cv2(png_bytes(Image.fromarray(grey, mode="L"))), np.repeat(grey[..., None], 3, 2)
    )


def test_imread_cv2_keeps_the_high_byte_of_16_bit_pixels_as_imread_pil():
    values = np.array([[0, 255, 256, 65535]], dtype=np.uint16)  # >> 8: 0, 0, 1, 255
    data = png_bytes(Image.frombytes("I;16", (4, 1), values.astype("<u2").tobytes()))
    expected = np.repeat(np.array([[0, 0, 1, 255]], dtype=np.uint8)[..., None], 3, axis=2)
    assert np.array_equal(imread_cv2(data), expected)
    assert np.array_equal(np.asarray(imread_pil(data)), expected)


def test_imread_cv2_names_what_it_cannot_read(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="image file not found: '.*missing.png'"):
        imread_cv2(tmp_path / "missing.png")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        imread_cv2(tmp_path)
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not an image at all")
    with pytest.raises(OSError, match="cannot read the image file '.*broken.png': OpenCV cannot decode it"):
        imread_cv2(broken)
    with pytest.raises(OSError, match="cannot decode an image from 0 bytes"):
        imread_cv2(b"")
    with pytest.raises(TypeError, match="imread_cv2 expects a path .* got int"):
        imread_cv2(3)  # type: ignore[arg-type]


def test_imread_cv2_without_opencv_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "cv2", None)  # what Python does for a module that cannot be imported
    with pytest.raises(
        ModuleNotFoundError, match=r'imread_cv2 needs OpenCV .*pip install "oml-models\[cv2\]"'
    ):
        imread_cv2(png_bytes(Image.fromarray(PIXELS)))


# ----------------------------------------------------------------------------------- the other OML helpers
def test_tensor_to_numpy_image_stretches_to_the_full_range():
    tensor = torch.tensor([[[-1.0, 0.0, 1.0]]])  # 1 x 1 x 3 -> HxWxC 1 x 3 x 1: (v + 1) / 2 * 255, floored
    assert tensor_to_numpy_image(tensor).tolist() == [[[0], [127], [255]]]
    assert tensor_to_numpy_image(torch.full((3, 2, 2), 5.0)).tolist() == np.zeros((2, 2, 3)).tolist()


def test_square_pad_centres_the_image_on_white():
    padded = square_pad(np.zeros((1, 3, 3), dtype=np.uint8))  # one row: one white row above, one below
    assert padded.shape == (3, 3, 3)
    assert (padded[0] == 255).all() and (padded[1] == 0).all() and (padded[2] == 255).all()
    assert square_pad(np.zeros((2, 1), dtype=np.uint8)).tolist() == [
        [0, 255],
        [0, 255],
    ]  # the one-pixel margin: right


def test_draw_bbox_outlines_inside_the_box():
    image = np.zeros((10, 10, 3), dtype=np.uint8)
    drawn = draw_bbox(image, None, (255, 0, 0))  # thickness max(3, int(0.05 * 10)) = 3
    assert drawn[0, 0].tolist() == [255, 0, 0] and drawn[2, 5].tolist() == [255, 0, 0]
    assert drawn[3, 5].tolist() == [0, 0, 0] and drawn[5, 5].tolist() == [0, 0, 0]
    assert image.sum() == 0  # a copy
    boxed = draw_bbox(np.zeros((20, 20, 3), dtype=np.uint8), (10, 10, 19, 19), (0, 255, 0))
    assert boxed[5, 5].tolist() == [0, 0, 0] and boxed[10, 15].tolist() == [0, 255, 0]


# ------------------------------------------------------------------------------------------------ karesize
def test_karesize_param_hand_computed():
    # 100 x 200 into 100 x 100: s = min(1, 0.5) = 0.5, resized 50 x 100, 25 rows above and below
    assert get_karesize_param((100, 200), (100, 100)) == (0.5, (50, 100), [0, 0, 25, 25])
    # 3 x 3 into 4 x 7: s = 4/3, resized 4 x 4, 3 columns to pad: 1 left, 2 right
    scale, resized, padding = get_karesize_param((3, 3), (4, 7))
    assert scale == pytest.approx(4 / 3) and resized == (4, 4) and padding == [1, 2, 0, 0]


def test_karesize_image_pads_with_zeros_around_the_resized_image():
    image = np.arange(1, 9, dtype=np.float64).reshape(2, 4)  # into 4 x 4: s = 1, one zero row above and below
    padded = karesize_image(image, (4, 4))
    assert padded.tolist() == [[0, 0, 0, 0], [1, 2, 3, 4], [5, 6, 7, 8], [0, 0, 0, 0]]
    assert np.array_equal(inverse_karesize_image(padded, (2, 4)), image)
    assert karesize_image(image, (2, 4)) is image

    tensor = torch.tensor(
        [[[1.0, 2.0], [3.0, 4.0]]]
    )  # C x H x W 1 x 2 x 2 into 2 x 4: a zero column each side
    padded_tensor = karesize_image(tensor, (2, 4))
    assert padded_tensor.tolist() == [[[0, 1, 2, 0], [0, 3, 4, 0]]]
    assert torch.equal(inverse_karesize_image(padded_tensor, (2, 2)), tensor)


def test_karesize_image_shapes_of_every_layout():
    assert karesize_image(np.zeros((30, 60, 3), dtype=np.uint8), (40, 40)).shape == (40, 40, 3)
    assert karesize_image(torch.zeros(2, 3, 30, 60), (40, 40)).shape == (2, 3, 40, 40)
    assert inverse_karesize_image(torch.zeros(2, 3, 40, 40), (30, 60)).shape == (2, 3, 30, 60)
    assert inverse_karesize_image(np.zeros((40, 40)), (30, 60)).shape == (30, 60)


def test_resize_keeps_dtype_and_range():
    constant = np.full((3, 5, 3), 200, dtype=np.uint8)
    resized = resize_ndarray(constant, (7, 4))
    assert resized.dtype == np.uint8 and resized.shape == (7, 4, 3) and (resized == 200).all()
    step = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    upsampled = resize_tensor(step, (1, 8))
    assert upsampled.min() >= 0 and upsampled.max() <= 1  # bicubic overshoot clipped to the input's range
    no_mask = resize_tensor(torch.zeros(4, 4, dtype=torch.bool), (8, 8))
    assert (
        no_mask.dtype == torch.bool and not no_mask.any()
    )  # OML's threshold made an all-False mask all True
    mask = resize_tensor(torch.tensor([[False, True], [False, True]]), (2, 4))
    assert mask.tolist() == [[False, False, True, True], [False, False, True, True]]


def test_karesize_bboxes_hand_computed_and_inverse():
    # s = 0.5, pad_top = 25 (see test_karesize_param_hand_computed)
    boxes = np.array([[20.0, 10.0, 120.0, 60.0]])
    moved = karesize_bboxes(boxes, (100, 200), (100, 100))
    assert moved.tolist() == [[10.0, 30.0, 60.0, 55.0]]
    assert boxes.tolist() == [[20.0, 10.0, 120.0, 60.0]]  # the input is not changed
    assert inverse_karesize_bboxes(moved, (100, 100), (100, 200)).tolist() == boxes.tolist()
    tensor_boxes = torch.tensor([[20, 10, 120, 60]])
    moved_tensor = karesize_bboxes(tensor_boxes, (100, 200), (100, 100))
    assert moved_tensor.tolist() == [[10.0, 30.0, 60.0, 55.0]]
    assert inverse_karesize_bboxes(moved_tensor, (100, 100), (100, 200)).tolist() == [
        [20.0, 10.0, 120.0, 60.0]
    ]


def test_karesize_bad_input_is_both_oml_and_oml_core_error():
    with pytest.raises(TypeError, match="numpy array or a torch tensor as the image, got list"):
        karesize_image([[1, 2]], (4, 4))  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match=r"expected N x 4 boxes .* got the shape \(4,\)"):
        karesize_bboxes(np.zeros(4), (2, 2), (4, 4))  # OML asserts: AssertionError is caught too
    with pytest.raises(ValueError, match="HxW or HxWxC array, got the shape"):
        resize_ndarray(np.zeros((1, 2, 3, 4)), (2, 2))
