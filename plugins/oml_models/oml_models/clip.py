"""``ViTCLIPExtractor``: the image tower of CLIP as an extractor (OML's ``ViTCLIPExtractor``).

The tower is open_clip's ``VisionTransformer`` in OpenAI's architecture (the one of OpenAI's and
SberbankAI's ruCLIP releases: class token, pre- and post-LayerNorm, QuickGELU, ``width // 64`` heads, a
linear projection of the class token), built alone: the text tower is never built.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import torch.nn.functional as F
from torch import Tensor

from oml_core.export.signatures import image_signature
from oml_core.interfaces.export import ExportContext, ExportSignature, IExportable
from oml_core.zoo.extractor import ZooExtractor
from oml_core.zoo.weights import build_for_weights, load_weights
from oml_models.archs import check_arch
from oml_models.extras import requires_extra

if TYPE_CHECKING:
    from open_clip.transformer import VisionTransformer

#: OML's arch names to the open_clip model configs of the same image towers (built with QuickGELU).
CLIP_ARCHS: dict[str, str] = {
    "vitb16_224": "ViT-B-16",
    "vitb32_224": "ViT-B-32",
    "vitl14_224": "ViT-L-14",
    "vitl14_336": "ViT-L-14-336",
}


#: The keys of an open_clip ``vision_cfg`` that :func:`build_clip_visual` builds (those of OpenAI's ViT towers);
#: a config with any other key (a timm or ResNet tower, layer scale, another pooling...) is refused.
VISION_CFG_KEYS = frozenset({"image_size", "layers", "width", "patch_size", "head_width", "mlp_ratio"})


def build_clip_visual(open_clip_name: str) -> VisionTransformer:
    """The image tower of the open_clip model config ``open_clip_name``, randomly initialised, with OpenAI's
    QuickGELU activation; nothing is downloaded.

    It is open_clip's ``VisionTransformer`` built from the config as ``open_clip.create_model(open_clip_name,
    force_quick_gelu=True).visual`` is (the same modules, parameter names and shapes), through open_clip's
    public API only, and without building the text tower.

    Raises:
        MissingExtraError: open_clip is not installed (``pip install "oml-models[clip]"``).
        ValueError: open_clip has no model config ``open_clip_name``, or its image tower is not a ViT of
            OpenAI's kind (the config has keys beyond :data:`VISION_CFG_KEYS`).
    """
    with requires_extra("open_clip", "the extractor 'vit_clip'"):
        import open_clip
        from open_clip.transformer import LayerNorm, QuickGELU
        from open_clip.transformer import VisionTransformer as OpenCLIPVisionTransformer

    config = open_clip.get_model_config(open_clip_name)
    if config is None:
        raise ValueError(f"open_clip has no model config {open_clip_name!r}")
    vision = config["vision_cfg"]
    unsupported = sorted(set(vision) - VISION_CFG_KEYS)
    if unsupported or not isinstance(vision.get("layers", 12), int):
        raise ValueError(
            f"open_clip's model config {open_clip_name!r} is not an image tower of OpenAI's ViT kind "
            f"(unsupported vision_cfg: {', '.join(unsupported) or 'layers ' + repr(vision['layers'])})"
        )
    defaults = open_clip.CLIPVisionCfg()
    width = vision.get("width", defaults.width)
    return OpenCLIPVisionTransformer(
        image_size=vision.get("image_size", defaults.image_size),
        patch_size=vision.get("patch_size", defaults.patch_size),
        width=width,
        layers=vision.get("layers", defaults.layers),
        heads=width // vision.get("head_width", defaults.head_width),
        mlp_ratio=vision.get("mlp_ratio", defaults.mlp_ratio),
        output_dim=config["embed_dim"],
        act_layer=QuickGELU,
        norm_layer=LayerNorm,
    )


def check_image_size(x: Tensor, image_size: int, extractor: str) -> None:
    """Check that ``x`` is a batch of square images of the side ``image_size`` that ``extractor`` expects.

    Raises:
        ValueError: ``x`` is not ``[B, 3, image_size, image_size]``; the message gives both shapes.
    """
    if x.ndim != 4 or tuple(x.shape[1:]) != (3, image_size, image_size):
        raise ValueError(
            f"{extractor} expects images x of shape [B, 3, {image_size}, {image_size}] (resize them to "
            f"{image_size}x{image_size}), got {list(x.shape)}"
        )


class ViTCLIPExtractor(ZooExtractor, IExportable):
    """The image encoder of CLIP (OpenAI's ViT-B/16, ViT-B/32, ViT-L/14, ViT-L/14@336px architectures).

    ``forward(x)`` maps images ``[B, 3, S, S]``, ``S`` the arch's resolution (224, or 336 for
    ``vitl14_336``), to embeddings ``[B, feat_dim]``: the class token after the last block and ``ln_post``,
    projected by ``proj`` (CLIP's image embedding, ``encode_image``), then L2-normalised if
    ``normalise_features``. ``feat_dim`` is the projection's size: 512 (``vitb*``) or 768 (``vitl*``).
    The tower is ``self.visual``: the extractor's state dict is CLIP's image tower under the prefix
    ``visual.``, as in CLIP's own state dicts.

    Args:
        weights: ``None`` for a random initialisation; a path to a local checkpoint of this extractor (its
            state dict, or a Lightning checkpoint holding it: the prefixes ``model.``, ``extractor.``,
            ``module.`` are stripped, ``criterion.*`` keys ignored); or a key of the pretrained zoo
            (:attr:`pretrained_models`; a full CLIP checkpoint, text tower included, is converted on loading).
        arch: One of :attr:`constructors`: ``vitb16_224``, ``vitb32_224``, ``vitl14_224``, ``vitl14_336``.
        normalise_features: L2-normalise the output embeddings.

    Raises:
        ValueError: unknown ``arch`` (the known ones are listed).
        UnknownNameError: ``weights`` is a string that is neither a file nor a zoo key (close keys listed).
        FileNotFoundError: ``weights`` is a ``Path`` that does not exist.
        PretrainedDownloadError: the zoo file is not in the weights cache and cannot be downloaded.
        CheckpointError: the checkpoint cannot be read or does not fit (its file and keys are named).
    """

    #: The supported archs: OML's names to the open_clip model configs of their image towers.
    constructors: dict[str, str] = CLIP_ARCHS

    def __init__(self, weights: str | Path | None, arch: str, normalise_features: bool = True) -> None:
        check_arch(arch, ViTCLIPExtractor)
        super().__init__()
        self.arch = arch
        self.normalise_features = normalise_features
        self.visual = build_for_weights(lambda: build_clip_visual(self.constructors[arch]), weights)
        self.image_size: int = self.visual.image_size[0]
        load_weights(self, weights)

    @property
    def feat_dim(self) -> int:
        """Size of the embeddings: the output size of the projection ``proj`` (512 or 768)."""
        return self.visual.output_dim

    def forward(self, x: Tensor) -> Tensor:
        """Embeddings ``[B, feat_dim]`` of images ``x`` ``[B, 3, S, S]`` (L2-normalised if asked).

        Raises:
            ValueError: ``x`` is not a batch of RGB images of the arch's resolution.
        """
        check_image_size(x, self.image_size, type(self).__name__)
        x = self.visual(x)
        if self.normalise_features:
            x = F.normalize(x, p=2, dim=1)
        return x

    def export_signature(self, context: ExportContext) -> ExportSignature:
        """Images ``[batch, 3, S, S]`` of the arch's resolution ``S``:
        :func:`~oml_core.export.signatures.image_signature`.

        Raises:
            ValueError: transforms that make images of another size.
        """
        return image_signature(self, context, self.image_size, fixed_size=True)


__all__ = ["CLIP_ARCHS", "VISION_CFG_KEYS", "ViTCLIPExtractor", "build_clip_visual", "check_image_size"]
