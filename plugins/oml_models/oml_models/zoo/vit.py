"""The vit checkpoints of the zoo (:class:`~oml_models.vit.ViTExtractor`, registered as ``vit``): OML's keys.

- ``*_dino``: the original facebookresearch DINO releases (ImageNet, self-supervised), DINO's format;
- ``*_dinov2``: the original facebookresearch DINOv2 releases (LVD-142M), DINOv2's format;
- ``vits16_{inshop,sop,cars,cub}``: OML's own ViT-S/16 trained on the four benchmarks, OML's format.

Every file is converted on loading by :mod:`oml_models.converters.vit`. ``md5``: the first 6 hex digits of
each file's md5, as OML records them (checked after a download). The transforms are OML's: a resize to
224 x 224 for DINO, the shorter side to 224 and a centre crop for DINOv2 and the InShop/SOP models, the
longer side to 224 and white padding for the CARS/CUB models; ImageNet's mean and std.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from oml_core.zoo import PretrainedModel

_FB_URL = "https://dl.fbaipublicfiles.com"
_OML_URL = "https://oml.daloroserver.com/download/checkpoints"
_CONVERTERS = "oml_models.converters.vit"


#: OML's transforms of these checkpoints, by name (``norm_resize_pad``: OML's ``norm_resize_albu`` on torchvision).
RESIZE = {"name": "norm_resize_torch", "args": {"im_size": 224}}
RESIZE_CROP = {"name": "norm_resize_hypvit_torch", "args": {"im_size": 224, "crop_size": 224}}
RESIZE_PAD = {"name": "norm_resize_pad", "args": {"im_size": 224}}


def _row(
    arch: str,
    url: str,
    md5: str,
    converter: str,
    description: str,
    transforms: dict[str, object],
    normalise_features: bool = False,
) -> Callable[[], PretrainedModel]:
    return partial(
        PretrainedModel,
        extractor="vit",
        init_args={"arch": arch, "normalise_features": normalise_features},
        url=url,
        md5=md5,
        filename=url.rsplit("/", 1)[-1],
        transforms=transforms,
        converter=f"{_CONVERTERS}:{converter}",
        description=description,
    )


def _dino(arch: str, release: str, md5: str, description: str) -> Callable[[], PretrainedModel]:
    url = f"{_FB_URL}/dino/{release}/{release}.pth"
    described = f"{description}, DINO (facebookresearch), ImageNet"
    return _row(arch, url, md5, "dino_to_extractor", described, RESIZE)


def _dinov2(arch: str, release: str, md5: str, description: str) -> Callable[[], PretrainedModel]:
    url = f"{_FB_URL}/dinov2/{release.removesuffix('_reg4')}/{release}_pretrain.pth"
    described = f"{description}, DINOv2 (facebookresearch), LVD-142M"
    return _row(arch, url, md5, "dinov2_to_extractor", described, RESIZE_CROP)


def _oml(
    dataset: str, filename: str, md5: str, normalise_features: bool, description: str, transforms: dict
) -> Callable[[], PretrainedModel]:
    url = f"{_OML_URL}/{dataset}/{filename}"
    described = f"ViT-S/16 (DINO) trained by OML on {description}"
    return _row("vits16", url, md5, "oml_vit_to_extractor", described, transforms, normalise_features)


ZOO: dict[str, Callable[[], PretrainedModel]] = {
    "vits16_dino": _dino("vits16", "dino_deitsmall16_pretrain", "cf0f22", "ViT-S/16"),
    "vits8_dino": _dino("vits8", "dino_deitsmall8_pretrain", "230cd5", "ViT-S/8"),
    "vitb16_dino": _dino("vitb16", "dino_vitbase16_pretrain", "552daf", "ViT-B/16"),
    "vitb8_dino": _dino("vitb8", "dino_vitbase8_pretrain", "556550", "ViT-B/8"),
    "vits14_dinov2": _dinov2("vits14", "dinov2_vits14", "2e405c", "ViT-S/14"),
    "vits14_reg_dinov2": _dinov2("vits14_reg", "dinov2_vits14_reg4", "2a50c5", "ViT-S/14, 4 registers"),
    "vitb14_dinov2": _dinov2("vitb14", "dinov2_vitb14", "8635e7", "ViT-B/14"),
    "vitb14_reg_dinov2": _dinov2("vitb14_reg", "dinov2_vitb14_reg4", "13d13c", "ViT-B/14, 4 registers"),
    "vitl14_dinov2": _dinov2("vitl14", "dinov2_vitl14", "19a02c", "ViT-L/14"),
    "vitl14_reg_dinov2": _dinov2("vitl14_reg", "dinov2_vitl14_reg4", "8b6364", "ViT-L/14, 4 registers"),
    # OML's own (each also on Google Drive, with its id in OML's ViTExtractor.pretrained_models)
    "vits16_inshop": _oml(
        "inshop", "vits16_inshop_a76b85.ckpt", "a76b85", False, "DeepFashion InShop", RESIZE_CROP
    ),
    "vits16_sop": _oml(
        "sop", "vits16_sop_21e743.ckpt", "21e743", True, "Stanford Online Products", RESIZE_CROP
    ),
    "vits16_cars": _oml("cars", "vits16_cars.ckpt", "9f1e59", False, "CARS 196", RESIZE_PAD),
    "vits16_cub": _oml("cub", "vits16_cub.ckpt", "e82633", False, "CUB 200 2011", RESIZE_PAD),
}

__all__ = ["RESIZE", "RESIZE_CROP", "RESIZE_PAD", "ZOO"]
