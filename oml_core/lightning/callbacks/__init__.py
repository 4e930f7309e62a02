"""Lightning callbacks."""

from oml_core.lightning.callbacks.metric import MetricValCallback, MetricValCallbackDDP
from oml_core.lightning.callbacks.rng import RNGStateCallback

__all__ = ["MetricValCallback", "MetricValCallbackDDP", "RNGStateCallback"]
