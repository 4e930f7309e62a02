"""The Unicom vision transformer (deepglint/unicom, "Unicom: Universal and Compact Representation Learning for
Image Retrieval"), on timm's VisionTransformer.

Unicom's ViT differs from the usual one in its ends: no class token (a position embedding per patch only),
attention without ``qkv`` bias, ReLU6 in the MLPs, LayerNorms with eps 1e-5, and an embedding made of *all*
the patch tokens after the final LayerNorm, flattened (``[B, N * dim]``) and mapped by the ``feature`` head:
``Linear(N * dim, dim, bias=False)``, ``BatchNorm1d(dim, eps=2e-5)``, ``Linear(dim, embedding_size,
bias=False)``, ``BatchNorm1d(embedding_size, eps=2e-5)``. The input size is therefore fixed by the arch.

The parameter names are those of the original release (``patch_embed.proj``, ``pos_embed``,
``blocks.{i}.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}``, ``norm``, ``feature.{0..3}``), so its
checkpoints load as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from oml_models.extras import requires_extra

with requires_extra("timm", "the extractor 'vit_unicom'"):
    from timm.models.vision_transformer import VisionTransformer

#: Epsilon of the BatchNorms of the ``feature`` head (the original's).
FEATURE_BN_EPS = 2e-5
#: Stochastic depth of the original release's models (the rate of the last block; only while training).
DROP_PATH_RATE = 0.1


@dataclass(frozen=True)
class UnicomArch:
    """The hyper-parameters of one arch of the original release.

    Attributes:
        patch_size: Side of the square patches, in pixels.
        dim: Width of the tokens.
        depth: Number of transformer blocks.
        num_heads: Attention heads per block.
        embedding_size: Size of the embeddings (the output of the ``feature`` head).
        img_size: The input size (fixed: the head takes every patch token).
    """

    patch_size: int
    dim: int
    depth: int
    num_heads: int
    embedding_size: int
    img_size: int


#: The archs of :class:`~oml_models.unicom.ViTUnicomExtractor`, by OML's names (the original's ``ViT-B/32``,
#: ``ViT-B/16``, ``ViT-L/14``, ``ViT-L/14@336px``).
UNICOM_ARCHS: dict[str, UnicomArch] = {
    "vitb32_unicom": UnicomArch(
        patch_size=32, dim=768, depth=12, num_heads=12, embedding_size=512, img_size=224
    ),
    "vitb16_unicom": UnicomArch(
        patch_size=16, dim=768, depth=12, num_heads=12, embedding_size=768, img_size=224
    ),
    "vitl14_unicom": UnicomArch(
        patch_size=14, dim=1024, depth=24, num_heads=16, embedding_size=768, img_size=224
    ),
    "vitl14_336px_unicom": UnicomArch(
        patch_size=14, dim=1024, depth=24, num_heads=16, embedding_size=768, img_size=336
    ),
}


class UnicomVisionTransformer(VisionTransformer):
    """Unicom's ViT of the arch ``arch``, randomly initialised: ``forward(x)`` maps images
    ``[B, 3, img_size, img_size]`` to embeddings ``[B, embedding_size]`` (see the module's doc)."""

    def __init__(self, arch: UnicomArch) -> None:
        super().__init__(
            img_size=arch.img_size,
            patch_size=arch.patch_size,
            embed_dim=arch.dim,
            depth=arch.depth,
            num_heads=arch.num_heads,
            mlp_ratio=4.0,
            qkv_bias=False,
            class_token=False,
            global_pool="",
            num_classes=0,
            act_layer=nn.ReLU6,
            norm_layer=nn.LayerNorm,
            drop_path_rate=DROP_PATH_RATE,
        )
        self.arch = arch
        num_patches = self.patch_embed.num_patches
        self.feature = nn.Sequential(
            nn.Linear(arch.dim * num_patches, arch.dim, bias=False),
            nn.BatchNorm1d(arch.dim, eps=FEATURE_BN_EPS),
            nn.Linear(arch.dim, arch.embedding_size, bias=False),
            nn.BatchNorm1d(arch.embedding_size, eps=FEATURE_BN_EPS),
        )

    def forward(self, x: Tensor) -> Tensor:
        """Embeddings ``[B, embedding_size]``: every patch token after the final norm, flattened, then
        ``feature``."""
        return self.feature(self.forward_features(x).flatten(1))


__all__ = ["DROP_PATH_RATE", "FEATURE_BN_EPS", "UNICOM_ARCHS", "UnicomArch", "UnicomVisionTransformer"]
