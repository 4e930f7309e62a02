"""Config-driven pipelines (functions of a dict or ``DictConfig``), run with PyTorch Lightning."""

from oml_core.lightning.pipelines.predict import PredictionResult, extractor_prediction_pipeline
from oml_core.lightning.pipelines.train import TrainingResult, extractor_training_pipeline
from oml_core.lightning.pipelines.train_postprocessor import (
    PostprocessorTrainingResult,
    postprocessor_training_pipeline,
)
from oml_core.lightning.pipelines.validate import ValidationResult, extractor_validation_pipeline
from oml_core.lightning.pipelines.validate_postprocessor import (
    PostprocessorValidationResult,
    postprocessor_validation_pipeline,
)

__all__ = [
    "PostprocessorTrainingResult",
    "PostprocessorValidationResult",
    "PredictionResult",
    "TrainingResult",
    "ValidationResult",
    "extractor_prediction_pipeline",
    "extractor_training_pipeline",
    "extractor_validation_pipeline",
    "postprocessor_training_pipeline",
    "postprocessor_validation_pipeline",
]
