"""The Unicom checkpoints of the zoo (:class:`~oml_models.unicom.ViTUnicomExtractor`, registered as
``vit_unicom``), by OML's keys.

The files are deepglint/unicom's GitHub releases (the ones OML downloads): float16 state dicts of the
original VisionTransformer, converted by :func:`oml_models.converters.unicom.unicom_to_extractor`. The
release publishes their sha256 (below, checked after a download), not their md5. The extractor is built with
``normalise_features=True``, as OML does.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from oml_core.zoo import PretrainedModel
from oml_models.zoo.clip import unicom_transforms

_URL = "https://github.com/deepglint/unicom/releases/download/{tag}/{filename}"

#: The sha256 of the release files, as deepglint/unicom publishes them.
SHA256: dict[str, str] = {
    "FP16-ViT-B-32.pt": "f9d5696a9b58dbbbefee2d31615ca59084f2895a0fdd2ca4c235e0f9b2793f7a",
    "FP16-ViT-B-16.pt": "c04f324f7c3b4435667236ec6c0eca1cd62f9d64fbfc2d06f8e8e60e6497edef",
    "FP16-ViT-L-14.pt": "ff3ab62ff782876460099e6e0ee17b73a7c01109de2fffd595f16f4129404bbd",
    "FP16-ViT-L-14-336px.pt": "3916ab5aed3b522fc90345be8b4457fe5dad60801ad2af5a6871c0c096e8d7ea",
}


def _row(arch: str, tag: str, filename: str, im_size: int, name: str) -> Callable[[], PretrainedModel]:
    return partial(
        PretrainedModel,
        extractor="vit_unicom",
        init_args={"arch": arch, "normalise_features": True},
        url=_URL.format(tag=tag, filename=filename),
        md5=None,
        sha256=SHA256[filename],
        filename=filename,
        transforms=unicom_transforms(im_size),
        converter="oml_models.converters.unicom:unicom_to_extractor",
        description=f"Unicom {name}, deepglint's weights",
    )


ZOO: dict[str, Callable[[], PretrainedModel]] = {
    "vitb32_unicom": _row("vitb32_unicom", "b32", "FP16-ViT-B-32.pt", 224, "ViT-B/32"),
    "vitb16_unicom": _row("vitb16_unicom", "b16", "FP16-ViT-B-16.pt", 224, "ViT-B/16"),
    "vitl14_unicom": _row("vitl14_unicom", "l14", "FP16-ViT-L-14.pt", 224, "ViT-L/14"),
    "vitl14_336px_unicom": _row(
        "vitl14_336px_unicom", "l14_336px", "FP16-ViT-L-14-336px.pt", 336, "ViT-L/14@336px"
    ),
}

#: The keys as the manual's zoo table spells them ("unicorn"), accepted as aliases.
ALIASES: dict[str, tuple[str, ...]] = {key: (key.replace("_unicom", "_unicorn"),) for key in ZOO}

__all__ = ["ALIASES", "SHA256", "ZOO"]
