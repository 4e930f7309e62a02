"""oml plugin: the losses and miners of pytorch-metric-learning (PML), with its distances, reducers and
regularizers, in oml's registry.

Any PML loss is one config line: ``criterion: {name: pml_multi_similarity, args: {alpha: 2, beta: 50, base: 0.5,
miner: {name: MultiSimilarityMiner, args: {epsilon: 0.1}}}}``. The names are listed in :mod:`oml_pml.losses`
and :mod:`oml_pml.miners`, the naming rule in :mod:`oml_pml.names`.

The public classes are importable from the top level (``from oml_pml import PMLLoss``); they are imported
lazily on first access (PEP 562), so that loading the plugin module (``oml_pml.plugin``) imports neither torch
nor PML.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports

if TYPE_CHECKING:
    from oml_pml.components import build_component
    from oml_pml.losses import PMLLoss, loss_factory, pml_cross_batch_memory
    from oml_pml.miners import PMLMiner, miner_factory, resolve_miner

_EXPORTS = {
    "PMLLoss": "oml_pml.losses",
    "loss_factory": "oml_pml.losses",
    "pml_cross_batch_memory": "oml_pml.losses",
    "PMLMiner": "oml_pml.miners",
    "miner_factory": "oml_pml.miners",
    "resolve_miner": "oml_pml.miners",
    "build_component": "oml_pml.components",
}

__all__ = [
    "PMLLoss",
    "PMLMiner",
    "build_component",
    "loss_factory",
    "miner_factory",
    "pml_cross_batch_memory",
    "resolve_miner",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
