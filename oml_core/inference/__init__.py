"""Inference of extractors over datasets, image paths and dataframes (OML's ``oml.inference`` and
``oml.inference.flat``), and the batched loop the pairwise post-processors share.

OML's ``pairwise_inference(model, base_dataset, pair_ids, num_workers, batch_size, ...)`` scores pairs of a
dataset's items with a pairwise model: it is oml-postprocessors' ``pairwise_inference_by_ids`` (the plugin's own
``pairwise_inference`` takes a dataset of pairs), found on first access through the installed post-processor
plugins by :mod:`oml_core.compat.postprocessor_names`: the core imports no plugin.
"""

from oml_core.inference.batches import batched_inference, model_device
from oml_core.inference.cached import inference_cached
from oml_core.inference.flat import inference, inference_on_dataframe, inference_on_images
from oml_core.utils.lazy import lazy_exports
from oml_core.utils.oml_path_folders import oml_paths_folder

# OML's module paths here that live elsewhere (oml_core.inference.abstract): the folder of compat's tree
__path__.append(oml_paths_folder(__name__))

# OML's name that lives in a plugin, from OML's compatibility package when it is asked for
__getattr__, __dir__ = lazy_exports(__name__, {"pairwise_inference": "oml_core.compat.postprocessor_names"})


__all__ = [
    "batched_inference",
    "inference",
    "inference_cached",
    "inference_on_dataframe",
    "inference_on_images",
    "model_device",
    "pairwise_inference",
]
