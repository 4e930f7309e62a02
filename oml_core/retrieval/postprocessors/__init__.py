"""Retrieval post-processors of the core (those that need no model)."""

from oml_core.retrieval.postprocessors.thresholding import (
    AdaptiveThresholding,
    ConstantThresholding,
    keep_first_items,
)
from oml_core.utils.oml_path_folders import oml_paths_folder

# OML's module paths here that live elsewhere (oml_core.retrieval.postprocessors.pairwise): the folder of compat's tree
__path__.append(oml_paths_folder(__name__))

__all__ = ["AdaptiveThresholding", "ConstantThresholding", "keep_first_items"]
