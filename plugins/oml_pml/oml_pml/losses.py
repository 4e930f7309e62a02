"""PML's losses as oml criteria: :class:`PMLLoss` and one factory per loss.

Registered names (kind ``loss``; ``pml_`` + the class name without ``Loss`` in snake_case, the names written
as one word by their papers kept one word, see :mod:`oml_pml.names`; the PML class name is an alias):

=====================================  =================================  ==========================
name                                   PML class                          batches / arguments
=====================================  =================================  ==========================
pml_angular                            AngularLoss
pml_arcface                            ArcFaceLoss                        num_classes, embedding_size
pml_circle                             CircleLoss
pml_contrastive                        ContrastiveLoss
pml_cosface                            CosFaceLoss                        num_classes, embedding_size
pml_cross_batch_memory                 CrossBatchMemory                   loss (a pml_ pair loss), embedding_size
pml_dynamic_soft_margin                DynamicSoftMarginLoss
pml_fastap                             FastAPLoss
pml_generalized_lifted_structure       GeneralizedLiftedStructureLoss
pml_histogram                          HistogramLoss
pml_instance                           InstanceLoss                       no miner
pml_intra_pair_variance                IntraPairVarianceLoss
pml_large_margin_softmax               LargeMarginSoftmaxLoss             num_classes, embedding_size
pml_lifted_structure                   LiftedStructureLoss
pml_margin                             MarginLoss                         num_classes with learn_beta
pml_multi_similarity                   MultiSimilarityLoss
pml_n_pairs                            NPairsLoss
pml_nca                                NCALoss
pml_normalized_softmax                 NormalizedSoftmaxLoss              num_classes, embedding_size
pml_ntxent                             NTXentLoss
pml_p2sgrad                            P2SGradLoss                        num_classes, descriptors_dim; no miner
pml_pnp                                PNPLoss                            no miner
pml_proxy_anchor                       ProxyAnchorLoss                    num_classes, embedding_size
pml_proxy_nca                          ProxyNCALoss                       num_classes, embedding_size
pml_ranked_list                        RankedListLoss                     margin, Tn required; no miner
pml_signal_to_noise_ratio_contrastive  SignalToNoiseRatioContrastiveLoss
pml_smooth_ap                          SmoothAPLoss                       n labels x n instances, by label
pml_softtriple                         SoftTripleLoss                     num_classes, embedding_size
pml_sphereface                         SphereFaceLoss                     num_classes, embedding_size
pml_sub_center_arcface                 SubCenterArcFaceLoss               num_classes, embedding_size
pml_supcon                             SupConLoss
pml_threshold_consistent_margin        ThresholdConsistentMarginLoss
pml_triplet_margin                     TripletMarginLoss
pml_tuplet_margin                      TupletMarginLoss
=====================================  =================================  ==========================

Each factory takes the PML class's own constructor arguments (PML's defaults), those of its bases
(``reducer``, ``distance``, ``embedding_regularizer``, ``embedding_reg_weight``, ``collect_stats``; for the
losses with class weights also ``weight_regularizer``, ``weight_reg_weight``, ``weight_init_func``) and
``miner`` (but the losses marked "no miner", which PML computes from the labels alone); it returns a
:class:`PMLLoss`. ``distance``, ``reducer`` and the regularizers are a class name of
``pytorch_metric_learning.distances`` / ``.reducers`` / ``.regularizers``, a ``{name: <class>, args: {...}}``
spec (in configs: see :mod:`oml_pml.components` on ``oml_self_built_args``) or a built object; ``miner`` is an
oml miner (through the registry: ``{name: MultiSimilarityMiner, args: {...}}`` or any ``pml_`` miner, or an
oml in-batch triplet miner such as ``hard_triplets``), a PML miner, or a miner name / spec. The factories are
built on first access (PEP 562 ``__getattr__``), so that ``oml_pml.plugin`` registers
``"oml_pml.losses:<name>"`` strings without importing PML.

Left out (they do not fit ``forward(features, labels)``): ManifoldLoss (PML raises on labels: its meta-classes
are random), VICRegLoss and SelfSupervisedLoss (two views, no labels), MultipleLosses (a wrapper of several
built losses), GenericPairLoss and the other base classes (abstract).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from oml_core.interfaces.miners import ITripletsMinerInBatch
from oml_core.registry import SELF_BUILT_ARGS_ATTR
from oml_pml.components import (
    build_component,
    component_annotation,
    constructor_parameters,
    lazy_factories,
    make_factory,
    pml_base,
    pml_module,
    split_spec,
    unknown_name_error,
)
from oml_pml.miners import Miner, PMLMiner, as_labels, resolve_miner
from oml_pml.names import COMPONENT_ARGS, LOSS_NAMES, LOSSES, NO_MINER

CROSS_BATCH_MEMORY = "pml_cross_batch_memory"

#: The keys of :attr:`PMLLoss.last_logs`: PML's own names of the miner's counts.
MINED_COUNTS = ("num_pos_pairs", "num_neg_pairs", "num_triplets")


class PMLLoss(nn.Module):
    """A PML loss (and optionally a miner) as an oml criterion.

    ``forward(features, labels) = loss(features, labels, miner(features, labels))`` (no indices without a
    miner); labels may be a list or a tensor. The PML loss (and a PML miner) are submodules, so the PML loss's
    learnable parameters (class weights, proxies, a learnable beta) are the wrapper's parameters and go to the
    optimizer with the extractor's.

    Attributes:
        loss: The PML loss (``BaseMetricLossFunction``, or ``CrossBatchMemory``).
        miner: The PML miner or oml in-batch triplet miner, or ``None``.
        in_features: The embedding size a classification-like loss expects (only set when it has one, so that
            the training pipeline checks it against the extractor).
        in_features_argument: The PML argument ``in_features`` was read from (``embedding_size``,
            ``descriptors_dim``), which the pipeline's message names.
        num_classes: The number of classes of such a loss (only set when it has one; the pipeline checks the
            labels against it).
        last_logs: After each forward pass, the miner's counts of the batch: ``num_pos_pairs`` and
            ``num_neg_pairs`` for a pair miner, ``num_triplets`` for a triplet miner (for ``CrossBatchMemory``,
            those its miner recorded); ``{}`` without a miner.

    Args:
        loss: A loss of ``pytorch_metric_learning.losses``.
        miner: See :func:`oml_pml.miners.resolve_miner` (a ``PMLMiner``, a PML miner, an oml in-batch triplet
            miner, a miner name or spec), or ``None``.
        in_features: The embedding size the loss expects (its ``embedding_size`` or ``descriptors_dim``), or
            ``None`` for a loss without one.
        num_classes: Overrides the number of classes read from the loss (``num_classes``).
        in_features_argument: The PML argument that ``in_features`` is (for the pipeline's message).
    """

    def __init__(
        self,
        loss: nn.Module,
        miner: Any = None,
        *,
        in_features: int | None = None,
        num_classes: int | None = None,
        in_features_argument: str = "embedding_size",
    ) -> None:
        super().__init__()
        accepted = (pml_base("losses"), pml_module("losses").BaseLossWrapper)
        if not isinstance(loss, accepted):
            raise TypeError(
                f"PMLLoss wraps a loss of pytorch_metric_learning.losses, got {type(loss).__name__}"
            )
        self.loss = loss
        self.miner: Miner | None = resolve_miner(miner)
        if num_classes is None:
            num_classes = getattr(loss, "num_classes", None)
        if isinstance(in_features, int):
            self.in_features = in_features
            self.in_features_argument = in_features_argument
        if isinstance(num_classes, int):
            self.num_classes = num_classes
        self.last_logs: dict[str, Any] = {}

    def forward(self, features: Tensor, labels: Tensor | list[int]) -> Tensor:
        """The loss of ``features`` ``[batch_size, dim]`` with ``labels`` ``[batch_size]`` (a scalar)."""
        labels = as_labels(labels, features.device)
        indices = self._mine(features, labels) if self.miner is not None else None
        loss = self.loss(features, labels, indices)
        self.last_logs = self._logs(indices)
        return loss

    def _mine(self, features: Tensor, labels: Tensor) -> tuple[Tensor, ...]:
        if isinstance(self.miner, ITripletsMinerInBatch):
            with torch.no_grad():
                ids = self.miner._sample(features, labels.tolist())
            return tuple(torch.as_tensor(i, dtype=torch.long, device=features.device) for i in ids)
        return self.miner(features, labels)

    def _logs(self, indices: tuple[Tensor, ...] | None) -> dict[str, Any]:
        if indices is not None:
            if len(indices) == 4:
                return {"num_pos_pairs": len(indices[0]), "num_neg_pairs": len(indices[2])}
            return {"num_triplets": len(indices[0])}
        inner_miner = getattr(self.loss, "miner", None)  # CrossBatchMemory mines itself
        if inner_miner is None:
            return {}
        return {
            k: getattr(inner_miner, k) for k in MINED_COUNTS if isinstance(getattr(inner_miner, k, None), int)
        }


def _loss_factory(name: str) -> Callable[..., PMLLoss]:
    class_name = LOSS_NAMES[name]
    cls = getattr(pml_module("losses"), class_name)
    params = [
        p.replace(annotation=component_annotation(COMPONENT_ARGS[p.name])) if p.name in COMPONENT_ARGS else p
        for p in constructor_parameters(cls)
    ]
    if class_name not in NO_MINER:
        miner_annotation = pml_base("miners") | PMLMiner | ITripletsMinerInBatch | dict | str | None
        params.append(
            inspect.Parameter(
                "miner", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=miner_annotation
            )
        )

    def build(args: dict[str, Any]) -> PMLLoss:
        miner = args.pop("miner", None)
        for key in COMPONENT_ARGS.keys() & args.keys():
            args[key] = build_component(key, args[key])
        argument = "descriptors_dim" if "descriptors_dim" in args else "embedding_size"
        return PMLLoss(
            cls(**args),
            miner,
            in_features=args.get(argument),
            num_classes=args.get("num_classes"),
            in_features_argument=argument,
        )

    description, paper = LOSSES[class_name]
    doc = f"``pytorch_metric_learning.losses.{class_name}`` as an oml criterion: {description} ({paper})."
    return make_factory(name, __name__, params, build, doc, PMLLoss)


def _bare_pml_loss(loss: Any) -> nn.Module:
    """The PML loss that ``CrossBatchMemory`` wraps, from a minerless :class:`PMLLoss`, a PML loss, or a loss
    name / ``{name, args}`` spec (a registered ``pml_`` name or a PML class name)."""
    if isinstance(loss, str | Mapping):
        name, args = split_spec("loss", loss)
        by_class = {c: n for n, c in LOSS_NAMES.items() if n != CROSS_BATCH_MEMORY}
        name = by_class.get(name, name)
        if name not in by_class.values():
            raise unknown_name_error("loss", name, sorted(by_class.values()), "the pml_ losses")
        loss = loss_factory(name)(**args)
    if isinstance(loss, PMLLoss):
        if loss.miner is not None:
            raise ValueError(
                "pml_cross_batch_memory: give the miner to the cross-batch memory, not to its loss"
            )
        loss = loss.loss
    if not isinstance(loss, pml_base("losses")):
        raise TypeError(f"pml_cross_batch_memory: loss must be a pml_ loss, got {type(loss).__name__}")
    return loss


def pml_cross_batch_memory(
    loss: Any, embedding_size: int, memory_size: int = 1024, miner: Any = None
) -> PMLLoss:
    """``pytorch_metric_learning.losses.CrossBatchMemory`` as an oml criterion: ``loss`` (a ``pml_`` pair or
    triplet loss without a miner: ContrastiveLoss, MultiSimilarityLoss, TripletMarginLoss, NTXentLoss, ...; see
    ``CrossBatchMemory.supported_losses()``) computed between the batch and a memory of the last
    ``memory_size`` embeddings (``embedding_size``-dimensional, the batch's included), the pairs or triplets
    chosen by ``miner`` (a PML miner: ``{name: MultiSimilarityMiner, ...}``) or all of them.
    (Wang et al., Cross-Batch Memory for Embedding Learning, CVPR 2020, arXiv:1912.06798.)

    The memory is a buffer of the criterion (it moves with it); its fill position is not saved in
    checkpoints, so a resumed run fills it again.
    """
    memory_miner = resolve_miner(miner)
    if memory_miner is not None and not isinstance(memory_miner, pml_base("miners")):
        raise TypeError("pml_cross_batch_memory: miner must be a PML miner (it mines against the memory)")
    cbm = pml_module("losses").CrossBatchMemory(
        _bare_pml_loss(loss), embedding_size, memory_size=memory_size, miner=memory_miner
    )
    return PMLLoss(cbm, in_features=embedding_size)


#: ``loss_factory(name)``: the factory of the registered loss ``name``, built on first use and then kept as a
#: module attribute (``AttributeError`` for an unknown name); the module's ``__getattr__`` is the same.
loss_factory, __getattr__, __dir__ = lazy_factories(__name__, LOSS_NAMES, _loss_factory)


setattr(pml_cross_batch_memory, SELF_BUILT_ARGS_ATTR, frozenset())

__all__ = ["MINED_COUNTS", "PMLLoss", "PMLMiner", "loss_factory", "pml_cross_batch_memory"]
