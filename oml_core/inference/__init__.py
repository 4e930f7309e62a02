"""Inference of extractors over datasets, image paths and dataframes (OML's ``oml.inference`` and
``oml.inference.flat``), and the batched loop the pairwise post-processors share."""

from oml_core.inference.batches import batched_inference, model_device
from oml_core.inference.flat import inference, inference_on_dataframe, inference_on_images

__all__ = ["batched_inference", "inference", "inference_on_dataframe", "inference_on_images", "model_device"]
