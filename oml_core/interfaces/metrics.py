"""Metric interfaces."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from torch import LongTensor

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Dataset indices of a batch (OML's type alias of ``oml.interfaces.metrics``).
TIndices = LongTensor | list[int]


class IBasicMetric(ABC):
    """A base interface for the objects that calculate metrics.

    ``compute_metrics`` returns ``{overall_categories_key: {"metric": {k: value}}, "category1": {...}}``.
    """

    overall_categories_key: str = "OVERALL"

    @abstractmethod
    def setup(self, *args: Any, **kwargs: Any) -> Any:
        """Prepare to accumulate (allocate placeholders); called before the first :meth:`update`."""

    @abstractmethod
    def update(self, *args: Any, **kwargs: Any) -> Any:
        """Accumulate the outputs of one batch."""

    @abstractmethod
    def compute_metrics(self, *args: Any, **kwargs: Any) -> Any:
        """Compute the metrics over everything accumulated since :meth:`setup`."""


class IMetricDDP(IBasicMetric):
    """A metric that can gather its state from every process before computing."""

    @abstractmethod
    def sync(self) -> None:
        """Gather the accumulated data of all the processes (no-op when not distributed)."""


class IMetricVisualisable(IBasicMetric):
    """A metric that can draw its worst cases."""

    @abstractmethod
    def visualize(self) -> tuple[Collection[Figure], Collection[str]]:
        """Return figures and their titles."""
