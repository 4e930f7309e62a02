"""Retrieval post-processor interfaces: of retrieval results (``IRetrievalPostprocessor``, what the registry's
``postprocessor`` kind holds) and of a query-to-gallery distance matrix (``IDistancesPostprocessor``, OML's
older form)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from torch import Tensor


class IRetrievalPostprocessor(ABC):
    """Takes retrieval results (and the dataset they refer to) and returns improved ones (re-ranking)."""

    @abstractmethod
    def process(self, rr: Any, dataset: Any = None) -> Any:
        """Return new ``RetrievalResults`` built from ``rr`` (over ``dataset``, for those post-processors that
        need the items themselves); ``rr`` is left unchanged."""


class IDistancesPostprocessor(ABC):
    """This is a parent class for the classes which apply some postprocessing after query-to-gallery distance
    matrix has been calculated. For example, we may want to apply one of re-ranking techniques.

    The matrix is the caller's, whole: for memory-bounded re-ranking use an :class:`IRetrievalPostprocessor`.
    """

    @abstractmethod
    def process(self, distances: Tensor, queries: Any, galleries: Any) -> Tensor:
        """This method takes all the needed variables and returns the modified matrix of distances, where some
        distances are replaced with new ones.

        Args:
            distances: Matrix with the shape of ``[Q, G]``.
            queries: Queries in the amount of ``Q``.
            galleries: Galleries in the amount of ``G``.

        Returns:
            An updated distances matrix with the shape of ``[Q, G]``.
        """
