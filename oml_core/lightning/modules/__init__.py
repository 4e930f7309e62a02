"""Lightning modules."""

from oml_core.lightning.modules.ddp import ModuleDDP
from oml_core.lightning.modules.extractor import ExtractorModule, ExtractorModuleDDP
from oml_core.lightning.modules.pairwise_postprocessing import PairwiseModule, PairwiseModuleDDP

__all__ = ["ExtractorModule", "ExtractorModuleDDP", "ModuleDDP", "PairwiseModule", "PairwiseModuleDDP"]
