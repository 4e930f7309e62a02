"""The static tables of the plugin: which pytorch-metric-learning (PML) classes it registers, under which names.

Importing this module imports neither torch nor PML, so that the plugin module (:mod:`oml_pml.plugin`) can
register every name lazily.

Naming rule (:func:`pml_name`): ``pml_`` + the class name without its ``Loss`` / ``Miner`` suffix, in
snake_case (a run of capitals is one word: ``ProxyNCALoss`` -> ``pml_proxy_nca``, ``NPairsLoss`` ->
``pml_n_pairs``), except that the names their papers write as one word stay one word: ArcFace, CosFace,
SphereFace, SoftTriple, FastAP, NTXent, SupCon and P2SGrad (``SubCenterArcFaceLoss`` ->
``pml_sub_center_arcface``). Every name also has the PML class name as an alias (``MultiSimilarityMiner``).
"""

from __future__ import annotations

import re
from types import MappingProxyType

#: Names written as one word by their papers: one word in the snake_case name too.
ONE_WORD = ("ArcFace", "CosFace", "SphereFace", "SoftTriple", "FastAP", "NTXent", "SupCon", "P2SGrad")

#: Prefix of every registered name.
PREFIX = "pml_"


def pml_name(class_name: str) -> str:
    """The registered name of the PML class ``class_name`` (see the module's naming rule)."""
    stem = class_name.removesuffix("Loss").removesuffix("Miner")
    for word in ONE_WORD:
        stem = stem.replace(word, word.capitalize())
    stem = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", stem)
    stem = re.sub(r"([a-z\d])([A-Z])", r"\1_\2", stem)
    return PREFIX + stem.lower()


#: The PML losses the plugin registers: ``{class name: (what it is, the paper)}``; all of
#: ``pytorch_metric_learning.losses``.
LOSSES: MappingProxyType[str, tuple[str, str]] = MappingProxyType(
    {
        "AngularLoss": (
            "angular loss: bounds the angle at the negative of every (anchor, positive, negative) triangle",
            "Wang et al., Deep Metric Learning with Angular Loss, ICCV 2017 (arXiv:1708.01682)",
        ),
        "ArcFaceLoss": (
            "ArcFace: softmax over class weights with an additive angular margin",
            "Deng et al., ArcFace: Additive Angular Margin Loss for Deep Face Recognition, CVPR 2019 "
            "(arXiv:1801.07698)",
        ),
        "CircleLoss": (
            "circle loss: pair similarities re-weighted by their distance to their optimum",
            "Sun et al., Circle Loss: A Unified Perspective of Pair Similarity Optimization, CVPR 2020 "
            "(arXiv:2002.10857)",
        ),
        "ContrastiveLoss": (
            "contrastive loss: positive pairs above pos_margin and negative pairs below neg_margin are penalized",
            "Hadsell, Chopra, LeCun, Dimensionality Reduction by Learning an Invariant Mapping, CVPR 2006",
        ),
        "CosFaceLoss": (
            "CosFace: softmax over class weights with an additive cosine margin",
            "Wang et al., CosFace: Large Margin Cosine Loss for Deep Face Recognition, CVPR 2018 (arXiv:1801.09414)",
        ),
        "CrossBatchMemory": (
            "cross-batch memory: another PML loss computed against a memory bank of past batches' embeddings",
            "Wang et al., Cross-Batch Memory for Embedding Learning, CVPR 2020 (arXiv:1912.06798)",
        ),
        "DynamicSoftMarginLoss": (
            "dynamic soft margin: a triplet loss whose margin follows the CDF of the batch's distance gaps",
            "Zhang, Rusinkiewicz, Learning Local Descriptors With a CDF-Based Dynamic Soft Margin, ICCV 2019",
        ),
        "FastAPLoss": (
            "FastAP: average precision approximated with distance histograms",
            "Cakir et al., Deep Metric Learning to Rank, CVPR 2019",
        ),
        "GeneralizedLiftedStructureLoss": (
            "generalized lifted structure: log-sum-exp of the positive distances and of the negative margins",
            "Hermans, Beyer, Leibe, In Defense of the Triplet Loss for Person Re-Identification, 2017 "
            "(arXiv:1703.07737)",
        ),
        "HistogramLoss": (
            "histogram loss: overlap of the histograms of positive and negative similarities",
            "Ustinova, Lempitsky, Learning Deep Embeddings with Histogram Loss, NeurIPS 2016 (arXiv:1611.00822)",
        ),
        "InstanceLoss": (
            "instance loss: cross-entropy over the batch similarity matrix with the labels as classes",
            "Zheng et al., Dual-Path Convolutional Image-Text Embeddings with Instance Loss, ACM TOMM 2020 "
            "(arXiv:1711.05535)",
        ),
        "IntraPairVarianceLoss": (
            "intra-pair variance: penalizes positive and negative similarities far from their means",
            "Yu, Tao, Deep Metric Learning with Tuplet Margin Loss, ICCV 2019",
        ),
        "LargeMarginSoftmaxLoss": (
            "L-Softmax: softmax over class weights with a multiplicative angular margin",
            "Liu et al., Large-Margin Softmax Loss for Convolutional Neural Networks, ICML 2016 (arXiv:1612.02295)",
        ),
        "LiftedStructureLoss": (
            "lifted structure: every positive pair against all the negatives of both its items",
            "Oh Song et al., Deep Metric Learning via Lifted Structured Feature Embedding, CVPR 2016 "
            "(arXiv:1511.06452)",
        ),
        "MarginLoss": (
            "margin loss: positives within beta - margin, negatives beyond beta + margin (beta learnable)",
            "Wu et al., Sampling Matters in Deep Embedding Learning, ICCV 2017 (arXiv:1706.07567)",
        ),
        "MultiSimilarityLoss": (
            "multi-similarity: soft weighting of pairs by self and relative similarities",
            "Wang et al., Multi-Similarity Loss with General Pair Weighting for Deep Metric Learning, CVPR 2019 "
            "(arXiv:1904.06627)",
        ),
        "NCALoss": (
            "NCA: softmax over the batch's negative distances, the probability of picking a positive",
            "Goldberger et al., Neighbourhood Components Analysis, NeurIPS 2004",
        ),
        "NPairsLoss": (
            "N-pairs: one positive pair per label against the positives of the other labels",
            "Sohn, Improved Deep Metric Learning with Multi-class N-pair Loss Objective, NeurIPS 2016",
        ),
        "NormalizedSoftmaxLoss": (
            "normalized softmax: softmax over normalized class weights with a temperature",
            "Zhai, Wu, Classification is a Strong Baseline for Deep Metric Learning, BMVC 2019 (arXiv:1811.12649)",
        ),
        "NTXentLoss": (
            "NT-Xent (InfoNCE): every positive pair against the negatives, with a temperature",
            "Chen et al., A Simple Framework for Contrastive Learning of Visual Representations, ICML 2020 "
            "(arXiv:2002.05709)",
        ),
        "P2SGradLoss": (
            "P2SGrad: mean squared error between the cosines to the class weights and the one-hot labels",
            "Zhang et al., P2SGrad: Refined Gradients for Optimizing Deep Face Models, CVPR 2019 (arXiv:1905.02479)",
        ),
        "PNPLoss": (
            "PNP: smoothed count of the negatives ranked before each positive",
            "Li et al., Rethinking the Optimization of Average Precision: Only Penalizing Negative Instances "
            "before Positive Ones is Enough, AAAI 2022 (arXiv:2102.04640)",
        ),
        "ProxyAnchorLoss": (
            "Proxy-Anchor: one learnable proxy per class as the anchor of all the batch's samples",
            "Kim et al., Proxy Anchor Loss for Deep Metric Learning, CVPR 2020 (arXiv:2003.13911)",
        ),
        "ProxyNCALoss": (
            "Proxy-NCA: NCA against one learnable proxy per class",
            "Movshovitz-Attias et al., No Fuss Distance Metric Learning using Proxies, ICCV 2017 "
            "(arXiv:1703.07464)",
        ),
        "RankedListLoss": (
            "ranked list loss: positives inside, negatives outside a margin of every anchor's ranked list",
            "Wang et al., Ranked List Loss for Deep Metric Learning, CVPR 2019 (arXiv:1903.03238)",
        ),
        "SignalToNoiseRatioContrastiveLoss": (
            "SNR contrastive loss: a contrastive loss on the signal-to-noise-ratio distance",
            "Yuan et al., Signal-to-Noise Ratio: A Robust Distance Metric for Deep Metric Learning, CVPR 2019",
        ),
        "SmoothAPLoss": (
            "Smooth-AP: average precision with sigmoid-smoothed ranks",
            "Brown et al., Smooth-AP: Smoothing the Path Towards Large-Scale Image Retrieval, ECCV 2020 "
            "(arXiv:2007.12163)",
        ),
        "SoftTripleLoss": (
            "SoftTriple: softmax over several learnable centers per class",
            "Qian et al., SoftTriple Loss: Deep Metric Learning Without Triplet Sampling, ICCV 2019 "
            "(arXiv:1909.05235)",
        ),
        "SphereFaceLoss": (
            "SphereFace: softmax over normalized class weights with a multiplicative angular margin",
            "Liu et al., SphereFace: Deep Hypersphere Embedding for Face Recognition, CVPR 2017 (arXiv:1704.08063)",
        ),
        "SubCenterArcFaceLoss": (
            "Sub-center ArcFace: ArcFace with several sub-centers per class",
            "Deng et al., Sub-center ArcFace: Boosting Face Recognition by Large-Scale Noisy Web Faces, ECCV 2020",
        ),
        "SupConLoss": (
            "SupCon: supervised contrastive loss, all the positives of every anchor against its negatives",
            "Khosla et al., Supervised Contrastive Learning, NeurIPS 2020 (arXiv:2004.11362)",
        ),
        "ThresholdConsistentMarginLoss": (
            "threshold-consistent margin: a regularizer of the hard pairs' similarity margins",
            "Zhang et al., Threshold-Consistent Margin Loss for Open-World Deep Metric Learning, ICLR 2024 "
            "(arXiv:2307.04047)",
        ),
        "TripletMarginLoss": (
            "triplet margin loss: d(anchor, positive) - d(anchor, negative) + margin",
            "Schroff et al., FaceNet: A Unified Embedding for Face Recognition and Clustering, CVPR 2015 "
            "(arXiv:1503.03832)",
        ),
        "TupletMarginLoss": (
            "tuplet margin: every positive against all negatives, with a slack margin on the angles",
            "Yu, Tao, Deep Metric Learning with Tuplet Margin Loss, ICCV 2019",
        ),
    }
)

#: The PML miners the plugin registers (kind ``miner``): ``{class name: (what it mines, the paper)}``.
MINERS: MappingProxyType[str, tuple[str, str]] = MappingProxyType(
    {
        "AngularMiner": (
            "triplets whose angle at the negative exceeds angle degrees",
            "Wang et al., Deep Metric Learning with Angular Loss, ICCV 2017 (arXiv:1708.01682)",
        ),
        "BatchEasyHardMiner": (
            "per anchor, one positive and one negative by strategy (easy, semihard, hard, all)",
            "Xuan et al., Improved Embeddings with Easy Positive Triplet Mining, WACV 2020 (arXiv:1904.04370)",
        ),
        "BatchHardMiner": (
            "per anchor, its hardest positive and hardest negative",
            "Hermans, Beyer, Leibe, In Defense of the Triplet Loss for Person Re-Identification, 2017 "
            "(arXiv:1703.07737)",
        ),
        "DistanceWeightedMiner": (
            "triplets with negatives sampled by the inverse of the distance density",
            "Wu et al., Sampling Matters in Deep Embedding Learning, ICCV 2017 (arXiv:1706.07567)",
        ),
        "HDCMiner": (
            "the hardest filter_percentage of the positive and negative pairs",
            "Yuan et al., Hard-Aware Deeply Cascaded Embedding, ICCV 2017 (arXiv:1611.05720)",
        ),
        "MultiSimilarityMiner": (
            "pairs harder than the closest negative / farthest positive by epsilon",
            "Wang et al., Multi-Similarity Loss with General Pair Weighting for Deep Metric Learning, CVPR 2019 "
            "(arXiv:1904.06627)",
        ),
        "PairMarginMiner": (
            "positive pairs beyond pos_margin and negative pairs within neg_margin",
            "pytorch-metric-learning",
        ),
        "TripletMarginMiner": (
            "triplets violating the margin: all, hard, semihard or easy",
            "Schroff et al., FaceNet, CVPR 2015 (arXiv:1503.03832)",
        ),
        "UniformHistogramMiner": (
            "pairs sampled uniformly over the histogram of their distances",
            "pytorch-metric-learning",
        ),
    }
)

#: PML losses and miners the plugin does not register, and why.
LEFT_OUT: MappingProxyType[str, str] = MappingProxyType(
    {
        "ManifoldLoss": "takes no labels (PML raises on labels): its proxies' meta-classes are drawn at random",
        "VICRegLoss": "self-supervised: forward(embeddings, ref_emb) of two views, no labels",
        "SelfSupervisedLoss": "a wrapper taking two augmented views of a batch, no labels",
        "MultipleLosses": "a wrapper of several built losses; oml configs take one criterion",
        "GenericPairLoss": "an abstract base class (mat_based_loss / pair_based_loss)",
        "BaseMetricLossFunction": "the abstract base class of the losses",
        "BaseLossWrapper": "the abstract base class of CrossBatchMemory and SelfSupervisedLoss",
        "EmbeddingsAlreadyPackagedAsTriplets": "does not mine: it assumes batches of consecutive "
        "(anchor, positive, negative) rows, which oml's samplers never give (pass it built, in Python)",
        "BaseMiner": "the abstract base class of the miners",
    }
)

#: Losses that PML computes from the labels alone: they raise on an indices tuple, so their factories take no
#: ``miner``.
NO_MINER = frozenset({"InstanceLoss", "P2SGradLoss", "PNPLoss", "RankedListLoss"})

#: ``{registered name: PML class name}`` of the losses and of the miners.
LOSS_NAMES: MappingProxyType[str, str] = MappingProxyType({pml_name(c): c for c in LOSSES})
MINER_NAMES: MappingProxyType[str, str] = MappingProxyType({pml_name(c): c for c in MINERS})

#: Arguments naming a PML distance, reducer or regularizer, built by the plugin (their PML module).
COMPONENT_ARGS: MappingProxyType[str, str] = MappingProxyType(
    {
        "distance": "distances",
        "reducer": "reducers",
        "embedding_regularizer": "regularizers",
        "weight_regularizer": "regularizers",
    }
)
