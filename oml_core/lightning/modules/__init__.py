"""Lightning modules."""

from oml_core.lightning.modules.extractor import ExtractorModule

__all__ = ["ExtractorModule"]
