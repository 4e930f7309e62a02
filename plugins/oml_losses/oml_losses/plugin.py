"""Hook implementations of the ``oml_losses`` plugin: the losses, the triplet and pair miners and their default
configs.

Factories are lazy ``"module:attr"`` strings: registering imports no torch module. The default config of a
component ``name`` of kind ``kind`` is ``oml_losses/configs/<kind>/<name>.yaml``.
"""

from __future__ import annotations

from oml_core import hookimpl
from oml_core.registry.hookspecs import RegisterCallback

LOSSES = {
    "triplet": ("oml_losses.triplet:TripletLoss", "triplet loss of (anchor, positive, negative)"),
    "triplet_plain": ("oml_losses.triplet:TripletLossPlain", "triplet loss of stacked rows 0,1,2 / 3,4,5 .."),
    "triplet_with_miner": ("oml_losses.triplet:TripletLossWithMiner", "triplet loss of mined triplets"),
    "surrogate_precision": (
        "oml_losses.surrogate_precision:SurrogatePrecision",
        "1 - smoothed precision@k of the batch (sigmoid ranks)",
    ),
    "arcface": ("oml_losses.arcface:ArcFaceLoss", "additive angular margin softmax (ArcFace)"),
    "mlp_arcface": ("oml_losses.arcface:ArcFaceLossWithMLP", "ArcFace on top of an MLP head"),
    "contrastive": (
        "oml_losses.contrastive:ContrastiveLoss",
        "pair margin loss of all the pairs of a batch (Hadsell et al.)",
    ),
    "multi_similarity": (
        "oml_losses.multi_similarity:MultiSimilarityLoss",
        "multi-similarity loss of the cosine similarities of a batch (Wang et al.)",
    ),
    "proxy_anchor": (
        "oml_losses.proxy_anchor:ProxyAnchorLoss",
        "proxy anchor loss: one learnable proxy per class (Kim et al.)",
    ),
    "supcon": (
        "oml_losses.supcon:SupConLoss",
        "supervised contrastive loss, supervised NT-Xent (Khosla et al.)",
    ),
}

MINERS = {
    "all_triplets": ("oml_losses.miners.inbatch_all_tri:AllTripletsMiner", "all triplets of a batch"),
    "hard_triplets": (
        "oml_losses.miners.inbatch_hard_tri:HardTripletsMiner",
        "the farthest positive and the closest negative of every anchor",
    ),
    "n_hard_triplets": (
        "oml_losses.miners.inbatch_nhard_tri:NHardTripletsMiner",
        "the n hardest positives x n hardest negatives of every anchor (or ranges of hardness)",
    ),
    "hard_cluster": (
        "oml_losses.miners.inbatch_hard_cluster:HardClusterMiner",
        "label means as anchors, their farthest items and closest other means",
    ),
    "triplets_with_memory": (
        "oml_losses.miners.cross_batch:TripletMinerWithMemory",
        "the batch's triplets plus triplets mixing the batch and a memory bank",
    ),
    "miner_with_bank": (
        "oml_losses.miners.miner_with_bank:MinerWithBank",
        "anchors of the batch, positives and negatives from the batch and a memory bank",
    ),
}

PAIRS_MINERS = {
    "pairs": (
        "oml_losses.miners.pairs:PairsMiner",
        "the positive and negative pairs of the hardest (or of all) triplets of a batch",
    ),
}


@hookimpl
def oml_register_losses(register: RegisterCallback) -> None:
    """Register the losses of :data:`LOSSES` under OML's config names."""
    for name, (factory, description) in LOSSES.items():
        register(name, factory, description=description)


@hookimpl
def oml_register_miners(register: RegisterCallback) -> None:
    """Register the miners of :data:`MINERS` under OML's config names."""
    for name, (factory, description) in MINERS.items():
        register(name, factory, description=description)


@hookimpl
def oml_register_pairs_miners(register: RegisterCallback) -> None:
    """Register the pair miners of :data:`PAIRS_MINERS` (OML's ``PairsMiner`` as ``pairs``)."""
    for name, (factory, description) in PAIRS_MINERS.items():
        register(name, factory, description=description)


@hookimpl
def oml_register_config_dirs(register: RegisterCallback) -> None:
    """The default configs: ``loss/<name>.yaml``, ``miner/<name>.yaml`` and ``pairs_miner/<name>.yaml``."""
    register("pkg://oml_losses.configs")
