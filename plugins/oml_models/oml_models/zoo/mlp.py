"""The checkpoints of :class:`~oml_models.mlp.ExtractorWithMLP` (registered as ``extractor_with_mlp``).

- ``vits16_224_mlp_384_inshop``: OML's ViT-S/16 with a 384-d MLP head trained on DeepFashion InShop; an OML
  Lightning checkpoint converted by :func:`oml_models.mlp.oml_checkpoint_to_extractor_with_mlp`. md5: the
  first 8 hex digits, as OML records them.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from oml_core.zoo import PretrainedModel

_BACKBONE = {
    "name": "vit",
    "args": {"weights": None, "arch": "vits16", "normalise_features": False, "use_multi_scale": False},
}

ZOO: dict[str, Callable[[], PretrainedModel]] = {
    "vits16_224_mlp_384_inshop": partial(
        PretrainedModel,
        extractor="extractor_with_mlp",
        init_args={"extractor": _BACKBONE, "mlp_features": [384], "train_backbone": True},
        url="https://oml.daloroserver.com/download/checkpoints/inshop/vits16_224_mlp_384_inshop.ckpt",
        md5="35244966",
        filename="vits16_224_mlp_384_inshop.ckpt",
        transforms={"name": "norm_resize_hypvit_torch", "args": {"im_size": 256, "crop_size": 224}},
        converter="oml_models.mlp:oml_checkpoint_to_extractor_with_mlp",
        description="ViT-S/16 (DINO) with a 384-d MLP head trained by OML on DeepFashion InShop",
    ),
}

__all__ = ["ZOO"]
