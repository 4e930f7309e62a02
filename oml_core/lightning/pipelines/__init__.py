"""Config-driven pipelines, run with PyTorch Lightning: functions of their typed config (the schemas of
:mod:`~oml_core.config.schemas`), into which a dict or ``DictConfig`` is converted once, at the
door (:func:`~oml_core.config.typed.validate_config`).

The pipelines are exported lazily (PEP 562): importing :mod:`oml_core.lightning.pipelines.shared` (the config
schema the command line checks a config against before anything runs) imports no pipeline, hence no Lightning.
"""

from typing import TYPE_CHECKING

from oml_core.utils.lazy import lazy_exports
from oml_core.utils.oml_path_folders import oml_paths_folder

# OML's module paths here that live elsewhere (oml_core.lightning.pipelines.logging): the folder of compat's tree
__path__.append(oml_paths_folder(__name__))

if TYPE_CHECKING:  # the same names for static type checkers and IDEs, as explicit re-exports
    from oml_core.lightning.pipelines.predict import PredictionResult as PredictionResult
    from oml_core.lightning.pipelines.predict import (
        extractor_prediction_pipeline as extractor_prediction_pipeline,
    )
    from oml_core.lightning.pipelines.train import TrainingResult as TrainingResult
    from oml_core.lightning.pipelines.train import extractor_training_pipeline as extractor_training_pipeline
    from oml_core.lightning.pipelines.train_postprocessor import (
        PostprocessorTrainingResult as PostprocessorTrainingResult,
    )
    from oml_core.lightning.pipelines.train_postprocessor import (
        postprocessor_training_pipeline as postprocessor_training_pipeline,
    )
    from oml_core.lightning.pipelines.validate import ValidationResult as ValidationResult
    from oml_core.lightning.pipelines.validate import (
        extractor_validation_pipeline as extractor_validation_pipeline,
    )
    from oml_core.lightning.pipelines.validate_postprocessor import (
        PostprocessorValidationResult as PostprocessorValidationResult,
    )
    from oml_core.lightning.pipelines.validate_postprocessor import (
        postprocessor_validation_pipeline as postprocessor_validation_pipeline,
    )

_EXPORTS = {
    "PredictionResult": "oml_core.lightning.pipelines.predict",
    "extractor_prediction_pipeline": "oml_core.lightning.pipelines.predict",
    "TrainingResult": "oml_core.lightning.pipelines.train",
    "extractor_training_pipeline": "oml_core.lightning.pipelines.train",
    "PostprocessorTrainingResult": "oml_core.lightning.pipelines.train_postprocessor",
    "postprocessor_training_pipeline": "oml_core.lightning.pipelines.train_postprocessor",
    "ValidationResult": "oml_core.lightning.pipelines.validate",
    "extractor_validation_pipeline": "oml_core.lightning.pipelines.validate",
    "PostprocessorValidationResult": "oml_core.lightning.pipelines.validate_postprocessor",
    "postprocessor_validation_pipeline": "oml_core.lightning.pipelines.validate_postprocessor",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted(_EXPORTS)
