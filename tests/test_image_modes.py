"""Every image as it is: each PIL mode, written to a real file (PNG, TIFF, PGM, or bytes patched by hand where
PIL cannot write the mode), read by oml's one reader, equals the 8-bit RGB computed here independently (numpy
or plain Python) from the values the file was made of; what cannot be converted, and a directory given as an
image, fail in one line naming the file (and the dataframe row where the pipelines know it). A 16-bit copy of a
dataset trains exactly like its 8-bit original."""

from __future__ import annotations

import io
import math
import shutil
import struct
import sys
import warnings
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image, ImageCms

from oml_core.builtins.transforms import NormaliseResize
from oml_core.cli import main
from oml_core.datasets.image_checks import check_images
from oml_core.datasets.images import ImageBaseDataset, ImageLabeledDataset
from oml_core.datasets.mock import get_mock_dataset_root
from oml_core.registry import ConfigError
from oml_core.utils.images import ImageConversionError, imread_pil, imread_pillow, to_rgb8

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from bad_images import png_chunk  # noqa: E402
from tiny_training import tiny_config  # noqa: E402

H, W = 6, 9


def saved(image: Image.Image, path: Path, **params: object) -> Path:
    image.save(path, **params)
    return path


def read(path: Path | bytes) -> np.ndarray:
    """oml's reader, with any warning an error (a palette with transparency must not warn)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        image = imread_pil(path)
    assert image.mode == "RGB"
    return np.asarray(image)


def grey(values: np.ndarray) -> np.ndarray:
    """An ``HxW`` uint8 array on 3 channels."""
    return np.repeat(np.asarray(values, dtype=np.uint8)[:, :, None], 3, axis=2)


def opened_mode(path: Path) -> str:
    with Image.open(path) as image:
        return image.mode


def uint16_values(rng: np.random.Generator) -> np.ndarray:
    """``H x W`` 16-bit values: the edges of the 8-bit bins, then random ones."""
    edges = [0, 1, 255, 256, 257, 511, 512, 32767, 32768, 65279, 65280, 65534, 65535]
    values = rng.integers(0, 65536, H * W).astype(np.uint16)
    values[: len(edges)] = edges
    return values.reshape(H, W)


# ---------------------------------------------------------------------------------------------- 16 bits


@pytest.mark.parametrize(
    ("mode", "dtype", "suffix", "opened"),
    [
        ("I;16", "<u2", "png", "I;16"),
        ("I;16B", ">u2", "png", "I;16"),
        ("I;16", "<u2", "tif", "I;16"),
        ("I;16B", ">u2", "tif", "I;16B"),
        ("I;16L", "<u2", "tif", "I;16"),
    ],
)
def test_16_bit_grey_images_keep_the_high_byte(tmp_path, mode, dtype, suffix, opened):
    values = uint16_values(np.random.default_rng(1))
    image = Image.frombytes(mode, (W, H), values.astype(dtype).tobytes())
    path = saved(image, tmp_path / f"grey16.{suffix}")
    assert opened_mode(path) == opened
    with Image.open(path) as raw:  # what PIL alone gives: every value above 255 white (the reported fault)
        assert (np.asarray(raw.convert("RGB"))[..., 0] == np.minimum(values, 255)).all()
    assert np.array_equal(read(path), grey(values // 256))


def test_an_8_bit_image_saved_as_16_bits_reads_back_exactly(tmp_path):
    eight = np.arange(256, dtype=np.uint16).reshape(16, 16)
    path = saved(Image.fromarray(eight * 257), tmp_path / "x257.png")
    assert opened_mode(path) == "I;16"
    assert np.array_equal(read(path), grey(eight))
    assert np.array_equal(read(path.read_bytes()), grey(eight))  # encoded bytes: the same conversion


def test_a_16_bit_rgb_png_reads_like_a_16_bit_grey_one(tmp_path):
    """PIL cannot write a 16-bit RGB PNG: it is written here chunk by chunk (PNG colour type 2, depth 16)."""
    rng = np.random.default_rng(2)
    rgb = np.stack([uint16_values(rng), uint16_values(rng), uint16_values(rng)], axis=-1)
    rows = b"".join(b"\x00" + row.astype(">u2").tobytes() for row in rgb)
    header = struct.pack(">IIBBBBB", W, H, 16, 2, 0, 0, 0)
    path = tmp_path / "rgb16.png"
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + png_chunk(b"IHDR", header)
        + png_chunk(b"IDAT", zlib.compress(rows))
        + png_chunk(b"IEND", b"")
    )
    assert np.array_equal(read(path), (rgb // 256).astype(np.uint8))


# ------------------------------------------------------------------------------------------------ mode I


def test_a_32_bit_tiff_is_read_in_the_non_negative_int32_range(tmp_path):
    edges = [0, 1, 2**23 - 1, 2**23, 2**24, 2**31 - 2**23 - 1, 2**31 - 2**23, 2**31 - 1]
    values = np.random.default_rng(3).integers(0, 2**31, H * W).astype(np.int32)
    values[: len(edges)] = edges
    values = values.reshape(H, W)
    path = saved(Image.fromarray(values), tmp_path / "i32.tif")
    assert opened_mode(path) == "I"
    assert np.array_equal(read(path), grey(values // 2**23))


def test_a_signed_16_bit_tiff_is_read_in_the_non_negative_int16_range(tmp_path):
    values = np.array([[0, 1, 127, 128, 255, 256, 32639, 32640, 32767]], dtype=np.int16)
    path = saved(
        Image.frombytes("I;16", (9, 1), values.astype("<i2").tobytes()),
        tmp_path / "s16.tif",
        tiffinfo={339: 2},
    )  # SampleFormat 2: signed
    assert opened_mode(path) == "I"
    assert np.array_equal(read(path), grey(values // 128))


def test_a_16_bit_pgm_opened_as_mode_i_is_read_in_the_16_bit_range(tmp_path):
    values = uint16_values(np.random.default_rng(4))
    path = saved(Image.fromarray(values), tmp_path / "grey16.pgm")
    assert opened_mode(path) == "I"
    assert np.array_equal(read(path), grey(values // 256))


def test_a_negative_integer_pixel_is_refused_naming_the_file_and_the_pixel(tmp_path):
    values = np.array([[5, 7, 9], [3, -300, -1]], dtype=np.int16)
    path = saved(
        Image.frombytes("I;16", (3, 2), values.astype("<i2").tobytes()),
        tmp_path / "neg.tif",
        tiffinfo={339: 2},
    )
    with pytest.raises(ImageConversionError) as caught:
        imread_pil(path)
    assert str(caught.value) == (
        f"cannot convert the image '{path}' (mode I) to 8-bit RGB: 2 of 6 pixels are negative (the first at "
        "x=1, y=1: -300); integer pixels are read as intensities in [0, 32767]"
    )


def test_an_in_memory_mode_i_image_is_taken_as_32_bit():
    values = np.array([[0, 2**23 - 1, 2**23, 2**31 - 1]], dtype=np.int32)
    assert np.array_equal(np.asarray(to_rgb8(Image.fromarray(values))), grey(values // 2**23))


# ------------------------------------------------------------------------------------------------ mode F


def test_float_pixels_in_0_1_are_scaled_by_255_and_rounded_half_up(tmp_path):
    values = np.random.default_rng(5).random(H * W).astype(np.float32)
    edges = [0.0, 1.0, 0.25, 0.5, 0.75, 2**-9, 2**-8]  # exact in float32: 255 v = 63.75, 127.5, 191.25 ...
    values[: len(edges)] = edges
    values = values.reshape(H, W)
    path = saved(Image.fromarray(values), tmp_path / "f.tif")
    assert opened_mode(path) == "F"
    expected = [[math.floor(float(v) * 255 + 0.5) for v in row] for row in values]
    assert np.array_equal(read(path), grey(np.array(expected)))
    assert read(path)[0, :7, 0].tolist() == [0, 255, 64, 128, 191, 0, 1]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -0.01, 1.5])
def test_a_float_pixel_that_is_not_an_intensity_is_refused_in_one_line(tmp_path, bad):
    values = np.full((4, 5), 0.5, dtype=np.float32)
    values[2, 3] = bad
    path = saved(Image.fromarray(values), tmp_path / "bad.tif")
    with pytest.raises(ImageConversionError) as caught:
        imread_pil(path)
    shown = str(np.float64(np.float32(bad)))
    assert str(caught.value) == (
        f"cannot convert the image '{path}' (mode F) to 8-bit RGB: 1 of 20 pixels is not a finite number in "
        f"[0, 1] (the first at x=3, y=2: {shown}); float pixels are read as intensities in [0, 1] (scaled by 255)"
    )


# ------------------------------------------------------------------------------------- 8-bit colour modes


def test_bilevel_grey_and_rgb(tmp_path):
    rng = np.random.default_rng(6)
    bits = rng.integers(0, 2, (H, W)).astype(bool)
    path = saved(Image.fromarray(bits), tmp_path / "one.png")
    assert opened_mode(path) == "1"
    assert np.array_equal(read(path), grey(bits * 255))

    levels = rng.integers(0, 256, (H, W), dtype=np.uint8)
    path = saved(Image.fromarray(levels), tmp_path / "l.png")
    assert opened_mode(path) == "L"
    assert np.array_equal(read(path), grey(levels))

    rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    assert np.array_equal(read(saved(Image.fromarray(rgb), tmp_path / "rgb.png")), rgb)


def _palette_image(rng: np.random.Generator) -> tuple[Image.Image, np.ndarray, np.ndarray]:
    palette = rng.integers(0, 256, (256, 3), dtype=np.uint8)
    indices = rng.integers(0, 256, (H, W), dtype=np.uint8)
    indices[0, :3] = [0, 1, 2]
    image = Image.frombytes("P", (W, H), indices.tobytes())
    image.putpalette(palette.tobytes())
    return image, palette, indices


@pytest.mark.parametrize(
    "transparency",
    [None, 1, bytes([0, 128, 255] + [255] * 253)],
    ids=["opaque", "one transparent index", "alpha per index"],
)
def test_a_palette_png_gives_each_index_its_colour_with_alpha_dropped(tmp_path, transparency):
    image, palette, indices = _palette_image(np.random.default_rng(7))
    params = {} if transparency is None else {"transparency": transparency}
    path = saved(image, tmp_path / "p.png", **params)
    assert opened_mode(path) == "P"
    assert np.array_equal(read(path), palette[indices])


def test_a_palette_with_alpha_band_gives_each_index_its_colour(tmp_path):
    rng = np.random.default_rng(8)
    image, palette, indices = _palette_image(rng)
    alpha = rng.integers(0, 256, (H, W), dtype=np.uint8)
    alpha[0, 0] = 0
    image = Image.frombytes("PA", (W, H), np.stack([indices, alpha], axis=-1).tobytes())
    image.putpalette(palette.tobytes())
    path = saved(image, tmp_path / "pa.tif")
    assert opened_mode(path) == "PA"
    assert np.array_equal(read(path), palette[indices])


@pytest.mark.parametrize(("mode", "bands"), [("LA", 1), ("RGBA", 3)])
def test_alpha_is_dropped_keeping_the_stored_colour(tmp_path, mode, bands):
    rng = np.random.default_rng(9)
    colour = rng.integers(0, 256, (H, W, bands), dtype=np.uint8)
    alpha = rng.integers(0, 256, (H, W, 1), dtype=np.uint8)
    alpha[0, :4] = 0  # fully transparent pixels keep their colour too
    path = saved(
        Image.frombytes(mode, (W, H), np.concatenate([colour, alpha], -1).tobytes()), tmp_path / "a.png"
    )
    assert opened_mode(path) == mode
    assert np.array_equal(read(path), np.repeat(colour, 3 // bands, axis=2))


def _with_associated_alpha(tiff: bytes) -> bytes:
    """A little-endian TIFF whose ExtraSamples tag (338) is patched from 2 (unassociated alpha, the only kind PIL
    writes) to 1 (associated: premultiplied)."""
    data = bytearray(tiff)
    assert data[:4] == b"II*\x00"
    (ifd,) = struct.unpack_from("<I", data, 4)
    (n_entries,) = struct.unpack_from("<H", data, ifd)
    for entry in range(ifd + 2, ifd + 2 + 12 * n_entries, 12):
        tag, kind, count, value = struct.unpack_from("<HHIH", data, entry)
        if tag == 338:
            assert (kind, count, value) == (3, 1, 2)
            struct.pack_into("<H", data, entry + 8, 1)
            return bytes(data)
    raise AssertionError("the TIFF has no ExtraSamples tag")


@pytest.mark.parametrize(("mode", "bands", "opened"), [("LA", 1, "La"), ("RGBA", 3, "RGBA")])
def test_premultiplied_alpha_is_undone_then_dropped(tmp_path, mode, bands, opened):
    rng = np.random.default_rng(10)
    alpha = rng.integers(1, 256, (H, W, 1)).astype(np.int64)
    colour = rng.integers(0, 256, (H, W, bands)) * alpha // 255  # premultiplied: colour <= alpha
    alpha[0, 0] = 0
    colour[0, 0] = 0
    colour[0, 1], alpha[0, 1] = 3, 2  # past the alpha: clipped to 255
    buffer = io.BytesIO()
    pixels = np.concatenate([colour, alpha], -1).astype(np.uint8)
    Image.frombytes(mode, (W, H), pixels.tobytes()).save(buffer, format="TIFF")
    path = tmp_path / "premultiplied.tif"
    path.write_bytes(_with_associated_alpha(buffer.getvalue()))
    assert opened_mode(path) == opened
    straight = np.where(alpha > 0, np.minimum(255, 255 * colour // np.maximum(alpha, 1)), 0)
    assert np.array_equal(read(path), np.repeat(straight, 3 // bands, axis=2).astype(np.uint8))


def test_premultiplied_rgba_in_memory_is_undone_then_dropped():
    """No PIL reader opens ``RGBa`` (see the TIFF case above), but an image of it converts by the same rule."""
    pixels = np.array(
        [[[100, 50, 20, 200], [2, 1, 1, 3], [0, 0, 0, 0], [200, 200, 200, 100]]], dtype=np.uint8
    )
    image = Image.frombytes("RGBa", (4, 1), pixels.tobytes())
    assert np.asarray(to_rgb8(image)).tolist() == [[[127, 63, 25], [170, 85, 85], [0, 0, 0], [255, 255, 255]]]


def test_cmyk_every_pair_of_ink_and_black(tmp_path):
    """All 65536 pairs (C, K), M and Y running over other values: R = round((255 - C)(255 - K) / 255)."""
    k, c = np.meshgrid(np.arange(256), np.arange(256), indexing="ij")
    m, y = (c + 85) % 256, (7 * k + c) % 256
    cmyk = np.stack([c, m, y, k], axis=-1).astype(np.uint8)
    path = saved(Image.frombytes("CMYK", (256, 256), cmyk.tobytes()), tmp_path / "cmyk.tif")
    assert opened_mode(path) == "CMYK"
    expected = ((255 - cmyk[..., :3].astype(np.int64)) * (255 - k[..., None]) * 2 + 255) // 510
    assert np.array_equal(read(path), expected)


def test_ycbcr_by_the_jfif_formula(tmp_path):
    rng = np.random.default_rng(11)
    ycbcr = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
    ycbcr[0, :4] = [[0, 128, 128], [255, 128, 128], [255, 255, 255], [0, 0, 0]]
    path = saved(Image.frombytes("YCbCr", (16, 16), ycbcr.tobytes()), tmp_path / "ycc.tif")
    assert opened_mode(path) == "YCbCr"

    def pixel(y: int, cb: int, cr: int) -> list[int]:
        rgb = (
            y + 1.402 * (cr - 128),
            y - 0.344136 * (cb - 128) - 0.714136 * (cr - 128),
            y + 1.772 * (cb - 128),
        )
        return [min(255, max(0, math.floor(v + 0.5))) for v in rgb]

    expected = [[pixel(*(int(v) for v in p)) for p in row] for row in ycbcr]
    assert read(path).tolist() == expected
    assert expected[0][:2] == [[0, 0, 0], [255, 255, 255]]


#: Linear sRGB from XYZ (D50), Bradford-adapted (Lindbloom), and the D50 white.
SRGB_FROM_XYZ_D50 = [
    [3.1338561, -1.6168667, -0.4906146],
    [-0.9787684, 1.9161415, 0.0334540],
    [0.0719453, -0.2289914, 1.4052427],
]
WHITE_D50 = (0.9642, 1.0, 0.8249)


def lab_to_srgb8(l_byte: int, a_star: int, b_star: int) -> list[int]:
    """CIE L*a*b* (D50) to 8-bit sRGB, one pixel, from the definitions."""
    f_y = (l_byte * 100 / 255 + 16) / 116
    f_xyz = (f_y + a_star / 500, f_y, f_y - b_star / 200)
    xyz = [w * (t**3 if t > 6 / 29 else 3 * (6 / 29) ** 2 * (t - 4 / 29)) for w, t in zip(WHITE_D50, f_xyz)]
    out = []
    for row in SRGB_FROM_XYZ_D50:
        linear = min(1.0, max(0.0, sum(m * v for m, v in zip(row, xyz))))
        encoded = 12.92 * linear if linear <= 0.0031308 else 1.055 * linear ** (1 / 2.4) - 0.055
        out.append(min(255, max(0, math.floor(encoded * 255 + 0.5))))
    return out


def test_lab_by_the_cie_definitions(tmp_path):
    """L, a*, b* (signed bytes, as a CIELab TIFF stores them), many in the sRGB gamut and some far out of it."""
    rng = np.random.default_rng(12)
    lightness = rng.integers(20, 236, (16, 16))
    a_b = rng.integers(-30, 31, (16, 16, 2))
    a_b[0] = rng.integers(-128, 128, (16, 2))  # the first row far out of gamut: clipped
    lightness[1, :3] = [0, 255, 128]
    a_b[1, :3] = 0
    raw = np.concatenate([lightness[..., None], a_b], axis=-1)
    path = saved(Image.frombytes("LAB", (16, 16), raw.astype(np.uint8).tobytes()), tmp_path / "lab.tif")
    assert opened_mode(path) == "LAB"
    expected = [[lab_to_srgb8(*(int(v) for v in p)) for p in row] for row in raw]
    got = read(path)
    assert got.tolist() == expected
    assert expected[1][:3] == [[0, 0, 0], [255, 255, 255], [119, 119, 119]]
    # and with LittleCMS's Lab (D50) to sRGB transform, unoptimised (PIL's convert("RGB") uses its 8-bit
    # look-up table, off by up to 20 levels in dark colours), within 1 level of rounding
    with Image.open(path) as image:
        exact = ImageCms.buildTransform(
            ImageCms.createProfile("LAB"),
            ImageCms.createProfile("sRGB"),
            "LAB",
            "RGB",
            flags=ImageCms.Flags.NOOPTIMIZE,
        )
        cms = np.asarray(exact.apply(image)).astype(np.int64)
    assert np.abs(cms - got).max() <= 1


def test_a_mode_no_reader_opens_is_refused_by_name():
    with pytest.raises(
        ImageConversionError, match=r"^cannot convert the image '<in-memory image>' \(mode HSV\) "
    ):
        to_rgb8(Image.new("HSV", (2, 2)))


def test_oml_s_name_of_the_reader(tmp_path: Path):
    # OML's name and parameter name (im_src) of imread_pil: the same pixels
    path = tmp_path / "la.png"
    Image.fromarray(np.array([[0, 128], [255, 7]], dtype=np.uint8), mode="L").save(path)
    read = imread_pillow(im_src=path)
    assert read.mode == "RGB"
    np.testing.assert_array_equal(np.asarray(read), np.asarray(imread_pil(path)))
    np.testing.assert_array_equal(np.asarray(read)[..., 0], [[0, 128], [255, 7]])


# ------------------------------------------------------------------------- the datasets and the transforms


def _grey_pair(tmp_path: Path) -> tuple[Path, Path, np.ndarray]:
    """An 8-bit grey PNG and its 16-bit copy (``v * 257``)."""
    levels = np.random.default_rng(13).integers(0, 256, (20, 30)).astype(np.uint16)
    eight = saved(Image.fromarray(levels.astype(np.uint8)), tmp_path / "eight.png")
    sixteen = saved(Image.fromarray(levels * 257), tmp_path / "sixteen.png")
    return eight, sixteen, levels


def test_a_dataset_reading_raw_pil_images_converts_them_as_the_reader_does(tmp_path):
    """``f_imread=Image.open`` hands the dataset an ``I;16`` image: the default transform converts it through
    the same conversion, and so does the core's resize transform."""
    eight, sixteen, _ = _grey_pair(tmp_path)
    raw = ImageBaseDataset([eight, sixteen], f_imread=Image.open)
    assert raw.read_image(1).mode == "I;16"
    assert torch.equal(raw[0]["input_tensors"], raw[1]["input_tensors"])
    assert np.array_equal(raw.visualize(0), raw.visualize(1))
    resize = NormaliseResize(8)
    assert torch.equal(resize(Image.open(eight)), resize(Image.open(sixteen)))


def test_a_16_bit_query_finds_its_8_bit_copy_in_a_gallery_index(tmp_path):
    """``oml search`` by image paths reads through the same reader: the 16-bit copy of a gallery image is its
    nearest item at distance 0, with the embedding of the 8-bit original."""
    from oml_core.index import GalleryIndex

    rng = np.random.default_rng(14)
    levels = [rng.integers(0, 256, (16, 16)).astype(np.uint16) for _ in range(4)]
    gallery = tmp_path / "gallery"
    gallery.mkdir()
    paths = [saved(Image.fromarray(v.astype(np.uint8)), gallery / f"{i}.png") for i, v in enumerate(levels)]
    index = GalleryIndex.from_folder(
        gallery,
        extractor={"name": "tiny_conv", "args": {"feat_dim": 8}},
        transforms={"name": "norm_resize", "args": {"im_size": 16}},
    )
    query = saved(Image.fromarray(levels[2] * 257), tmp_path / "query16.png")
    assert opened_mode(query) == "I;16"
    ((nearest, second),) = index.search([query], top_k=2)
    assert nearest.path == str(paths[2]) and nearest.distance < 1e-5 < second.distance
    assert torch.equal(index.embed([query]), index.embed([paths[2]]))


def test_a_directory_as_an_image_is_named_as_a_directory(tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    line = f"'{folder}' is a directory, not an image file"
    with pytest.raises(IsADirectoryError) as caught:
        imread_pil(folder)
    assert str(caught.value) == line

    df = pd.DataFrame({"label": [0, 1], "path": ["good.png", "images"]})
    saved(Image.new("RGB", (4, 4)), tmp_path / "good.png")
    dataset = ImageLabeledDataset(df, dataset_root=tmp_path)
    with pytest.raises(IsADirectoryError) as caught:
        dataset[1]
    assert str(caught.value) == line

    with pytest.raises(ConfigError) as caught:
        check_images(dataset.paths, dataset.f_imread, 1, "train", progress_bar=False, rows=[4, 7])
    assert str(caught.value) == f"train: 1 of 2 image files cannot be read: row 7 '{folder}' ({line})"


def test_an_image_that_cannot_be_converted_is_named_by_row_before_training(tmp_path):
    values = np.zeros((3, 3), dtype=np.float32)
    values[1, 2] = math.nan
    bad = saved(Image.fromarray(values), tmp_path / "nan.tif")
    good = saved(Image.new("L", (3, 3)), tmp_path / "good.png")
    with pytest.raises(ConfigError) as caught:
        check_images([good, bad], imread_pil, 1, "train", progress_bar=False, rows=[0, 5])
    message = str(caught.value)
    assert message.startswith(
        f"train: 1 of 2 image files cannot be read: row 5 '{bad}' (cannot convert the image '{bad}' (mode F) "
        "to 8-bit RGB: 1 of 9 pixels is not a finite number in [0, 1] (the first at x=2, y=1: nan)"
    )
    assert "\n" not in message
    with pytest.raises(ImageConversionError, match="nan.tif"):  # found late (check off): the same line
        ImageBaseDataset([good, bad])[1]


def test_oml_train_names_a_directory_in_the_dataframe_in_one_line(
    oml_cache_dir, tmp_path, monkeypatch, capsys
):
    """``oml train`` (the console script's ``main``, in process) stops before training with one line."""
    root = tmp_path / "data"
    shutil.copytree(get_mock_dataset_root(oml_cache_dir), root)
    df = pd.read_csv(root / "df.csv")
    df.loc[130, "path"] = "images"
    df.to_csv(root / "df.csv", index=False)
    monkeypatch.delenv("OML_TRACEBACK", raising=False)
    assert main(["train", f"dataset_root={root}", f"logs_root={tmp_path / 'logs'}", "max_epochs=1"]) == 2
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr
    (line,) = [line for line in stderr.splitlines() if line.startswith("oml train: ")]
    assert line.startswith("oml train: error: ")
    assert "column 'path': a directory, not an image file at row 130 ('images')" in line
    assert "does not exist" not in line
    assert not list((tmp_path / "logs").rglob("*.ckpt"))


# ---------------------------------------------------------------------------------------------- training


@pytest.mark.slow
def test_a_16_bit_copy_of_a_dataset_trains_exactly_like_the_8_bit_original(oml_cache_dir, tmp_path):
    from oml_core.lightning.pipelines.train import extractor_training_pipeline

    mock = get_mock_dataset_root(oml_cache_dir)
    df = pd.read_csv(mock / "df.csv")
    copies = df.assign(path=[str(Path(path).with_suffix(".png")) for path in df["path"]])  # 16 bits: PNG
    roots = {bits: tmp_path / f"grey{bits}" for bits in (8, 16)}
    for root in roots.values():
        (root / "images").mkdir(parents=True)
        copies.to_csv(root / "df.csv", index=False)
    for path, copy in zip(df["path"], copies["path"]):
        with Image.open(mock / path) as image:
            levels = np.asarray(image.convert("L")).astype(np.uint16)
        Image.fromarray(levels.astype(np.uint8)).save(roots[8] / copy)
        Image.fromarray(levels * 257).save(roots[16] / copy)
    assert opened_mode(roots[16] / copies["path"][0]) == "I;16"

    results = {
        bits: extractor_training_pipeline(
            tiny_config(tmp_path / f"logs{bits}", dataset_root=str(root), max_epochs=1, logs_folder="run")
        )
        for bits, root in roots.items()
    }
    assert results[8].metrics == results[16].metrics
    assert results[8].metrics["OVERALL/cmc/1"] > 0
    weights = {
        bits: torch.load(result.last_checkpoint, weights_only=True)["state_dict"]
        for bits, result in results.items()
    }
    assert weights[8].keys() == weights[16].keys()
    assert all(torch.equal(weights[8][key], weights[16][key]) for key in weights[8])
