"""The closed sets of values of the training options, in a module that imports nothing: the config schema checks
against them before Lightning is imported (:mod:`~oml_core.config.schemas`), and the training
modules act on them (:mod:`oml_core.lightning.modules.optimization`)."""

#: When Lightning steps the scheduler: after every optimisation step, or after every epoch.
SCHEDULER_INTERVALS = ("step", "epoch")
#: What a NaN or infinite loss does: stop the run at that step, or skip the batch (no optimizer step).
NAN_POLICIES = ("stop", "skip_batch")

#: The formats of embeddings files (``predictions_format``): OML's JSON, Parquet, ``.npy`` (those of
#: :data:`oml_core.io.FORMATS`; a test keeps them equal).
PREDICTIONS_FORMATS = ("json", "parquet", "npy")

__all__ = ["NAN_POLICIES", "PREDICTIONS_FORMATS", "SCHEDULER_INTERVALS"]
