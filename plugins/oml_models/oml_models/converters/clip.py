"""Converter of CLIP checkpoints into :class:`~oml_models.clip.ViTCLIPExtractor`'s state dict.

CLIP's state dicts (OpenAI's release loaded as a state dict, open_clip's files, SberbankAI's ruCLIP
``pytorch_model.bin``) keep the image tower under ``visual.`` and the text tower under other names
(``transformer.``, ``token_embedding.``, ``positional_embedding``, ``ln_final.``, ``text_projection``,
``logit_scale``). The extractor holds the image tower as ``visual``, with the same parameter names.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor

#: The prefix of the image tower's keys, in CLIP's state dicts and in the extractor's.
VISUAL_PREFIX = "visual."
_MAX_KEYS_SHOWN = 8


def clip_to_extractor(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The image tower of a full CLIP state dict: its ``visual.*`` tensors, the floating ones as float32
    (the releases are stored in float16), the text tower dropped.

    Raises:
        ValueError: the state dict has no ``visual.*`` key (the message lists some of its keys).
    """
    visual = {
        key: value.float() if value.is_floating_point() else value
        for key, value in state_dict.items()
        if key.startswith(VISUAL_PREFIX)
    }
    if not visual:
        shown = ", ".join(list(state_dict)[:_MAX_KEYS_SHOWN])
        raise ValueError(
            f"not a CLIP checkpoint: no image tower ('{VISUAL_PREFIX}*' keys) among its "
            f"{len(state_dict)} keys: {shown}"
        )
    return visual


__all__ = ["VISUAL_PREFIX", "clip_to_extractor"]
