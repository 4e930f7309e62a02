"""Converters of ResNet checkpoint formats into torchvision's ResNet state dict (what
:meth:`oml_models.resnet.ResnetExtractor.load_pretrained` loads). These functions import no torch model."""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor

from oml_core.utils.checkpoints import CheckpointError

#: The prefix of the query encoder in the state dicts of the MoCo release (DataParallel's ``module.``).
MOCO_QUERY_PREFIX = "module.encoder_q."


def moco_to_torchvision(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The ``state_dict`` of a MoCo release file (facebookresearch/moco ``moco_v2_*_pretrain.pth.tar``) to
    torchvision's ResNet: the query encoder's keys without their ``module.encoder_q.`` prefix (its ``fc`` is
    MoCo v2's projection head ``fc.0``/``fc.2``); the key encoder and the queue are dropped.

    Raises:
        CheckpointError: no key starts with ``module.encoder_q.`` (the message shows some of the keys).
    """
    converted = {
        key[len(MOCO_QUERY_PREFIX) :]: value
        for key, value in state_dict.items()
        if key.startswith(MOCO_QUERY_PREFIX)
    }
    if not converted:
        shown = ", ".join(list(state_dict)[:5])
        raise CheckpointError(
            f"not a MoCo checkpoint: no key starts with {MOCO_QUERY_PREFIX!r} (keys: {shown or 'none'})"
        )
    return converted


__all__ = ["MOCO_QUERY_PREFIX", "moco_to_torchvision"]
