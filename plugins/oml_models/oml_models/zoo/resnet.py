"""The ResNet checkpoints of the zoo (those of OML's ``ResnetExtractor.pretrained_models``).

- ``resnet50_moco_v2``: MoCo v2, 800 epochs (facebookresearch/moco); the release file stores the query
  encoder under ``module.encoder_q.``, converted by :func:`oml_models.converters.resnet.moco_to_torchvision`.
  Built as OML does: the ``resnet50_projector`` arch (MoCo's 2-layer head as ``fc``), removed by
  ``remove_fc``, and GeM pooling with ``p = 5``.
- ``resnet{18,34,50,101,152}_imagenet1k_v1``: torchvision's ``IMAGENET1K_V1`` weights, plain torchvision
  state dicts; ``fc`` removed.

Digests: MoCo's md5 starts with ``a04e12f8`` (its README, OML's check); torchvision's file names carry the
first 8 hex digits of their sha256 (what torchvision itself checks): both are checked after a download.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from oml_core.zoo import PretrainedModel

#: The evaluation transform of these checkpoints: shorter side to 256 (bicubic), centre crop of 224.
IMAGENET_EVAL_TRANSFORMS = {"name": "norm_resize_hypvit_torch", "args": {"im_size": 256, "crop_size": 224}}

MOCO_V2_URL = (
    "https://dl.fbaipublicfiles.com/moco/moco_checkpoints/moco_v2_800ep/moco_v2_800ep_pretrain.pth.tar"
)

#: torchvision's ``ResNet*_Weights.IMAGENET1K_V1.url`` of each arch.
TORCHVISION_IMAGENET1K_V1_URLS = {
    "resnet18": "https://download.pytorch.org/models/resnet18-f37072fd.pth",
    "resnet34": "https://download.pytorch.org/models/resnet34-b627a593.pth",
    "resnet50": "https://download.pytorch.org/models/resnet50-0676ba61.pth",
    "resnet101": "https://download.pytorch.org/models/resnet101-63fe2227.pth",
    "resnet152": "https://download.pytorch.org/models/resnet152-394f9c45.pth",
}


def _row(url: str, init_args: dict[str, object], **extra: object) -> Callable[[], PretrainedModel]:
    """A zoo row of the ``resnet`` extractor whose file is named after its url."""
    return partial(
        PretrainedModel,
        extractor="resnet",
        init_args=init_args,
        url=url,
        filename=url.rsplit("/", 1)[1],
        transforms=IMAGENET_EVAL_TRANSFORMS,
        **extra,
    )


ZOO: dict[str, Callable[[], PretrainedModel]] = {
    "resnet50_moco_v2": _row(
        MOCO_V2_URL,
        {"arch": "resnet50_projector", "gem_p": 5.0, "remove_fc": True, "normalise_features": False},
        md5="a04e12f8",
        converter="oml_models.converters.resnet:moco_to_torchvision",
        description="ResNet-50 self-supervised with MoCo v2 on ImageNet (800 epochs), GeM p=5",
    ),
    **{
        f"{arch}_imagenet1k_v1": _row(
            url,
            {"arch": arch, "gem_p": None, "remove_fc": True, "normalise_features": False},
            md5=None,
            sha256=url.rsplit("-", 1)[1].removesuffix(".pth"),  # torchvision's name: <arch>-<sha256[:8]>.pth
            description=f"{arch} of torchvision trained on ImageNet-1k (IMAGENET1K_V1)",
        )
        for arch, url in TORCHVISION_IMAGENET1K_V1_URLS.items()
    },
}

__all__ = ["IMAGENET_EVAL_TRANSFORMS", "MOCO_V2_URL", "TORCHVISION_IMAGENET1K_V1_URLS", "ZOO"]
