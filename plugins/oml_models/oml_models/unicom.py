"""``ViTUnicomExtractor``: Unicom's vision transformers as extractors (OML's ``ViTUnicomExtractor``)."""

from __future__ import annotations

from pathlib import Path

import torch.nn.functional as F
from torch import Tensor

from oml_core.export.signatures import image_signature
from oml_core.interfaces.export import ExportContext, ExportSignature, IExportable
from oml_core.zoo.extractor import ZooExtractor
from oml_core.zoo.weights import build_for_weights, load_weights
from oml_models.archs import check_arch
from oml_models.clip import check_image_size
from oml_models.unicom_vit import UNICOM_ARCHS, UnicomArch, UnicomVisionTransformer


class ViTUnicomExtractor(ZooExtractor, IExportable):
    """The Unicom extractors (deepglint/unicom: ViT-B/32, ViT-B/16, ViT-L/14, ViT-L/14@336px).

    ``forward(x)`` maps images ``[B, 3, S, S]``, ``S`` the arch's resolution (224, or 336 for
    ``vitl14_336px_unicom``), to embeddings ``[B, feat_dim]``: Unicom's embedding (every patch token after the
    final norm, flattened, through the ``feature`` head of two linear layers and BatchNorms; see
    :mod:`oml_models.unicom_vit`), then L2-normalised if ``normalise_features``. ``feat_dim`` is 512
    (``vitb32_unicom``) or 768 (the others). The network is ``self.model``: the extractor's state dict is the
    original release's under the prefix ``model.``.

    Args:
        weights: ``None`` for a random initialisation; a path to a local checkpoint (a state dict of this
            extractor or of its network, e.g. an original release file, or a Lightning checkpoint holding one:
            the prefixes ``model.``, ``extractor.``, ``module.`` are stripped, ``criterion.*`` keys ignored);
            or a key of the pretrained zoo (:attr:`pretrained_models`).
        arch: One of :attr:`constructors`: ``vitb32_unicom``, ``vitb16_unicom``, ``vitl14_unicom``,
            ``vitl14_336px_unicom``.
        normalise_features: L2-normalise the output embeddings.
        use_gradient_ckpt: Recompute the blocks' activations in the backward pass instead of keeping them
            (gradient checkpointing: less memory in training, the same outputs and gradients).

    Raises:
        ValueError: unknown ``arch`` (the known ones are listed).
        UnknownNameError: ``weights`` is a string that is neither a file nor a zoo key (close keys listed).
        FileNotFoundError: ``weights`` is a ``Path`` that does not exist.
        PretrainedDownloadError: the zoo file is not in the weights cache and cannot be downloaded.
        CheckpointError: the checkpoint cannot be read or does not fit (its file and keys are named).
    """

    #: The supported archs: OML's names to their hyper-parameters (:class:`~oml_models.unicom_vit.UnicomArch`).
    constructors: dict[str, UnicomArch] = UNICOM_ARCHS

    def __init__(
        self,
        weights: str | Path | None,
        arch: str,
        normalise_features: bool,
        use_gradient_ckpt: bool = True,
    ) -> None:
        check_arch(arch, ViTUnicomExtractor)
        super().__init__()
        self.arch = arch
        self.normalise_features = normalise_features
        self.model = build_for_weights(lambda: UnicomVisionTransformer(self.constructors[arch]), weights)
        self.model.set_grad_checkpointing(use_gradient_ckpt)
        load_weights(self, weights, target=self.model)

    @property
    def feat_dim(self) -> int:
        """Size of the embeddings: the arch's ``embedding_size`` (512 or 768)."""
        return self.model.arch.embedding_size

    def forward(self, x: Tensor) -> Tensor:
        """Embeddings ``[B, feat_dim]`` of images ``x`` ``[B, 3, S, S]`` (L2-normalised if asked).

        Raises:
            ValueError: ``x`` is not a batch of RGB images of the arch's resolution.
        """
        check_image_size(x, self.model.arch.img_size, type(self).__name__)
        x = self.model(x)
        if self.normalise_features:
            x = F.normalize(x, p=2, dim=1)
        return x

    def export_signature(self, context: ExportContext) -> ExportSignature:
        """Images ``[batch, 3, S, S]`` of the arch's resolution ``S``:
        :func:`~oml_core.export.signatures.image_signature`.

        Raises:
            ValueError: transforms that make images of another size.
        """
        return image_signature(self, context, self.model.arch.img_size, fixed_size=True)


__all__ = ["ViTUnicomExtractor"]
