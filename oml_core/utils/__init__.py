"""Small helpers shared by the core and every plugin."""

from oml_core.utils.indexing import assign_2d, take_2d
from oml_core.utils.misc_torch import pairwise_dist
from oml_core.utils.pca import PCA

__all__ = ["PCA", "assign_2d", "pairwise_dist", "take_2d"]
