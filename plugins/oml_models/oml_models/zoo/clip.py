"""The CLIP checkpoints of the zoo (:class:`~oml_models.clip.ViTCLIPExtractor`, registered as ``vit_clip``).

- ``openai_*``: OpenAI's CLIP. OpenAI's own files are TorchScript archives, which
  ``torch.load(weights_only=True)`` refuses; the rows use open_clip's copies of the same weights on the
  Hugging Face hub (``timm/vit_*_clip_*.openai``, ``open_clip_pytorch_model.bin``): plain state dicts of the
  full CLIP model in open_clip's layout. Their md5 is not published (the hub gives sha256 only): not checked.
- ``sber_*``: SberbankAI's ruCLIP, ``pytorch_model.bin`` of the hub (OML's urls and md5s): plain state dicts
  of the full ruCLIP model, whose image tower has OpenAI's layout.

Both are converted by :func:`oml_models.converters.clip.clip_to_extractor` (the ``visual.*`` tensors).
The extractor is built with ``normalise_features=False``, as OML does.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from oml_core.zoo import PretrainedModel
from oml_models.normalisation import CLIP_MEAN, CLIP_STD

_OPENAI_URL = "https://huggingface.co/timm/{repo}.openai/resolve/main/open_clip_pytorch_model.bin"
_SBER_URL = "https://huggingface.co/sberbank-ai/{repo}/resolve/main/pytorch_model.bin"


def clip_transforms(im_size: int) -> dict[str, object]:
    """The ``{name, args}`` of the CLIP checkpoints' preprocessing (``norm_resize_pad_clip``, OML's
    ``norm_resize_albu_clip`` on torchvision): the longer side resized to ``im_size``, white padding to a square,
    CLIP's mean and std."""
    return {"name": "norm_resize_pad_clip", "args": {"im_size": im_size}}


def unicom_transforms(im_size: int) -> dict[str, object]:
    """The ``{name, args}`` of the Unicom checkpoints' preprocessing (deepglint's): the shorter side resized to
    ``im_size`` (bicubic), a centre crop of ``im_size``, CLIP's mean and std."""
    return {
        "name": "norm_resize_hypvit_torch",
        "args": {"im_size": im_size, "crop_size": im_size, "mean": list(CLIP_MEAN), "std": list(CLIP_STD)},
    }


def _row(
    arch: str, url: str, md5: str | None, filename: str, description: str
) -> Callable[[], PretrainedModel]:
    return partial(
        PretrainedModel,
        extractor="vit_clip",
        init_args={"arch": arch, "normalise_features": False},
        url=url,
        md5=md5,
        filename=filename,
        transforms=clip_transforms(int(arch.rsplit("_", 1)[1])),
        converter="oml_models.converters.clip:clip_to_extractor",
        description=description,
    )


def _openai(arch: str, repo: str, name: str) -> Callable[[], PretrainedModel]:
    key = f"openai_{arch}"
    return _row(
        arch,
        _OPENAI_URL.format(repo=repo),
        None,
        f"{key}_open_clip.bin",
        f"CLIP {name} image tower, OpenAI's weights (open_clip's copy)",
    )


def _sber(arch: str, repo: str, md5: str, name: str) -> Callable[[], PretrainedModel]:
    key = f"sber_{arch}"
    return _row(
        arch,
        _SBER_URL.format(repo=repo),
        md5,
        f"{key}.ckpt",
        f"ruCLIP {name} image tower, SberbankAI's weights",
    )


ZOO: dict[str, Callable[[], PretrainedModel]] = {
    "openai_vitb16_224": _openai("vitb16_224", "vit_base_patch16_clip_224", "ViT-B/16"),
    "openai_vitb32_224": _openai("vitb32_224", "vit_base_patch32_clip_224", "ViT-B/32"),
    "openai_vitl14_224": _openai("vitl14_224", "vit_large_patch14_clip_224", "ViT-L/14"),
    "openai_vitl14_336": _openai("vitl14_336", "vit_large_patch14_clip_336", "ViT-L/14@336px"),
    "sber_vitb16_224": _sber(
        "vitb16_224", "ruclip-vit-base-patch16-224", "7882e07674d78c674e33cb892a68bbfc", "ViT-B/16"
    ),
    "sber_vitb32_224": _sber(
        "vitb32_224", "ruclip-vit-base-patch32-224", "e2c4dab46a3cfa608bdd762973e90d32", "ViT-B/32"
    ),
    "sber_vitl14_224": _sber(
        "vitl14_224", "ruclip-vit-large-patch14-224", "9b4a1cd25d15bad4ffd2ba6e34b8a67c", "ViT-L/14"
    ),
}

__all__ = ["ZOO", "clip_transforms", "unicom_transforms"]
