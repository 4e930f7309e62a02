"""oml plugin: the triplet losses and the triplet miners.

The public classes are importable from the top level (``from oml_losses import TripletLossWithMiner,
AllTripletsMiner``); they are imported lazily on first access, so that loading the plugin module
(``oml_losses.plugin``, which only registers lazy ``"module:attr"`` strings) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oml_losses.miners.inbatch_all_tri import AllTripletsMiner
    from oml_losses.miners.triplet_masks import get_available_triplets_ids
    from oml_losses.triplet import TripletLoss, TripletLossPlain, TripletLossWithMiner

_EXPORTS = {
    "TripletLoss": "oml_losses.triplet",
    "TripletLossPlain": "oml_losses.triplet",
    "TripletLossWithMiner": "oml_losses.triplet",
    "AllTripletsMiner": "oml_losses.miners.inbatch_all_tri",
    "get_available_triplets_ids": "oml_losses.miners.triplet_masks",
}

__all__ = [
    "AllTripletsMiner",
    "TripletLoss",
    "TripletLossPlain",
    "TripletLossWithMiner",
    "get_available_triplets_ids",
]


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first access (PEP 562)."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
