"""PML's miners as oml miners (kind ``miner``): :class:`PMLMiner` and one factory per miner.

Registered names (``pml_`` + the class name without ``Miner`` in snake_case; the PML class name is an alias,
so that a loss's config may say ``miner: {name: MultiSimilarityMiner, args: {epsilon: 0.1}}``):

==========================  ==========================
name                        PML class
==========================  ==========================
pml_angular                 AngularMiner
pml_batch_easy_hard         BatchEasyHardMiner
pml_batch_hard              BatchHardMiner
pml_distance_weighted       DistanceWeightedMiner
pml_hdc                     HDCMiner
pml_multi_similarity        MultiSimilarityMiner
pml_pair_margin             PairMarginMiner
pml_triplet_margin          TripletMarginMiner
pml_uniform_histogram       UniformHistogramMiner
==========================  ==========================

Each factory takes the PML class's own arguments plus ``distance`` (a class name of
``pytorch_metric_learning.distances``, a ``{name, args}`` spec or a built distance) and ``collect_stats``, and
returns a :class:`PMLMiner`. The factories are built on first access (PEP 562 ``__getattr__``), so that
``oml_pml.plugin`` registers ``"oml_pml.miners:<name>"`` strings without importing PML.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

from oml_core.interfaces.miners import ITripletsMinerInBatch
from oml_pml.components import (
    build_component,
    component_annotation,
    constructor_parameters,
    lazy_factories,
    make_factory,
    pml_base,
    pml_module,
)
from oml_pml.names import MINER_NAMES, MINERS

#: The miners a :class:`~oml_pml.losses.PMLLoss` runs: a PML miner or an oml in-batch triplet miner.
Miner = Any  # pytorch_metric_learning.miners.BaseMiner | ITripletsMinerInBatch


class PMLMiner(ITripletsMinerInBatch):
    """A PML miner as an oml in-batch triplet miner.

    ``pml_loss(features, labels, miner(features, labels))`` is how a PML loss uses it (:meth:`__call__` gives
    PML's own indices: ``(anchors, positives, negatives)`` for a triplet miner, ``(anchors1, positives,
    anchors2, negatives)`` for a pair miner); :meth:`sample` (oml's interface, e.g. for ``triplet_with_miner``)
    gives the features of the triplets, the pairs of a pair miner turned into every triplet of a shared anchor
    (PML's ``convert_to_triplets``).

    Args:
        miner: A miner of ``pytorch_metric_learning.miners``.
    """

    def __init__(self, miner: torch.nn.Module) -> None:
        base = pml_base("miners")
        if not isinstance(miner, base):
            raise TypeError(f"PMLMiner wraps a {base.__name__} of pytorch_metric_learning, got {type(miner)}")
        self.miner = miner

    def __call__(self, features: Tensor, labels: Tensor | list[int]) -> tuple[Tensor, ...]:
        """PML's indices tuple of the batch (see the class docstring)."""
        return self.miner(features, as_labels(labels, features.device))

    def _sample(self, features: Tensor, labels: list[int]) -> tuple[Tensor, Tensor, Tensor]:
        from pytorch_metric_learning.utils import loss_and_miner_utils as lmu

        labels_tensor = as_labels(labels, features.device)
        return lmu.convert_to_triplets(self.miner(features, labels_tensor), labels_tensor)

    def __repr__(self) -> str:
        return f"PMLMiner({self.miner!r})"


def as_labels(labels: Tensor | list[int], device: torch.device) -> Tensor:
    """Labels as a 1-D ``int64`` tensor on ``device`` (PML's losses and miners need a tensor)."""
    return torch.as_tensor(labels, dtype=torch.long, device=device)


def resolve_miner(miner: Any, argument: str = "miner") -> Miner | None:
    """The miner a PML loss runs from ``miner``: ``None``; a :class:`PMLMiner` (its PML miner); a PML miner; an
    oml :class:`~oml_core.interfaces.miners.ITripletsMinerInBatch`; or a miner class name / registered ``pml_``
    name / ``{name, args}`` spec (built here).

    Raises:
        ValueError: an unknown miner name.
        TypeError: an object of another type.
    """
    if miner is None or isinstance(miner, pml_base("miners")):
        return miner
    if isinstance(miner, PMLMiner):
        return miner.miner
    if isinstance(miner, ITripletsMinerInBatch):
        return miner
    if isinstance(miner, str | Mapping):
        return build_component(argument, miner, "miners")
    raise TypeError(
        f"{argument}: expected a PML miner, an oml in-batch triplet miner, a miner name or a {{name, args}} spec, "
        f"got {type(miner).__name__}"
    )


def _miner_factory(name: str) -> Callable[..., PMLMiner]:
    class_name = MINER_NAMES[name]
    cls = getattr(pml_module("miners"), class_name)
    params = [
        p.replace(annotation=component_annotation("distances")) if p.name == "distance" else p
        for p in constructor_parameters(cls)
    ]
    description, paper = MINERS[class_name]

    def build(args: dict[str, Any]) -> PMLMiner:
        if "distance" in args:
            args["distance"] = build_component("distance", args["distance"])
        return PMLMiner(cls(**args))

    doc = f"``pytorch_metric_learning.miners.{class_name}`` as an oml miner: {description} ({paper})."
    return make_factory(name, __name__, params, build, doc, PMLMiner)


#: ``miner_factory(name)``: the factory of the registered miner ``name``, built on first use and then kept as a
#: module attribute (``AttributeError`` for an unknown name); the module's ``__getattr__`` is the same.
miner_factory, __getattr__, __dir__ = lazy_factories(__name__, MINER_NAMES, _miner_factory)


__all__ = ["PMLMiner", "as_labels", "miner_factory", "resolve_miner"]
