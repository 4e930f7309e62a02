"""OML's names of real core modules whose objects live in the post-processor plugins here.

OML's ``oml.datasets.pairs.PairDataset`` (pairs of items of one dataset, what a re-ranker scores) and
``oml.inference.pairwise_inference(model, base_dataset, pair_ids, num_workers, batch_size, ...)`` are
oml-postprocessors' ``PairDataset`` and ``pairwise_inference_by_ids`` (the plugin's own ``pairwise_inference``
takes a dataset of pairs). :mod:`oml_core.datasets.pairs` and :mod:`oml_core.inference` export them lazily from
this module, which finds them, on first access, in the packages of the installed plugins that provide a
``postprocessor`` component (:func:`~oml_core.compat.modules.find_forwarded`): the core imports no plugin, and
nothing of this package until one of these names is asked for.
"""

from __future__ import annotations

from typing import Any

from oml_core.compat.modules import OmlModule, find_forwarded

#: Where the names are looked for: the post-processor plugins.
_POSTPROCESSORS = OmlModule(kinds=("postprocessor",))
#: ``{OML's name: the name the plugins export it under}``.
PLUGIN_NAMES = {"PairDataset": "PairDataset", "pairwise_inference": "pairwise_inference_by_ids"}


def __getattr__(name: str) -> Any:
    if name not in PLUGIN_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = find_forwarded(__name__, _POSTPROCESSORS, PLUGIN_NAMES[name])
    globals()[name] = value
    return value


__all__ = ["PLUGIN_NAMES", *PLUGIN_NAMES]
