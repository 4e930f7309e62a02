"""oml plugin: the losses (triplet family, surrogate precision, ArcFace, contrastive, multi-similarity, proxy
anchor, supervised contrastive) and the triplet miners.

The public classes are importable from the top level (``from oml_losses import TripletLossWithMiner,
AllTripletsMiner``); they are imported lazily on first access, so that loading the plugin module
(``oml_losses.plugin``, which only registers lazy ``"module:attr"`` strings) does not import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from oml_core.functional.label_smoothing import label_smoothing
    from oml_losses.arcface import ArcFaceLoss, ArcFaceLossWithMLP
    from oml_losses.contrastive import ContrastiveLoss
    from oml_losses.miners.cross_batch import TripletMinerWithMemory
    from oml_losses.miners.inbatch_all_tri import AllTripletsMiner
    from oml_losses.miners.inbatch_hard_cluster import HardClusterMiner
    from oml_losses.miners.inbatch_hard_tri import HardTripletsMiner
    from oml_losses.miners.inbatch_nhard_tri import NHardTripletsMiner
    from oml_losses.miners.miner_with_bank import MinerWithBank
    from oml_losses.miners.pairs import PairsMiner
    from oml_losses.miners.triplet_masks import get_available_triplets_ids
    from oml_losses.multi_similarity import MultiSimilarityLoss
    from oml_losses.pairwise_l2 import pairwise_l2
    from oml_losses.proxy_anchor import ProxyAnchorLoss
    from oml_losses.supcon import SupConLoss
    from oml_losses.surrogate_precision import SurrogatePrecision
    from oml_losses.triplet import TripletLoss, TripletLossPlain, TripletLossWithMiner

_EXPORTS = {
    "TripletLoss": "oml_losses.triplet",
    "TripletLossPlain": "oml_losses.triplet",
    "TripletLossWithMiner": "oml_losses.triplet",
    "SurrogatePrecision": "oml_losses.surrogate_precision",
    "ArcFaceLoss": "oml_losses.arcface",
    "ArcFaceLossWithMLP": "oml_losses.arcface",
    "ContrastiveLoss": "oml_losses.contrastive",
    "MultiSimilarityLoss": "oml_losses.multi_similarity",
    "ProxyAnchorLoss": "oml_losses.proxy_anchor",
    "SupConLoss": "oml_losses.supcon",
    "label_smoothing": "oml_core.functional.label_smoothing",
    "pairwise_l2": "oml_losses.pairwise_l2",
    "AllTripletsMiner": "oml_losses.miners.inbatch_all_tri",
    "HardTripletsMiner": "oml_losses.miners.inbatch_hard_tri",
    "NHardTripletsMiner": "oml_losses.miners.inbatch_nhard_tri",
    "HardClusterMiner": "oml_losses.miners.inbatch_hard_cluster",
    "TripletMinerWithMemory": "oml_losses.miners.cross_batch",
    "MinerWithBank": "oml_losses.miners.miner_with_bank",
    "PairsMiner": "oml_losses.miners.pairs",
    "get_available_triplets_ids": "oml_losses.miners.triplet_masks",
}

__all__ = [
    "AllTripletsMiner",
    "ArcFaceLoss",
    "ArcFaceLossWithMLP",
    "ContrastiveLoss",
    "HardClusterMiner",
    "HardTripletsMiner",
    "MinerWithBank",
    "MultiSimilarityLoss",
    "NHardTripletsMiner",
    "PairsMiner",
    "ProxyAnchorLoss",
    "SupConLoss",
    "SurrogatePrecision",
    "TripletLoss",
    "TripletLossPlain",
    "TripletLossWithMiner",
    "TripletMinerWithMemory",
    "get_available_triplets_ids",
    "label_smoothing",
    "pairwise_l2",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
