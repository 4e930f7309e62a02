"""oml plugin: the losses and miners of pytorch-metric-learning (PML), with its distances, reducers and
regularizers, in oml's registry.

Any PML loss is one config line: ``criterion: {name: pml_multi_similarity, args: {alpha: 2, beta: 50, base: 0.5,
miner: {name: MultiSimilarityMiner, args: {epsilon: 0.1}}}}``. The names are listed in :mod:`oml_pml.losses`
and :mod:`oml_pml.miners`, the naming rule in :mod:`oml_pml.names`.

The public classes are importable from the top level (``from oml_pml import PMLLoss``); they are imported
lazily on first access (PEP 562), so that loading the plugin module (``oml_pml.plugin``) imports neither torch
nor PML. The exports and ``__all__`` come from the plugin's table (:data:`oml_pml.plugin.COMPONENTS` and
:data:`~oml_pml.plugin.EXTRA_EXPORTS`); the imports below, explicit re-exports, are for static type checkers
and IDEs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oml_core.utils.lazy import table_exports
from oml_pml.plugin import COMPONENTS, EXTRA_EXPORTS

if TYPE_CHECKING:
    from oml_pml.components import build_component as build_component
    from oml_pml.losses import PMLLoss as PMLLoss
    from oml_pml.losses import loss_factory as loss_factory
    from oml_pml.losses import pml_cross_batch_memory as pml_cross_batch_memory
    from oml_pml.miners import PMLMiner as PMLMiner
    from oml_pml.miners import miner_factory as miner_factory
    from oml_pml.miners import resolve_miner as resolve_miner

__getattr__, __dir__, __all__ = table_exports(__name__, COMPONENTS, EXTRA_EXPORTS)
