"""Converter of the original Unicom release into :class:`~oml_models.unicom.ViTUnicomExtractor`'s state dict.

deepglint/unicom's files (``FP16-ViT-B-32.pt`` ...) are float16 state dicts of its VisionTransformer, whose
parameter names the extractor's network (:class:`~oml_models.unicom_vit.UnicomVisionTransformer`) keeps;
the extractor holds that network as ``model``.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor

#: The prefix of the network's keys in the extractor's state dict (``ViTUnicomExtractor.model``).
EXTRACTOR_PREFIX = "model."


def unicom_to_extractor(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The original release's state dict with every key prefixed by ``model.`` and the floating tensors as
    float32 (the integer ``num_batches_tracked`` of the BatchNorms kept as they are)."""
    return {
        EXTRACTOR_PREFIX + key: value.float() if value.is_floating_point() else value
        for key, value in state_dict.items()
    }


__all__ = ["EXTRACTOR_PREFIX", "unicom_to_extractor"]
