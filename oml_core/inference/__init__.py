"""Inference of extractors over datasets, image paths and dataframes (OML's ``oml.inference`` and
``oml.inference.flat``), and the batched loop the pairwise post-processors share.

OML's ``pairwise_inference(model, base_dataset, pair_ids, num_workers, batch_size, ...)`` scores pairs of a
dataset's items with a pairwise model: it is oml-postprocessors' ``pairwise_inference_by_ids`` (the plugin's own
``pairwise_inference`` takes a dataset of pairs), found on first access through the installed post-processor
plugins (:func:`oml_core.compat.modules.find_forwarded`): the core imports no plugin.
"""

import sys
from typing import Any

from oml_core.compat.modules import OmlModule, find_forwarded
from oml_core.inference.batches import batched_inference, model_device
from oml_core.inference.cached import inference_cached
from oml_core.inference.flat import inference, inference_on_dataframe, inference_on_images

#: OML's names of this package that live in plugins: ``{OML's name: (where to look, the plugin's name)}``.
_FORWARDED = {"pairwise_inference": (OmlModule(kinds=("postprocessor",)), "pairwise_inference_by_ids")}


def __getattr__(name: str) -> Any:
    if name not in _FORWARDED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    source, plugin_name = _FORWARDED[name]
    value = find_forwarded(__name__, source, plugin_name)
    setattr(sys.modules[__name__], name, value)
    return value


__all__ = [
    "batched_inference",
    "inference",
    "inference_cached",
    "inference_on_dataframe",
    "inference_on_images",
    "model_device",
    "pairwise_inference",
]
