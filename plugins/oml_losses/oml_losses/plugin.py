"""The plugin module of the ``oml_losses`` plugin: the losses, the triplet and pair miners and their default
configs.

:data:`COMPONENTS` is the plugin's one table: declared as ``OML_COMPONENTS``, the registry registers it, and the
package ``oml_losses`` takes its lazy exports and ``__all__`` from it and from :data:`EXTRA_EXPORTS`. Factories are
lazy ``"module:attr"`` strings: registering imports no torch module. The default config of a component ``name`` of
kind ``kind`` is ``oml_losses/configs/<kind>/<name>.yaml``."""

from __future__ import annotations

from types import MappingProxyType

from oml_core.utils.lazy import Component

#: Every component of the plugin, each exported by ``oml_losses`` under its class name.
COMPONENTS: tuple[Component, ...] = (
    Component(
        "loss", "triplet", "oml_losses.triplet:TripletLoss", "triplet loss of (anchor, positive, negative)"
    ),
    Component(
        "loss",
        "triplet_plain",
        "oml_losses.triplet:TripletLossPlain",
        "triplet loss of stacked rows 0,1,2 / 3,4,5 ..",
    ),
    Component(
        "loss",
        "triplet_with_miner",
        "oml_losses.triplet:TripletLossWithMiner",
        "triplet loss of mined triplets",
    ),
    Component(
        "loss",
        "surrogate_precision",
        "oml_losses.surrogate_precision:SurrogatePrecision",
        "1 - smoothed precision@k of the batch (sigmoid ranks)",
    ),
    Component(
        "loss", "arcface", "oml_losses.arcface:ArcFaceLoss", "additive angular margin softmax (ArcFace)"
    ),
    Component(
        "loss", "mlp_arcface", "oml_losses.arcface:ArcFaceLossWithMLP", "ArcFace on top of an MLP head"
    ),
    Component(
        "loss",
        "contrastive",
        "oml_losses.contrastive:ContrastiveLoss",
        "pair margin loss of all the pairs of a batch (Hadsell et al.)",
    ),
    Component(
        "loss",
        "multi_similarity",
        "oml_losses.multi_similarity:MultiSimilarityLoss",
        "multi-similarity loss of the cosine similarities of a batch (Wang et al.)",
    ),
    Component(
        "loss",
        "proxy_anchor",
        "oml_losses.proxy_anchor:ProxyAnchorLoss",
        "proxy anchor loss: one learnable proxy per class (Kim et al.)",
    ),
    Component(
        "loss",
        "supcon",
        "oml_losses.supcon:SupConLoss",
        "supervised contrastive loss, supervised NT-Xent (Khosla et al.)",
    ),
    Component(
        "miner",
        "all_triplets",
        "oml_losses.miners.inbatch_all_tri:AllTripletsMiner",
        "all triplets of a batch",
    ),
    Component(
        "miner",
        "hard_triplets",
        "oml_losses.miners.inbatch_hard_tri:HardTripletsMiner",
        "the farthest positive and the closest negative of every anchor",
    ),
    Component(
        "miner",
        "n_hard_triplets",
        "oml_losses.miners.inbatch_nhard_tri:NHardTripletsMiner",
        "the n hardest positives x n hardest negatives of every anchor (or ranges of hardness)",
    ),
    Component(
        "miner",
        "hard_cluster",
        "oml_losses.miners.inbatch_hard_cluster:HardClusterMiner",
        "label means as anchors, their farthest items and closest other means",
    ),
    Component(
        "miner",
        "triplets_with_memory",
        "oml_losses.miners.cross_batch:TripletMinerWithMemory",
        "the batch's triplets plus triplets mixing the batch and a memory bank",
    ),
    Component(
        "miner",
        "miner_with_bank",
        "oml_losses.miners.miner_with_bank:MinerWithBank",
        "anchors of the batch, positives and negatives from the batch and a memory bank",
    ),
    Component(
        "pairs_miner",
        "pairs",
        "oml_losses.miners.pairs:PairsMiner",
        "the positive and negative pairs of the hardest (or of all) triplets of a batch",
    ),
)

#: The other public names of ``oml_losses`` (helpers, not components): ``{name: module}``.
EXTRA_EXPORTS: MappingProxyType[str, str] = MappingProxyType(
    {
        "label_smoothing": "oml_core.functional.label_smoothing",
        "pairwise_l2": "oml_core.utils.misc_torch",
        "get_available_triplets_ids": "oml_losses.miners.triplet_masks",
        # OML's functions of oml.miners.inbatch_all_tri (found there through oml_core's forwarding modules)
        "get_available_triplets": "oml_losses.miners.inbatch_all_tri",
        "get_available_triplets_naive": "oml_losses.miners.inbatch_all_tri",
        # OML's names of oml.losses.triplet
        "TLogs": "oml_losses.triplet",
        "get_tri_ids_in_plain": "oml_losses.triplet",
    }
)

#: The declarations the registry reads (no hook function): the table, and the package of the default configs
#: (``<kind>/<name>.yaml``).
OML_COMPONENTS = COMPONENTS
OML_CONFIG_DIRS = ("pkg://oml_losses.configs",)
