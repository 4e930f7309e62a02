"""Triplet miners, the pairs miner, and the mask helpers they share."""

from oml_losses.miners.cross_batch import TripletMinerWithMemory
from oml_losses.miners.inbatch_all_tri import AllTripletsMiner
from oml_losses.miners.inbatch_hard_cluster import HardClusterMiner
from oml_losses.miners.inbatch_hard_tri import HardTripletsMiner
from oml_losses.miners.inbatch_nhard_tri import NHardTripletsMiner
from oml_losses.miners.miner_with_bank import MinerWithBank
from oml_losses.miners.pairs import PairsMiner
from oml_losses.miners.triplet_masks import get_available_triplets_ids, get_pos_neg_masks

__all__ = [
    "AllTripletsMiner",
    "HardClusterMiner",
    "HardTripletsMiner",
    "MinerWithBank",
    "NHardTripletsMiner",
    "PairsMiner",
    "TripletMinerWithMemory",
    "get_available_triplets_ids",
    "get_pos_neg_masks",
]
