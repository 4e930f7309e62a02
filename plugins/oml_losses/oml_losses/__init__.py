"""oml plugin: the losses (triplet family, surrogate precision, ArcFace, contrastive, multi-similarity, proxy
anchor, supervised contrastive) and the triplet miners.

The public classes are importable from the top level (``from oml_losses import TripletLossWithMiner,
AllTripletsMiner``); they are imported lazily on first access, so that loading the plugin module
(``oml_losses.plugin``, which only registers lazy ``"module:attr"`` strings) does not import torch. The
exports and ``__all__`` come from the plugin's table (:data:`oml_losses.plugin.COMPONENTS` and
:data:`~oml_losses.plugin.EXTRA_EXPORTS`); the imports below, explicit re-exports, are for static type
checkers and IDEs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import table_exports
from oml_losses.plugin import COMPONENTS, EXTRA_EXPORTS

if TYPE_CHECKING:
    from oml_core.functional.label_smoothing import label_smoothing as label_smoothing
    from oml_core.utils.misc_torch import pairwise_l2 as pairwise_l2
    from oml_losses.arcface import ArcFaceLoss as ArcFaceLoss
    from oml_losses.arcface import ArcFaceLossWithMLP as ArcFaceLossWithMLP
    from oml_losses.contrastive import ContrastiveLoss as ContrastiveLoss
    from oml_losses.miners.cross_batch import TripletMinerWithMemory as TripletMinerWithMemory
    from oml_losses.miners.inbatch_all_tri import AllTripletsMiner as AllTripletsMiner
    from oml_losses.miners.inbatch_all_tri import get_available_triplets as get_available_triplets
    from oml_losses.miners.inbatch_all_tri import get_available_triplets_naive as get_available_triplets_naive
    from oml_losses.miners.inbatch_hard_cluster import HardClusterMiner as HardClusterMiner
    from oml_losses.miners.inbatch_hard_tri import HardTripletsMiner as HardTripletsMiner
    from oml_losses.miners.inbatch_nhard_tri import NHardTripletsMiner as NHardTripletsMiner
    from oml_losses.miners.miner_with_bank import MinerWithBank as MinerWithBank
    from oml_losses.miners.pairs import PairsMiner as PairsMiner
    from oml_losses.miners.triplet_masks import get_available_triplets_ids as get_available_triplets_ids
    from oml_losses.multi_similarity import MultiSimilarityLoss as MultiSimilarityLoss
    from oml_losses.proxy_anchor import ProxyAnchorLoss as ProxyAnchorLoss
    from oml_losses.supcon import SupConLoss as SupConLoss
    from oml_losses.surrogate_precision import SurrogatePrecision as SurrogatePrecision
    from oml_losses.triplet import TLogs as TLogs
    from oml_losses.triplet import TripletLoss as TripletLoss
    from oml_losses.triplet import TripletLossPlain as TripletLossPlain
    from oml_losses.triplet import TripletLossWithMiner as TripletLossWithMiner
    from oml_losses.triplet import get_tri_ids_in_plain as get_tri_ids_in_plain

__getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)
