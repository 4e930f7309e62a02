"""Config-driven pipelines (functions of a dict or ``DictConfig``), run with PyTorch Lightning."""

from oml_core.lightning.pipelines.train import TrainingResult, extractor_training_pipeline

__all__ = ["TrainingResult", "extractor_training_pipeline"]
