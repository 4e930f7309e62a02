"""Lightning callbacks."""

from oml_core.lightning.callbacks.metric import MetricValCallback

__all__ = ["MetricValCallback"]
