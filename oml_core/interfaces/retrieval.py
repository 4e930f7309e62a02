"""Retrieval post-processor interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class IRetrievalPostprocessor(ABC):
    """Takes retrieval results (and the dataset they refer to) and returns improved ones (re-ranking)."""

    @abstractmethod
    def process(self, rr: Any, dataset: Any = None) -> Any:
        """Return new ``RetrievalResults`` built from ``rr`` (over ``dataset``, for those post-processors that
        need the items themselves); ``rr`` is left unchanged."""
