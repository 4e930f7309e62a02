"""Converters of the DINO, DINOv2 and OML checkpoint formats into :class:`~oml_models.vit.ViTExtractor`'s.

The extractor keeps its backbone (timm's VisionTransformer, :mod:`oml_models.vit_backbone`) as ``model``:
its state dict is the backbone's under the prefix ``model.``. These functions import no torch model.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor

#: The prefix of the backbone's keys in the extractor's state dict (``ViTExtractor.model``).
EXTRACTOR_PREFIX = "model."
#: The final norm of the backbone, whose key tells the prefix of an OML checkpoint (as OML finds it).
_TRIAL_KEY = "norm.bias"
_MAX_KEYS_SHOWN = 8


def dino_to_extractor(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The original DINO release (facebookresearch/dino ``dino_*_pretrain.pth``: the teacher backbone, whose
    parameter names are timm's) to the extractor's state dict: every key prefixed with ``model.``."""
    return {EXTRACTOR_PREFIX + key: value for key, value in state_dict.items()}


def dinov2_to_extractor(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The original DINOv2 release (facebookresearch/dinov2 ``dinov2_*_pretrain.pth``) to the extractor's
    state dict.

    - ``mask_token`` (used by the masked-image objective of the training only) is dropped;
    - with registers, timm's layout (``no_embed_class``) is used: ``register_tokens`` becomes ``reg_token``,
      and the CLS token's position embedding ``pos_embed[:, 0]`` is added to ``cls_token`` and removed from
      ``pos_embed`` (the same sums, since that embedding is never interpolated);
    - then :func:`dino_to_extractor`. A state dict without these keys (DINO's) is only prefixed.
    """
    converted = dict(state_dict)
    converted.pop("mask_token", None)
    if "register_tokens" in converted:
        converted["reg_token"] = converted.pop("register_tokens")
        pos_embed = converted.pop("pos_embed")
        converted["cls_token"] = converted["cls_token"] + pos_embed[:, :1]
        converted["pos_embed"] = pos_embed[:, 1:]
    return dino_to_extractor(converted)


def _is_criterion(key: str) -> bool:
    return key.startswith("criterion.") or ".criterion." in key


def _show(keys: list[str]) -> str:
    more = len(keys) - _MAX_KEYS_SHOWN
    return ", ".join(keys[:_MAX_KEYS_SHOWN]) + (f", ... ({more} more)" if more > 0 else "")


def oml_vit_to_extractor(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A checkpoint of OML's ``ViTExtractor`` (OML's own zoo files: ``vits16_inshop`` ...) to ours.

    OML's files hold the backbone in the upstream format (DINO's, or DINOv2's for the ``*14`` archs) under
    a prefix: ``model.`` for the extractor's state dict, ``model.model.`` for its Lightning module, possibly
    with the loss's ``criterion.*`` keys. As OML does, the prefix is what precedes the final norm's
    ``norm.bias`` (the key ``<prefix>norm.bias`` whose ``<prefix>cls_token`` exists too); the criterion's keys
    are dropped, the prefix is stripped, and :func:`dinov2_to_extractor` converts the rest.

    Raises:
        ValueError: no ``<prefix>norm.bias`` with a ``<prefix>cls_token``, or keys outside the prefix (both
            messages list the keys).
    """
    keys = [key for key in state_dict if not _is_criterion(key)]
    prefixes = [
        key[: -len(_TRIAL_KEY)]
        for key in keys
        if key.endswith(_TRIAL_KEY)
        and key[: -len(_TRIAL_KEY)] + "cls_token" in state_dict
        and key[: -len(_TRIAL_KEY)][-1:] in ("", ".")
    ]
    if len(prefixes) != 1:
        raise ValueError(
            f"not a checkpoint of OML's ViTExtractor: expected one '<prefix>{_TRIAL_KEY}' key next to a "
            f"'<prefix>cls_token' key, found {len(prefixes)}; keys: {_show(keys)}"
        )
    prefix = prefixes[0]
    outside = [key for key in keys if not key.startswith(prefix)]
    if outside:
        raise ValueError(
            f"the checkpoint of OML's ViTExtractor has keys outside its prefix {prefix!r}: {_show(outside)}"
        )
    return dinov2_to_extractor({key[len(prefix) :]: state_dict[key] for key in keys})


__all__ = ["EXTRACTOR_PREFIX", "dino_to_extractor", "dinov2_to_extractor", "oml_vit_to_extractor"]
