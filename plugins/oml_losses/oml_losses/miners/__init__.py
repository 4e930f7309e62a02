"""Triplet miners and the mask helpers they share."""

from oml_losses.miners.inbatch_all_tri import AllTripletsMiner
from oml_losses.miners.triplet_masks import get_available_triplets_ids, get_pos_neg_masks

__all__ = ["AllTripletsMiner", "get_available_triplets_ids", "get_pos_neg_masks"]
