"""oml plugin package ``oml_models``: extractors (ResNet) and their building blocks.

``from oml_models import ResnetExtractor``; the plugin (:mod:`oml_models.plugin`) registers it as the
extractor ``resnet``.
"""

from oml_models.checkpoints import CheckpointError
from oml_models.pooling import GEM
from oml_models.resnet import ResnetExtractor

__all__ = ["GEM", "CheckpointError", "ResnetExtractor"]
