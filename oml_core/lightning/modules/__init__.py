"""Lightning modules."""

from oml_core.lightning.modules.ddp import ModuleDDP
from oml_core.lightning.modules.extractor import ExtractorModule, ExtractorModuleDDP

__all__ = ["ExtractorModule", "ExtractorModuleDDP", "ModuleDDP"]
