"""oml plugin: the triplet losses and the triplet miners.

The public classes are importable from the top level (``from oml_losses import TripletLossWithMiner,
AllTripletsMiner``); they are imported lazily on first access, so that loading the plugin module
(``oml_losses.plugin``, which only registers lazy ``"module:attr"`` strings) does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports

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

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
