"""Pipeline logger interface: a Lightning logger that also logs figures and the pipeline's config."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from pytorch_lightning.loggers import Logger

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class IFigureLogger(ABC):
    """Loggers able to store a matplotlib figure."""

    @abstractmethod
    def log_figure(self, fig: Figure, title: str, idx: int) -> None:
        """Log ``fig`` under ``title`` at step (or epoch) ``idx``."""


class IPipelineLogger(Logger, IFigureLogger):
    """The logger of pipelines: Lightning's ``Logger`` plus figures and the pipeline's info."""

    @abstractmethod
    def log_pipeline_info(self, cfg: dict[str, Any] | Any) -> None:
        """Log the run's config (and whatever else makes it reproducible: tags, dataframe, code)."""
