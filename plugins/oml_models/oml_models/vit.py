"""``ViTExtractor``: the DINO / DINOv2 vision transformers as extractors (OML's ``ViTExtractor``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor

from oml_core.const import MEAN, STD, TNormParam
from oml_core.export.signatures import image_signature
from oml_core.interfaces.export import ExportContext, ExportSignature, IExportable
from oml_core.zoo.extractor import ZooExtractor
from oml_core.zoo.weights import build_for_weights, load_weights
from oml_models.archs import check_arch
from oml_models.vit_attention import draw_attention
from oml_models.vit_backbone import VIT_ARCHS, DinoVisionTransformer, ViTArch


class ViTExtractor(ZooExtractor, IExportable):
    """The extractors that follow the VisualTransformer architecture: DINO's and DINOv2's.

    ``forward(x)`` maps images ``[B, 3, H, W]`` (any size of at least one patch; several sizes with
    ``use_multi_scale``) to embeddings ``[B, feat_dim]``: the CLS token of the last block after the final
    LayerNorm (as DINO and DINOv2 define the image embedding; no head), L2-normalised if
    ``normalise_features``. ``feat_dim`` is the width of the arch: 384 (``vits*``), 768 (``vitb*``) or 1024
    (``vitl*``). The backbone, timm's VisionTransformer (:mod:`oml_models.vit_backbone`), is ``self.model``.

    Multi-scale (``use_multi_scale=True``, OML's test-time augmentation, from the original DINO evaluation):
    the embedding is the mean of the CLS embeddings of the batch resized by each factor of
    :attr:`multi_scales` (``1``, ``1/sqrt(2)``, ``1/2``; bilinear ``F.interpolate`` with ``scale_factor``,
    ``align_corners=False``: a side ``n`` becomes ``floor(n * s)``), before the L2 normalisation. The
    embeddings of the scales are averaged as they are, not normalised one by one.

    Args:
        weights: ``None`` for a random initialisation; a path to a local checkpoint of this extractor (a state
            dict of it or of its backbone, or a Lightning checkpoint holding one: the prefixes ``model.``,
            ``extractor.``, ``module.`` are stripped, ``criterion.*`` keys ignored); or a key of the
            pretrained zoo (:attr:`pretrained_models`, converted from its upstream format on loading).
        arch: One of :attr:`constructors`: ``vits8``, ``vits16``, ``vitb8``, ``vitb16`` (DINO),
            ``vits14``, ``vitb14``, ``vitl14`` (DINOv2) and ``vits14_reg``, ``vitb14_reg``, ``vitl14_reg``
            (DINOv2 with 4 registers).
        normalise_features: L2-normalise the output embeddings.
        use_multi_scale: Average the embeddings of several scales of the input (see above).

    Raises:
        ValueError: unknown ``arch`` (the known ones are listed).
        UnknownNameError: ``weights`` is a string that is neither a file nor a zoo key (close keys listed).
        FileNotFoundError: ``weights`` is a ``Path`` that does not exist.
        PretrainedDownloadError: the zoo file is not in the weights cache and cannot be downloaded.
        CheckpointError: the checkpoint cannot be read or does not fit (its file and keys are named).
    """

    #: The supported archs: OML's names to their hyper-parameters (:class:`~oml_models.vit_backbone.ViTArch`).
    constructors: dict[str, ViTArch] = VIT_ARCHS
    #: The scale factors of ``use_multi_scale``.
    multi_scales: tuple[float, ...] = (1.0, 1 / 2 ** (1 / 2), 1 / 2)

    def __init__(
        self,
        weights: str | Path | None,
        arch: str,
        normalise_features: bool,
        use_multi_scale: bool = False,
    ) -> None:
        check_arch(arch, ViTExtractor)
        super().__init__()
        self.arch = arch
        self.normalise_features = normalise_features
        self.use_multi_scale = use_multi_scale
        self.model = build_for_weights(lambda: DinoVisionTransformer(self.constructors[arch]), weights)
        load_weights(self, weights, target=self.model)

    @property
    def feat_dim(self) -> int:
        """Size of the embeddings: the width of the arch (384, 768 or 1024)."""
        return self.model.embed_dim

    def forward(self, x: Tensor) -> Tensor:
        """Embeddings ``[B, feat_dim]`` of images ``x`` ``[B, 3, H, W]`` (see the class's doc).

        Raises:
            ValueError: ``x`` is not ``[B, 3, H, W]``, or a side of it (at the smallest scale with
                ``use_multi_scale``) is shorter than a patch.
        """
        self._check_input(x)
        if self.use_multi_scale:
            x = self._multi_scale(x)
        else:
            x = self.model(x)
        return F.normalize(x, p=2, dim=1) if self.normalise_features else x

    def _check_input(self, x: Tensor) -> None:
        if x.ndim != 4 or x.shape[1] != 3:
            raise ValueError(f"x must be a batch of RGB images [B, 3, H, W], got the shape {tuple(x.shape)}")
        patch = self.model.patch_embed.patch_size[0]
        scales = self.multi_scales if self.use_multi_scale else (1.0,)
        smallest = int(min(x.shape[-2:]) * min(scales))
        if smallest < patch:
            raise ValueError(
                f"x of {x.shape[-2]}x{x.shape[-1]} pixels gives a side of {smallest} at the scale "
                f"{min(scales):.3f}, shorter than a patch of {patch} pixels ({self.arch})"
            )

    def _multi_scale(self, x: Tensor) -> Tensor:
        embeddings = [
            self.model(
                x
                if scale == 1
                else F.interpolate(x, scale_factor=scale, mode="bilinear", align_corners=False)
            )
            for scale in self.multi_scales
        ]
        return torch.stack(embeddings).mean(dim=0)

    def draw_attention(self, image: Image.Image | np.ndarray) -> np.ndarray | Image.Image:
        """Visualise the multi-head attention of the last block on an image.

        Args:
            image: An RGB image (PIL, or an ``[H, W, 3]`` array) with pixel values in ``[0, 255]``.

        Returns:
            The CLS token's attention over the patches, averaged over the heads, drawn over the image with
            the jet colour map (:func:`oml_models.vit_attention.draw_attention`; the image is normalised with
            ImageNet's mean and std), of the input's size and type as in OML: a ``uint8 [H, W, 3]`` array for
            an array, an RGB PIL image for a PIL image.
        """
        return draw_attention(self.model, image)

    def export_signature(self, context: ExportContext) -> ExportSignature:
        """Images ``[batch, 3, S, S]``, ``S`` the transforms' size (the arch's native size without one):
        :func:`~oml_core.export.signatures.image_signature`."""
        return image_signature(self, context, self.constructors[self.arch].img_size)


def vis_vit(
    vit: ViTExtractor, image: Image.Image | np.ndarray, mean: TNormParam = MEAN, std: TNormParam = STD
) -> np.ndarray | Image.Image:
    """OML's function of :meth:`ViTExtractor.draw_attention` (``oml.models.vit_dino.extractor.vis_vit``): the
    CLS attention of ``vit``'s last block drawn over ``image``, normalised with ``mean`` and ``std``
    (:func:`oml_models.vit_attention.draw_attention`); of the input's type, as ``draw_attention``."""
    return draw_attention(vit.model, image, mean, std)


__all__ = ["ViTExtractor", "vis_vit"]
